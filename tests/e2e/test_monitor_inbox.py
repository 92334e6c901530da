"""Watch a run live and review it from the inbox, in two browsers, without reloading a page."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.live_app import AppServer
from tests.runner.providers.stub_server import StubServer, reply

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

LIVE_TIMEOUT_MS = 20_000
# Long enough for the recipe (at least 200 characters), markup that must show as text, and none
# of the words the recipe ends a run on.
STORY = (
    "The storm knocked twice before the keeper opened the door. It asked for tea and a dry "
    "chair, and told her of the ships it had carried home. <em>By morning</em> they were "
    "friends, and the sea stayed <script>window.injected = true</script> calm for a week."
)
REVISED = "REVISED: the storm is called Brann, and a small dragon keeps the lamp lit. " + STORY
COMMENT = "Give the storm a name, and add a small dragon."


# Keeps the paths of the page's open websockets in `window.__openSockets`, for a test to wait
# until the page listens before it makes the change the page must show.
TRACK_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  const open = (window.__openSockets = new Set());
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const path = new URL(this.url).pathname;
      this.addEventListener("open", () => open.add(path));
      this.addEventListener("close", () => open.delete(path));
    }
  };
})();
"""


def no_reload_marker(page: Page) -> None:
    """Mark the page's window: the mark survives anything but a reload or a navigation."""
    page.evaluate("window.__sameDocument = true")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__sameDocument === true"), f"{page.url} was reloaded"


