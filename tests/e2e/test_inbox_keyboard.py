"""The review queue triaged by keyboard only: j/k move, a/r/v decide (sent once the undo window
closes, or taken back with u or Undo, or sent on leaving the page), c or / focus the comment,
m claims (seen live by another reviewer); decided tasks leave the list; rows tell tasks apart;
a phone gets one column and folded filters."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.live_app import AppServer

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

LIVE_TIMEOUT_MS = 20_000
PASSWORD = "e2e-keyboard-password"
USERS = ("kbd-reviewer", "kbd-colleague")
MATERIALS = [
    "The first story: a lighthouse keeper finds a map.",
    "The second story: a whale sings to a gull.",
    "The third story: a storm asks for tea.",
]
BEFORE = "The storm knocked twice. It asked for tea."
AFTER = "The storm, Brann, knocked twice. It asked for tea and a chair."

# Reviewers of a group of their own (the other browser tests' inboxes see none of it): three
# tasks, the first due soon (an overdue one would time out: the server's beat runs), and a
# fourth whose step was revised and came back for review.
SET_UP = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from runner.models import HumanTask
from tests.runner.open_tasks import park_runs, review_again
from workflows.models import Recipe

group, _ = Group.objects.get_or_create(name="keyboard-reviewers")
for name in {users!r}:
    user = get_user_model().objects.create_user(name, password={password!r})
    user.groups.add(group)
recipe = Recipe.objects.get(slug="creative-writing-qc")
demo = get_user_model().objects.get(username="demo")
tasks = [park_runs(recipe, demo, group, 1, material=m)[0] for m in {materials!r}]
HumanTask.objects.filter(pk=tasks[0].pk).update(due_at=timezone.now() + timedelta(minutes=20))
first = park_runs(recipe, demo, group, 1, material={before!r})[0]
revised = review_again(first, {after!r})
print(json.dumps([t.pk for t in tasks] + [revised.pk]))
"""

DECISIONS = """
import json
from runner.models import HumanTask
rows = HumanTask.objects.filter(pk__in={ids!r}).order_by("pk")
print(json.dumps([[t.pk, t.status, t.decision, t.comment, t.decided_by.username] for t in rows]))
"""


def test_the_inbox_is_triaged_by_keyboard_only(
    app_server: AppServer, login: Any, artifacts: Path
) -> None:
    output = app_server.manage(
        "shell",
        "-v0",
        "-c",
        SET_UP.format(
            users=USERS, password=PASSWORD, materials=MATERIALS, before=BEFORE, after=AFTER
        ),
    )
    first, second, third, revised = json.loads(output)
    for name in USERS:
        app_server.passwords[name] = PASSWORD
    reviewer, colleague = login(USERS[0]), login(USERS[1])
    page = reviewer.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/inbox/")
    other = colleague.new_page()
    other.goto("/inbox/")
    rows = page.locator("#inbox-list .task-row")
    selected = page.locator(".task-card.selected")

    # A list of four, the oldest selected and shown; the one due soon badged; the keys listed.
    expect(rows).to_have_count(4)
    expect(page.locator("#inbox-keys")).to_contain_text("approve")
    expect(page.locator(f"#row-{first}")).to_have_attribute("aria-current", "true")
    expect(selected).to_have_attribute("id", f"task-{first}")
    expect(page.locator(f"#row-{first} .badge.due-soon")).to_have_text("Due soon")
    expect(selected.locator(".badge.due-soon")).to_have_text("Due soon")
    expect(page.locator(f"#row-{revised} .badge.revised")).to_have_text("Revised")
    page.screenshot(path=str(artifacts / "inbox-keyboard-list.png"), full_page=True)

    # j and k move the selection; only the selected card shows.
    page.keyboard.press("j")
    expect(selected).to_have_attribute("id", f"task-{second}")
    expect(page.locator(f"#task-{first}")).to_be_hidden()
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(selected).to_have_attribute("id", f"task-{revised}")
    # The revised answer: what changed since the last review, word by word.
    expect(selected.locator(".revision ins").first).to_contain_text("Brann")
    page.screenshot(path=str(artifacts / "inbox-keyboard-diff.png"), full_page=True)
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(selected).to_have_attribute("id", f"task-{first}")

    # m claims the selected task: the other reviewer sees who is on it, live.
    page.keyboard.press("m")
    expect(selected.locator("form.claim")).to_contain_text("You are on it")
    expect(other.locator(f"#task-{first} form.claim")).to_contain_text(
        f"{USERS[0]} is on it", timeout=LIVE_TIMEOUT_MS
    )
    expect(other.locator(f"#row-{first}")).to_contain_text(f"{USERS[0]} is on it")

    # a approves: the next task is selected at once; once the undo window closes, the task
    # leaves both lists.
    page.keyboard.press("a")
    expect(selected).to_have_attribute("id", f"task-{second}")
    expect(page.locator(f"#row-{first} .badge.held")).to_have_text(
        re.compile(r"Approve: held, \d s")
    )
    expect(page.locator(f"#task-{first}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#inbox-notices")).to_contain_text(f"You chose approve on task {first}")
    expect(rows).to_have_count(3)
    expect(other.locator(f"#task-{first}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(other.locator("#inbox-notices")).to_contain_text(f"was decided by {USERS[0]}: approve")

    # r rejects the next.
    page.keyboard.press("r")
    expect(selected).to_have_attribute("id", f"task-{third}")
    expect(page.locator(f"#task-{second}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)

    # v without a comment asks for one and focuses it; c and / focus it too; Esc leaves it.
    comment = selected.locator("textarea")
    page.keyboard.press("v")
    expect(comment).to_be_focused()
    expect(page.locator("#inbox-notices")).to_contain_text("Say what to revise")
    page.keyboard.press("Escape")
    expect(comment).not_to_be_focused()
    page.keyboard.press("/")
    expect(comment).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("c")
    expect(comment).to_be_focused()
    page.keyboard.type("Give the storm a name.")  # typed keys are text, not shortcuts
    expect(rows).to_have_count(2)
    page.screenshot(path=str(artifacts / "inbox-keyboard-comment.png"), full_page=True)
    page.keyboard.press("Escape")
    page.keyboard.press("v")
    expect(selected).to_have_attribute("id", f"task-{revised}")
    expect(page.locator(f"#task-{third}")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#inbox-notices")).to_contain_text(f"You chose revise on task {third}")
    expect(rows).to_have_count(1)
    page.screenshot(path=str(artifacts / "inbox-keyboard-after.png"), full_page=True)

    recorded = json.loads(
        app_server.manage("shell", "-v0", "-c", DECISIONS.format(ids=[first, second, third]))
    )
    assert recorded == [
        [first, "decided", "approve", "", USERS[0]],
        [second, "decided", "reject", "", USERS[0]],
        [third, "decided", "revise", "Give the storm a name.", USERS[0]],
    ]

    # On a phone: one column, the list above the selected card, nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    layout = page.locator("#inbox-layout")
    widths = layout.evaluate("el => [el.scrollWidth, el.clientWidth]")
    assert widths[0] <= widths[1], widths
    list_box = page.locator(".inbox-list-pane").bounding_box()
    card_box = selected.bounding_box()
    assert list_box is not None and card_box is not None
    assert card_box["y"] >= list_box["y"] + list_box["height"]
    page.screenshot(path=str(artifacts / "inbox-keyboard-phone.png"), full_page=True)
    assert reviewer.errors == [] and colleague.errors == []
