"""The run monitor shows the run's trace id when runs are traced, linked to the tracing
backend when `TRACE_URL_TEMPLATE` is set."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import tracing
from runner.models import Run
from runner.services import run_start
from workflows.models import Recipe
from workflows.services import recipe_publish


@pytest.fixture
def run(story: Recipe, author: Any) -> Run:
    recipe_publish(recipe=story, user=author)
    return run_start(user=author, recipe=story, inputs={"topic": "owls"})


@pytest.fixture
def traced() -> Iterator[None]:
    tracing.configure(tracing.make_provider(SimpleSpanProcessor(InMemorySpanExporter())))
    yield
    tracing.configure(None)


def test_the_monitor_shows_no_trace_when_runs_are_not_traced(web: Client, run: Run) -> None:
    tracing.configure(None)  # as a process without an OTLP endpoint is set up

    response = web.get(f"/runs/{run.pk}/")

    assert response.status_code == 200
    assert tracing.trace_id_hex(run.pk, run.created_at) not in response.content.decode()


def test_the_monitor_shows_the_runs_trace_id_when_runs_are_traced(
    web: Client, run: Run, traced: None
) -> None:
    response = web.get(f"/runs/{run.pk}/")

    trace_id = tracing.trace_id_hex(run.pk, run.created_at)
    assert f"Trace <code>{trace_id}</code>" in response.content.decode()


def test_the_monitor_links_the_trace_id_to_the_configured_backend(
    web: Client, run: Run, settings: Any
) -> None:
    settings.TRACE_URL_TEMPLATE = "http://jaeger.internal:16686/trace/{trace_id}"

    response = web.get(f"/runs/{run.pk}/")

    trace_id = tracing.trace_id_hex(run.pk, run.created_at)
    assert (
        f'<a href="http://jaeger.internal:16686/trace/{trace_id}" rel="noopener" '
        f'target="_blank"><code>{trace_id}</code></a>'
    ) in response.content.decode()


@pytest.mark.parametrize(
    "template",
    ["http://jaeger:16686/trace/", "jaeger:16686/trace/{trace_id}", "javascript:{trace_id}"],
)
def test_a_trace_url_template_without_an_http_address_and_the_id_stops_the_start(
    template: str,
) -> None:
    environment = {**os.environ, "SECRET_KEY": "settings-tests-only"}
    environment.update(DJANGO_SETTINGS_MODULE="config.settings", TRACE_URL_TEMPLATE=template)
    done = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.TRACE_URL_TEMPLATE"],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode != 0
    assert "TRACE_URL_TEMPLATE is an http(s) address holding {trace_id}" in done.stderr
