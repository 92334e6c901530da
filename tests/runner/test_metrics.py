"""/metrics: refused to anyone but staff and the scraper's token, and the figures it reads from
the database (runs, queue, human tasks, step latency, model calls) in a format Prometheus
parses."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY as GLOBAL_REGISTRY
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from runner.models import HumanTask, ModelCall, Run, StepRun
from runner.status import RunStatus, StepStatus, TaskStatus
from tests.config.test_security_settings import fresh_process
from tests.conftest import Actors
from tests.runner.prometheus import promtool_check_metrics
from tests.runner.servers import require_binaries
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token-0123456789"
SHOW_TOKEN = "import django; django.setup(); from django.conf import settings; print('ok')"


@pytest.fixture
def version(recipe: Recipe, user: Any) -> RecipeVersion:
    return recipe_publish(recipe=recipe, user=user)


def make_run(version: RecipeVersion, user: Any, status: str, **fields: Any) -> Run:
    return Run.objects.create(
        recipe=version.recipe, version=version, created_by=user, status=status, **fields
    )


def make_step(run: Run, seq: int, **fields: Any) -> StepRun:
    fields.setdefault("kind", "llm")
    fields.setdefault("status", StepStatus.SUCCEEDED)
    fields.setdefault("finished_at", timezone.now())
    fields.setdefault("started_at", fields["finished_at"])
    return StepRun.objects.create(run=run, seq=seq, step_key=f"s{seq}", **fields)


def make_call(run: Run, **fields: Any) -> ModelCall:
    fields.setdefault("purpose", ModelCall.Purpose.ANSWER)
    fields.setdefault("latency_ms", 100)
    fields.setdefault("started_at", timezone.now())
    return ModelCall.objects.create(run=run, seq=1, **fields)


def scrape(client: Client, **headers: str) -> dict[str, Any]:
    """Return the parsed metric families of a successful scrape, by name."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    families = text_string_to_metric_families(response.content.decode())
    return {family.name: family for family in families}


def value(families: dict[str, Any], family: str, sample: str | None = None, **labels: str) -> float:
    """Return the value of the one sample of `family` named `sample` with exactly `labels`."""
    found = [
        s.value
        for s in families[family].samples
        if s.name == (sample or family) and s.labels == labels
    ]
    assert len(found) == 1, (family, labels, families[family].samples)
    return float(found[0])


def staff_client(staff_user: Any) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


# -- who may read it -------------------------------------------------------------------------


def test_it_refuses_anonymous_scrapes_and_says_how_to_authenticate() -> None:
    response = Client().get("/metrics")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"branchline_" not in response.content


def test_it_refuses_signed_in_users_who_are_not_staff(user: Any) -> None:
    client = Client()
    client.force_login(user)

    response = client.get("/metrics")

    assert response.status_code == 403
    assert b"branchline_" not in response.content


def test_it_serves_staff_a_body_prometheus_parses(staff_user: Any) -> None:
    families = scrape(staff_client(staff_user))

    assert {
        "branchline_runs",
        "branchline_run_queue_waiting",
        "branchline_run_queue_oldest_seconds",
        "branchline_human_tasks_open",
        "branchline_step_latency_seconds",
        "branchline_model_calls",
        "branchline_model_call_errors",
        "branchline_model_tokens",
        "branchline_model_cost",
    } <= set(families)
    assert families["branchline_model_calls"].type == "counter"
    assert value(families, "branchline_runs", status="queued") == 0


def test_a_scraper_with_the_token_needs_no_session(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN

    families = scrape(Client(), Authorization=f"Bearer {TOKEN}")

    assert "branchline_runs" in families


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer", f"Basic {TOKEN}", f"Token {TOKEN}"],
)
def test_a_wrong_token_is_refused(settings: Any, authorization: str) -> None:
    settings.METRICS_TOKEN = TOKEN

    response = Client().get("/metrics", headers={"Authorization": authorization})

    assert response.status_code == 401
    assert b"branchline_" not in response.content


def test_a_wrong_token_is_refused_even_with_a_staff_session(settings: Any, staff_user: Any) -> None:
    settings.METRICS_TOKEN = TOKEN

    response = staff_client(staff_user).get(
        "/metrics", headers={"Authorization": "Bearer not-the-token-at-all"}
    )

    assert response.status_code == 401


def test_no_token_opens_it_when_none_is_configured(settings: Any) -> None:
    settings.METRICS_TOKEN = ""

    response = Client().get("/metrics", headers={"Authorization": "Bearer "})

    assert response.status_code == 401


