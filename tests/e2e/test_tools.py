"""Tools in a real browser: give an llm step a tool of the demo MCP server (run over stdio,
for real), test-run the recipe with a scripted model that asks for tool calls, and see the
calls in the test-run result and the run monitor; then make a tool step with its argument
form built from the tool's schema."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from runner.models import Run
from tests.e2e.live_app import AppServer
from tests.editor.conftest import STORY
from tests.runner.providers.stub_server import StubServer, reply, tool_calls
from tools.client import discover
from tools.models import ToolServer
from workflows.models import Recipe

from .conftest import BrowserPage
from .editor_page import apply_panel, click_settled, wait_saved, wait_settled

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

ASK_FOR_TOOLS = "@tool_calls: " + json.dumps(
    [
        {"name": "demo.add", "arguments": {"a": 2, "b": 3}},
        {"name": "demo.word_count", "arguments": {"text": "<b>three small words</b>"}},
    ]
)


@pytest.fixture
def demo_tools(transactional_db: None) -> ToolServer:
    """The demo MCP server, its tools discovered by really starting it."""
    server = ToolServer.objects.create(name="demo", transport="stdio", command="demo")
    discover(server)
    server.refresh_from_db()
    assert {t["name"] for t in server.tools} >= {"add", "word_count"}
    return server


def publish(page: Any) -> None:
    wait_saved(page)
    page.click("#tab-versions")
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .applied")


def test_an_author_gives_a_step_tools_and_sees_the_calls_of_a_test_run(
    browser_page: BrowserPage, story: Recipe, demo_tools: ToolServer, run_worker: Any
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    tools = page.locator("#panel fieldset.tools")
    assert tools.is_visible()
    assert not page.locator("#panel fieldset.tool-call").is_visible()  # a tool step's only
    add = tools.locator(".tool-item[data-tool='demo.add']")
    assert "Add two numbers." in add.inner_text()
    add.locator("summary").click()
    assert '"required"' in add.locator(".tool-schema pre").inner_text()
    add.locator("input[type=checkbox]").check()
    tools.locator(".tool-item[data-tool='demo.word_count'] input[type=checkbox]").check()
    page.fill("#panel [name='tools-max_tool_calls']", "4")
    browser_page.screenshot("tools-section")
    apply_panel(page)
    step = page.evaluate("branchline.nodeByKey('write').data('step')")
    assert step["tools"] == ["demo.add", "demo.word_count"]
    assert step["max_tool_calls"] == 4

    publish(page)
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    page.fill("#panel-testrun [name=input_topic]", "a lighthouse")
    page.fill("#panel-testrun [name=script_writer]", f"{ASK_FOR_TOOLS}\n---\n{STORY}")
    page.fill("#panel-testrun [name=script_judge]", "9")
    # demo.add is called for real (the demo server over stdio); word_count answered here.
    page.fill("#panel-testrun [name='script_tool.demo.word_count']", '{"words": 3, "by": "script"}')
    click_settled(page, "#panel-testrun button.primary")
    page.wait_for_selector("#testrun-live[data-run]")
    page.wait_for_function("branchline.testRunFinished", timeout=60000)
    page.wait_for_selector("#testrun-result .run-result .tool-calls")
    calls = page.locator("#testrun-result .tool-call-item")
    assert calls.count() == 2
    assert "demo.add" in calls.nth(0).inner_text() and "ms" in calls.nth(0).inner_text()
    calls.nth(0).locator("summary").click()
    assert "5" in calls.nth(0).locator("pre.result").inner_text()
    calls.nth(1).locator("summary").click()
    # Tool text is shown as text: the markup in the argument is not rendered.
    assert "<b>three small words</b>" in calls.nth(1).locator("pre.arguments").inner_text()
    assert calls.nth(1).locator("pre.result").inner_text() == '{"words": 3, "by": "script"}'
    assert page.locator("#testrun-result b").count() == 0
    browser_page.screenshot("test-run-tool-calls")

    run = Run.objects.get()
    assert run.status == "succeeded"
    stored = run.steps.get(step_key="write").details["tool_calls"]
    assert [c["tool"] for c in stored] == ["demo.add", "demo.word_count"]

    # After a reload, the run monitor shows them from the step's details.
    monitor = browser_page.open(f"/runs/{run.pk}/")
    section = monitor.locator("#step-1 .tool-calls")
    assert "Tool calls (2)" in section.locator("h3").inner_text()
    assert section.locator(".tool-call-item .badge.succeeded").count() == 2
    section.locator(".tool-call-item summary").first.click()
    assert '"a": 2' in section.locator("pre.arguments").first.inner_text()
    browser_page.screenshot("monitor-tool-calls")


def test_a_tool_step_gets_its_argument_form_from_the_tools_schema(
    browser_page: BrowserPage, story: Recipe, demo_tools: ToolServer
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.select_option("#panel [name=kind]", "tool")
    assert page.locator("#panel fieldset.tool-call").is_visible()
    assert not page.locator("#panel fieldset.tools").is_visible()

    page.select_option("#panel [name='tool-tool']", "demo.add")
    page.wait_for_selector("#panel [name='args-a']")
    assert "a (number, required)" in page.inner_text("#panel .tool-arguments")
    page.fill("#panel [name='args-a']", "{topic}")
    page.fill("#panel [name='args-b']", "three")
    # Another tool keeps no field of the first; back again, the typed values come along.
    page.select_option("#panel [name='tool-tool']", "demo.word_count")
    page.wait_for_selector("#panel [name='args-text']")
    assert page.locator("#panel [name='args-a']").count() == 0
    page.fill("#panel [name='args-text']", "{topic}")

    apply_panel(page)
    step = page.evaluate("branchline.nodeByKey('write').data('step')")
    assert step["kind"] == "tool"
    assert step["tool"] == "demo.word_count"
    assert step["arguments"] == {"text": "{topic}"}

    # A required argument left empty, and a number that is not one: refused on their fields.
    page.select_option("#panel [name='tool-tool']", "demo.add")
    page.wait_for_selector("#panel [name='args-a']")
    page.fill("#panel [name='args-b']", "three")
    wait_settled(page)
    page.wait_for_selector("#panel .tool-arguments .field-error")
    errors = page.inner_text("#panel .tool-arguments")
    assert "The tool needs a: write a value." in errors
    assert "'three' is not of type 'number'" in errors
    browser_page.screenshot("tool-step-errors")


# A recipe whose model (the stub, over HTTP) may call the demo server's `add` once.
TOOL_RECIPE = """
import json
from django.contrib.auth import get_user_model
from workflows.models import Actor
from workflows.services import recipe_import, recipe_publish