def start_creative_writing_run(page: Page) -> int:
    """Start the demo recipe from the recipe list with a script that sends it to human review."""
    page.goto("/")
    page.get_by_role("link", name="Run Creative Writing with Quality Control").click()
    page.get_by_label("topic (string)").fill("a storm that befriends a lighthouse keeper")
    page.get_by_text("Scripted answers (dry run)").click()
    page.get_by_label("Answers of writer (demo-writer)").fill(f"{STORY}\n---\n{REVISED}")
    # The judge scores 5: not good enough to approve, too low to pass: a human must review.
    page.get_by_label("Answers of judge (demo-judge)").fill("5")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def test_a_reviewer_revises_a_run_live_and_its_author_watches_it_succeed(
    app_server: AppServer, login: Any, artifacts: Path
) -> None:
    author, reviewer = login("demo"), login("reviewer")
    inbox = reviewer.new_page()
    inbox.goto("/inbox/")
    expect(inbox.locator("#inbox-empty")).to_be_visible()
    no_reload_marker(inbox)
    # demo reviews for the same group: their inbox must lose the task once `reviewer` decides.
    author_inbox = author.new_page()
    author_inbox.goto("/inbox/")
    no_reload_marker(author_inbox)

    monitor = author.new_page()
    run_id = start_creative_writing_run(monitor)
    no_reload_marker(monitor)

    # The task appears in the reviewer's inbox, counted in the navigation and the title.
    task = inbox.locator(".task-card[data-status=open]")
    expect(task).to_have_count(1, timeout=LIVE_TIMEOUT_MS)
    expect(task).to_contain_text(f"run #{run_id}")
    # The story to review, escaped: its markup shows as text.
    expect(task.locator(".material")).to_contain_text("<em>By morning</em>")
    expect(inbox.locator("[data-inbox-count]")).to_have_text("1")
    expect(inbox).to_have_title(re.compile(r"^\(1\) Inbox"))
    expect(inbox.locator("#inbox-empty")).to_be_hidden()
    task_id = task.get_attribute("data-task-id")

    # Meanwhile the author's monitor shows the steps so far and the human step waiting.
    expect(monitor.locator(".step-card[data-step=generate_story]")).to_contain_text(
        "<em>By morning</em>", timeout=LIVE_TIMEOUT_MS
    )
    expect(monitor.locator(".step-card[data-step=evaluate_quality]")).to_contain_text(
        "judge scored 5 < 6"
    )
    human_step = monitor.locator(".step-card[data-step=editor_review]").first
    expect(human_step).to_contain_text("Waiting for a reviewer", timeout=LIVE_TIMEOUT_MS)
    expect(monitor.locator("#run-header")).to_contain_text("Waiting Human")
    inbox.screenshot(path=str(artifacts / "inbox.png"), full_page=True)

    # The reviewer asks for a revision.
    task.get_by_label(re.compile("^Comment")).fill(COMMENT)
    task.get_by_role("button", name="Revise").click()
    # The decided task leaves the reviewer's queue; the notice says what was recorded.
    expect(inbox.locator(f"#task-{task_id}")).to_have_count(0)
    expect(inbox.locator("#inbox-notices")).to_contain_text(f"You chose revise on task {task_id}")

    # The other reviewer's inbox loses the task, and says who decided it.
    expect(author_inbox.locator(f"#task-{task_id}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(author_inbox.locator("#inbox-notices")).to_contain_text(
        "was decided by reviewer: revise"
    )

    # The monitor shows the decision, then the revision step.
    expect(human_step).to_contain_text("reviewer chose revise", timeout=LIVE_TIMEOUT_MS)
    expect(human_step).to_contain_text(COMMENT)
    expect(human_step.locator(".evaluations li.taken")).to_contain_text("editor_wants_revision")
    revision = monitor.locator(".step-card[data-step=revise_story]")
    expect(revision).to_contain_text("REVISED: the storm is called Brann", timeout=LIVE_TIMEOUT_MS)
    expect(revision.locator(".prompt pre")).to_contain_text(COMMENT, use_inner_text=False)

    # The revised story comes back to review; the reviewer approves it.
    second = inbox.locator(".task-card[data-status=open]")
    expect(second).to_have_count(1, timeout=LIVE_TIMEOUT_MS)
    expect(second.locator(".material")).to_contain_text("REVISED: the storm is called Brann")
    # What changed since the first review, word by word, the reviewer's comment beside it.
    changes = second.locator(".revision")
    expect(changes).to_contain_text(COMMENT)
    expect(changes.locator("ins").first).to_contain_text("REVISED")
    second.get_by_role("button", name="Approve").click()
    expect(inbox.locator(".task-card")).to_have_count(0)
    expect(inbox.locator("#inbox-notices")).to_contain_text("You chose approve on task")

    # The author's monitor ends on the succeeded status, with the path highlighted.
    header = monitor.locator("#run-header")
    expect(header).to_contain_text("Succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(header).to_contain_text("Approved")
    expect(header.get_by_role("button", name="Cancel run")).to_have_count(0)
    expect(monitor.locator(".step-card")).to_have_count(5)
    expect(monitor.locator("#step-5")).to_contain_text("reviewer chose approve")
    expect(monitor.locator("#live-state")).to_have_text("The run has succeeded.")
    expect(monitor.locator("#run-graph canvas").first).to_be_attached()
    visited = monitor.evaluate(
        "() => [...document.querySelectorAll('.step-card')].map(c => c.dataset.step)"
    )
    assert visited == [
        "generate_story",
        "evaluate_quality",
        "editor_review",
        "revise_story",
        "editor_review",
    ]
    monitor.screenshot(path=str(artifacts / "monitor.png"), full_page=True)

    # Everything above happened live: no page was reloaded, no script was injected or failed.
    for page in (inbox, author_inbox, monitor):
        assert_not_reloaded(page)
    assert monitor.evaluate("window.injected === undefined")
    assert author.errors == [] and reviewer.errors == []


def test_the_run_list_shows_a_new_run_and_its_status_without_reloading(login: Any) -> None:
    author = login("demo")
    runs = author.new_page()
    runs.add_init_script(TRACK_SOCKETS)
    runs.goto("/runs/?recipe=creative-writing-qc")
    no_reload_marker(runs)
    # The list learns of a new run only from its socket: it must be listening before the start.
    runs.wait_for_function("window.__openSockets.has('/ws/runs/')")

    other = author.new_page()
    run_id = start_creative_writing_run(other)

    badge = runs.locator(f'[data-run-status="{run_id}"]')
    expect(badge).to_have_text("Waiting Human", timeout=LIVE_TIMEOUT_MS)
    other.once("dialog", lambda dialog: dialog.accept())  # "Cancel run #N?"
    other.locator("#run-header").get_by_role("button", name="Cancel run").click()
    expect(badge).to_have_text("Cancelled", timeout=LIVE_TIMEOUT_MS)
    assert_not_reloaded(runs)
    assert author.errors == []


STREAMED_RECIPE = """
import json
from django.contrib.auth import get_user_model
from workflows.models import Actor
from workflows.services import recipe_import, recipe_publish

Actor.objects.update_or_create(
    name="e2e-streaming-writer",
    defaults={{"kind": "llm", "provider": "openai", "model": "stub", "base_url": {base_url!r}}},
)
demo = get_user_model().objects.get(username="demo")
document = {{
    "format": "branchline.recipe/v1", "slug": "streamed-story", "name": "Streamed story",
    "inputs": {{"topic": {{"type": "string", "required": True}}}},
    "actors": {{"writer": "e2e-streaming-writer"}},
    "steps": [{{"key": "write", "name": "Write", "kind": "llm", "actor": "writer",
                "prompt": "Write about {{topic}}", "branches": []}}],
}}
recipe = recipe_import(user=demo, data=json.dumps(document).encode(), replace=True).recipe
recipe_publish(recipe=recipe, user=demo)
"""
CHUNKS = [
    "The first words ",
    "arrive ",
    "one ",
    "by ",
    "one, ",
    "and <b>the last words</b> end it.",
]


def test_a_running_steps_answer_streams_into_its_card(
    app_server: AppServer, stub_llm: StubServer, login: Any
) -> None:
    app_server.manage("shell", "-c", STREAMED_RECIPE.format(base_url=stub_llm.base_url))
    # The model keeps its last words back until the test has seen the answer mid-stream.
    last_words = threading.Event()
    stub_llm.enqueue(reply(chunks=CHUNKS, interval_s=0.3, hold=last_words))
    author = login("demo")
    page = author.new_page()
    page.goto("/recipes/streamed-story/run/")
    page.get_by_label("topic (string)").fill("lamps")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))

    try:
        stream = page.locator("#step-1[data-running] [data-stream]")
        expect(stream).to_contain_text("The first words", timeout=LIVE_TIMEOUT_MS)
        expect(stream).to_contain_text("one by one,", timeout=LIVE_TIMEOUT_MS)
        assert "the last words" not in stream.inner_text()  # still running: more is on its way
        # A monitor opened mid-answer shows it from its start, once.
        late = author.new_page()
        late.goto(page.url)
        late_stream = late.locator("#step-1[data-running] [data-stream]")
        expect(late_stream).to_contain_text(
            "The first words arrive one by one,", timeout=LIVE_TIMEOUT_MS
        )
        assert late_stream.inner_text().count("The first words") == 1
    finally:
        last_words.set()

    card = page.locator("#step-1")
    expect(card).to_contain_text("Succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(card.locator(".response pre")).to_have_text("".join(CHUNKS))
    expect(page.locator("#run-header")).to_contain_text("Succeeded")
    assert author.errors == []