def test_it_only_answers_reads(staff_user: Any) -> None:
    assert staff_client(staff_user).post("/metrics").status_code == 405


@pytest.mark.parametrize(
    ("token", "message"),
    [("short", "at least 16"), ("has spaces in it, sixteen+", "without spaces")],
)
def test_a_bad_token_setting_stops_the_start(token: str, message: str) -> None:
    done = fresh_process(["-c", SHOW_TOKEN], METRICS_TOKEN=token)

    assert done.returncode != 0
    assert message in done.stderr


# -- what it says ----------------------------------------------------------------------------


def test_it_counts_runs_queue_tasks_latency_and_model_calls(
    staff_user: Any, user: Any, version: RecipeVersion, actors: Actors
) -> None:
    now = timezone.now()
    done = make_run(version, user, RunStatus.SUCCEEDED)
    make_run(version, user, RunStatus.SUCCEEDED)
    make_run(version, user, RunStatus.FAILED)
    # Waiting to be claimed: a next step and no lease; the running one is held by a worker.
    make_run(
        version,
        user,
        RunStatus.QUEUED,
        next={"step": "write"},
        enqueued_at=now - timedelta(seconds=90),
    )
    make_run(
        version,
        user,
        RunStatus.RUNNING,
        next={"step": "write"},
        lease_token="t",
        lease_expires_at=now + timedelta(seconds=30),
    )
    make_run(version, user, RunStatus.WAITING_HUMAN)
    make_step(done, 1, actor_name="scripted-writer", latency_ms=80)
    make_step(done, 2, actor_name="scripted-writer", latency_ms=400)
    make_step(done, 3, actor_name="scripted-writer", latency_ms=3000)
    # Finished before the window: not in the histogram.
    make_step(
        done, 4, actor_name="scripted-writer", latency_ms=50, finished_at=now - timedelta(days=2)
    )
    review = make_step(
        done,
        5,
        kind="human",
        actor_name="@human:editors",
        latency_ms=2 * 3600 * 1000,
        status=StepStatus.DECIDED,
    )
    for seq, status in ((6, TaskStatus.OPEN), (7, TaskStatus.OPEN), (8, TaskStatus.DECIDED)):
        HumanTask.objects.create(
            run=done,
            step_run=make_step(done, seq, kind="human", status=StepStatus.WAITING_HUMAN),
            step_key="review",
            group=actors.reviewers,
            question="Good?",
            status=status,
        )
    assert review.latency_ms
    make_call(
        done,
        actor_name="scripted-writer",
        tokens_in=10,
        tokens_out=20,
        cost=Decimal("0.0015"),
        currency="USD",
    )
    make_call(
        done,
        actor_name="scripted-writer",
        purpose=ModelCall.Purpose.VALIDATION,
        tokens_in=7,
        tokens_out=3,
        cost=Decimal("0.0005"),
        currency="USD",
    )
    make_call(done, actor_name="scripted-writer", error="timed out after 30 s")
    make_call(
        done,
        actor_name="scripted-judge",
        purpose=ModelCall.Purpose.JUDGE,
        tokens_in=5,
        tokens_out=1,
    )

    families = scrape(staff_client(staff_user))

    runs = {s.labels["status"]: s.value for s in families["branchline_runs"].samples}
    assert runs == {
        "queued": 1,
        "running": 1,
        "waiting_human": 1,
        "succeeded": 2,
        "failed": 1,
        "cancelled": 0,
        "ended": 0,
    }
    assert value(families, "branchline_run_queue_waiting") == 1
    assert 89 <= value(families, "branchline_run_queue_oldest_seconds") < 150
    assert value(families, "branchline_human_tasks_open", group=actors.reviewers.name) == 2

    latency = "branchline_step_latency_seconds"
    writer = {"kind": "llm", "actor": "scripted-writer"}
    bucket = f"{latency}_bucket"
    assert value(families, latency, bucket, le="0.1", **writer) == 1
    assert value(families, latency, bucket, le="0.25", **writer) == 1
    assert value(families, latency, bucket, le="0.5", **writer) == 2
    assert value(families, latency, bucket, le="2.5", **writer) == 2
    assert value(families, latency, bucket, le="5.0", **writer) == 3
    assert value(families, latency, bucket, le="+Inf", **writer) == 3
    assert value(families, f"{latency}_gsum", **writer) == pytest.approx(3.48)
    assert value(families, f"{latency}_gcount", **writer) == 3
    human = {"kind": "human", "actor": "@human:editors"}
    assert value(families, latency, bucket, le="3600.0", **human) == 0
    assert value(families, latency, bucket, le="14400.0", **human) == 1
    buckets = [s for s in families[latency].samples if s.labels.get("actor") == "scripted-writer"]
    assert [s.labels["le"] for s in buckets][-1] == "+Inf"
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)  # cumulative

    calls = "branchline_model_calls"
    assert value(families, calls, f"{calls}_total", actor="scripted-writer", purpose="answer") == 2
    assert (
        value(families, calls, f"{calls}_total", actor="scripted-writer", purpose="validation") == 1
    )
    assert value(families, calls, f"{calls}_total", actor="scripted-judge", purpose="judge") == 1
    errors = "branchline_model_call_errors"
    assert (
        value(families, errors, f"{errors}_total", actor="scripted-writer", purpose="answer") == 1
    )
    assert value(families, errors, f"{errors}_total", actor="scripted-judge", purpose="judge") == 0
    tokens = "branchline_model_tokens"
    assert (
        value(families, tokens, f"{tokens}_total", actor="scripted-writer", direction="input") == 17
    )
    assert (
        value(families, tokens, f"{tokens}_total", actor="scripted-writer", direction="output")
        == 23
    )
    assert (
        value(families, tokens, f"{tokens}_total", actor="scripted-judge", direction="input") == 5
    )
    cost = "branchline_model_cost"
    assert value(families, cost, f"{cost}_total", actor="scripted-writer", currency="USD") == (
        pytest.approx(0.002)
    )
    # The judge has no price: no cost series rather than a cost of 0.
    assert not [s for s in families[cost].samples if s.labels.get("actor") == "scripted-judge"]