Actor.objects.update_or_create(
    name="e2e-tool-writer",
    defaults={{"kind": "llm", "provider": "openai", "model": "stub", "base_url": {base_url!r}}},
)
demo = get_user_model().objects.get(username="demo")
document = {{
    "format": "branchline.recipe/v1", "slug": "tool-sum", "name": "Tool sum",
    "inputs": {{"topic": {{"type": "string", "required": True}}}},
    "actors": {{"writer": "e2e-tool-writer"}},
    "steps": [{{"key": "sum", "name": "Sum", "kind": "llm", "actor": "writer",
                "prompt": "Add 2 and 3 for {{topic}}", "tools": ["demo.add"],
                "max_tool_calls": 1, "branches": []}}],
}}
recipe = recipe_import(user=demo, data=json.dumps(document).encode(), replace=True).recipe
recipe_publish(recipe=recipe, user=demo)
"""
LIVE_TIMEOUT_MS = 30_000


def test_a_running_steps_tool_calls_appear_live_in_its_card(
    app_server: AppServer, stub_llm: StubServer, login: Any
) -> None:
    app_server.manage("shell", "-c", TOOL_RECIPE.format(base_url=stub_llm.base_url))
    # The model asks for the tool, then (its one call used) answers, streamed; the answer's
    # last words wait until the test has seen the call in the still-running card.
    answered = threading.Event()
    stub_llm.enqueue(tool_calls(("demo__add", {"a": 2, "b": 3})))
    stub_llm.enqueue(reply(chunks=["The sum ", "is ", "five."], hold=answered))
    author = login("demo")
    page = author.new_page()
    page.goto("/recipes/tool-sum/run/")
    page.get_by_label("topic (string)").fill("lamps")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))

    try:
        live = page.locator("#step-1[data-running] .tool-calls .tool-call-item")
        expect(live).to_have_count(1, timeout=LIVE_TIMEOUT_MS)
        expect(live).to_contain_text("demo.add")
        expect(page.locator("#step-1 [data-tool-call-count]")).to_have_text("(1)")
        live.locator("summary").click()
        expect(live.locator("pre.result")).to_have_text("5.0")
        expect(live.locator("pre.arguments")).to_contain_text('"b": 3')
    finally:
        answered.set()

    card = page.locator("#step-1")
    expect(card).to_contain_text("Succeeded", timeout=LIVE_TIMEOUT_MS)
    # The card drawn again from the step's details holds the same call.
    expect(card.locator(".tool-call-item")).to_have_count(1)
    expect(card.locator(".response pre")).to_have_text("The sum is five.")
    assert author.errors == []
