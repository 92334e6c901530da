"""The editor's test run runs an unsaved change of the canvas and follows it over the websocket."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.live_app import AppServer

from .editor_page import apply_panel, click_settled, edge_classes

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

LIVE_TIMEOUT_MS = 20_000
SLUG = "draft-live"
ANSWER = "A tale of the sea."

# A draft never published: an answer longer than 1000 characters ends the run, any other
# completes it. The test lowers the limit on the canvas, unsaved, so the answer ends the run.
DRAFT_RECIPE = """
from django.contrib.auth import get_user_model
from workflows.services import recipe_import

demo = get_user_model().objects.get(username="demo")
recipe_import(user=demo, data={document!r}, replace=True)
"""
DOCUMENT: dict[str, Any] = {
    "format": "branchline.recipe/v1",
    "slug": SLUG,
    "name": "Draft run live",
    "inputs": {"topic": {"type": "string", "required": True}},
    "actors": {"writer": "demo-writer"},
    "steps": [
        {
            "key": "write",
            "name": "Write",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Write about {topic}",
            "branches": [
                {
                    "name": "too_long",
                    "priority": 1,
                    "when": {"type": "length_check", "operator": "greater_than", "value": 1000},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
                {
                    "name": "done",
                    "priority": 2,
                    "when": {"type": "default"},
                    "action": "QUALITY_APPROVED",
                    "target": "@complete",
                },
            ],
        }
    ],
}
SAVED_LIMIT = """
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
recipe = Recipe.objects.get(slug="draft-live")
limit = document_from_recipe(recipe)["steps"][0]["branches"][0]["when"]["value"]
print("saved:", limit, recipe.versions.published().count())
"""

# Records the path of every websocket the page opens, in `window.__socketsOpened`.
RECORD_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  const opened = (window.__socketsOpened = []);
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const path = new URL(this.url).pathname;
      this.addEventListener("open", () => opened.push(path));
    }
  };
})();
"""


def test_the_test_panel_runs_an_unsaved_change_and_its_result_arrives_over_the_websocket(
    app_server: AppServer, login: Any
) -> None:
    app_server.manage("shell", "-c", DRAFT_RECIPE.format(document=json.dumps(DOCUMENT)))
    author = login("demo")
    page = author.new_page()
    page.add_init_script(RECORD_SOCKETS)
    # The edit below must stay unsaved while the test run goes: no autosave.
    page.add_init_script("localStorage.setItem('branchline.autosave', 'off')")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"/recipes/{SLUG}/")
    page.wait_for_function("window.branchline && window.branchline.ready")

    # Lower the limit on the canvas, without saving.
    page.click("#outline .outline-item.branch >> text=len > 1000")
    page.wait_for_selector("#panel [name='c-value']")
    page.fill("#panel [name='c-value']", "5")
    apply_panel(page)
    expect(page.locator("#save-state")).to_contain_text("Unsaved")

    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    expect(page.locator("#panel-testrun")).to_contain_text("as the canvas shows it")
    page.fill("#panel-testrun [name=input_topic]", "the sea")
    page.fill("#panel-testrun [name=script_writer]", ANSWER)
    click_settled(page, "#panel-testrun button.primary")
    live = page.locator("#testrun-live[data-run]")
    expect(live).to_be_attached()
    run_id = live.get_attribute("data-run")

    # The run's events arrive over its websocket: the canvas shows the path, then the result.
    page.wait_for_function("branchline.testRunFinished", timeout=LIVE_TIMEOUT_MS)
    result = page.locator("#testrun-result .run-result")
    expect(result).to_contain_text(f"Run #{run_id}: ended")
    expect(result).to_contain_text("too_long")
    assert "run-taken" in edge_classes(page, "write", "too_long")
    assert "run-taken" not in edge_classes(page, "write", "done")
    assert page.evaluate("branchline.testRunTransport") == "websocket"
    assert f"/ws/runs/{run_id}/" in page.evaluate("window.__socketsOpened")
    assert not [url for url in requested if "/events" in url], "the panel polled for events"

    # The change is still unsaved, and nothing was published.
    expect(page.locator("#save-state")).to_contain_text("Unsaved")
    output = app_server.manage("shell", "-c", SAVED_LIMIT).splitlines()
    assert "saved: 1000 0" in output
    assert author.errors == []