def test_the_latency_window_is_a_setting(
    settings: Any, staff_user: Any, user: Any, version: RecipeVersion
) -> None:
    run = make_run(version, user, RunStatus.SUCCEEDED)
    make_step(
        run, 1, actor_name="w", latency_ms=80, finished_at=timezone.now() - timedelta(hours=3)
    )
    settings.METRICS_LATENCY_WINDOW_HOURS = 2
    families = scrape(staff_client(staff_user))
    assert not families["branchline_step_latency_seconds"].samples

    settings.METRICS_LATENCY_WINDOW_HOURS = 4
    families = scrape(staff_client(staff_user))
    assert (
        value(
            families,
            "branchline_step_latency_seconds",
            "branchline_step_latency_seconds_bucket",
            le="+Inf",
            kind="llm",
            actor="w",
        )
        == 1
    )


def test_label_values_are_escaped(staff_user: Any, user: Any, version: RecipeVersion) -> None:
    run = make_run(version, user, RunStatus.SUCCEEDED)
    hostile = 'odd "actor"\nname\\'
    make_call(run, actor_name=hostile, tokens_in=1, tokens_out=1)

    families = scrape(staff_client(staff_user))

    tokens = "branchline_model_tokens"
    assert value(families, tokens, f"{tokens}_total", actor=hostile, direction="input") == 1


def test_promtool_finds_nothing_to_flag_in_a_scrape(
    staff_user: Any, user: Any, version: RecipeVersion, actors: Actors
) -> None:
    require_binaries(redis=False, prometheus=True)
    run = make_run(version, user, RunStatus.QUEUED, next={"step": "write"})
    make_step(run, 1, actor_name="scripted-writer", latency_ms=80)
    HumanTask.objects.create(
        run=run,
        step_run=make_step(run, 2, kind="human", status=StepStatus.WAITING_HUMAN),
        step_key="review",
        group=actors.reviewers,
        question="Good?",
    )
    make_call(run, actor_name="scripted-writer", tokens_in=3, cost=Decimal("0.01"), currency="USD")
    make_call(run, actor_name="scripted-judge", error="timed out after 30 s")

    body = staff_client(staff_user).get("/metrics").content.decode()

    assert all(family.samples for family in text_string_to_metric_families(body)), body
    assert promtool_check_metrics(body) == (0, ""), body


def test_it_speaks_openmetrics_to_a_scraper_that_asks(staff_user: Any) -> None:
    response = staff_client(staff_user).get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in openmetrics_families(response.content.decode())}
    assert families["branchline_step_latency_seconds"].type == "gaugehistogram"
    assert isinstance(families["branchline_runs"].samples[0], Sample)


def test_it_keeps_its_figures_out_of_the_global_registry(staff_user: Any) -> None:
    scrape(staff_client(staff_user))

    assert GLOBAL_REGISTRY.get_sample_value("branchline_run_queue_waiting") is None
