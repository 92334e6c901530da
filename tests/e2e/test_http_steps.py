"""An http step in a real browser: added from the palette, pointed at a local server (on
loopback, allowed through PROVIDER_URL_ALLOWLIST), test-run from the editor, its answer shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from runner.models import Run
from tests.runner.http_server import HttpTestServer

from .conftest import BrowserPage
from .editor_page import add_step, apply_panel, click_settled

pytestmark = pytest.mark.e2e


@pytest.fixture
def http_server(settings: Any) -> Iterator[HttpTestServer]:
    with HttpTestServer() as server:
        settings.PROVIDER_URL_ALLOWLIST = [server.address]
        yield server


def test_an_author_adds_an_http_step_from_the_palette_and_test_runs_it(
    browser_page: BrowserPage, e2e_user: Any, http_server: HttpTestServer, run_worker: Any
) -> None:
    page = browser_page.open("/")
    page.click("text=New recipe")
    page.fill("#id_name", "Fetch items")
    page.click("button[name=create]")
    browser_page.wait_ready()

    add_step(page, "http")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    assert page.input_value("#panel [name=kind]") == "http"
    request = page.locator("#panel fieldset.http-request")
    assert request.is_visible()
    assert not page.locator("#panel fieldset.tool-call").is_visible()
    page.fill("#panel [name=name]", "Fetch")
    page.fill("#panel [name=key]", "fetch")
    page.fill("#panel [name='http-url']", http_server.url("/json"))
    page.fill("#panel [name='http-query']", '{"page": "1"}')
    browser_page.screenshot("http-request-section")
    apply_panel(page)
    step = page.evaluate("branchline.nodeByKey('fetch').data('step')")
    assert step["kind"] == "http"
    assert step["url"] == http_server.url("/json")
    assert step["query"] == {"page": "1"}
    label = page.evaluate("branchline.nodeByKey('fetch').data('label')")
    assert label == "Fetch\nHTTP request · GET"

    page.click("#tab-testrun")
    click_settled(page, "#panel-testrun button.primary")
    page.wait_for_selector("#testrun-live[data-run]")
    page.wait_for_function("branchline.testRunFinished", timeout=30000)
    page.wait_for_selector("#testrun-result .run-result")
    result = page.locator("#testrun-result")
    assert "succeeded" in result.inner_text()
    result.locator(".run-steps details summary").first.click()
    answer = result.locator("pre.response").first.inner_text()
    assert json.loads(answer) == {"count": 7, "name": "widget"}
    browser_page.screenshot("http-test-run")

    assert http_server.received("/json")[0].query == {"page": "1"}
    run = Run.objects.get()
    fetch = run.steps.get(step_key="fetch")
    assert fetch.details["http"]["status"] == 200
