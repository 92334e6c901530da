"""An inbox with more open tasks than a page: the count stays exact, "Load more" pages on, and a
snapshot after missed changes removes only the cards it proves closed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from editor.views.inbox import PAGE_SIZE
from tests.e2e.live_app import AppServer

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

# The catch-up's rounds find a change made by another process (its push cannot reach the
# server's in-memory channel layer) within two of them, two seconds apart.
CATCH_UP_TIMEOUT_MS = 20_000
USERNAME = "paging-reviewer"
PASSWORD = "e2e-paging-password"
PARKED = PAGE_SIZE + 5

# A reviewer of a group of their own, so that the other browser tests' inboxes see none of it.
SET_UP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from tests.runner.open_tasks import park_runs
from workflows.models import Recipe

group, _ = Group.objects.get_or_create(name="paging-reviewers")
user = get_user_model().objects.create_user({username!r}, password={password!r})
user.groups.add(group)
recipe = Recipe.objects.get(slug="creative-writing-qc")
demo = get_user_model().objects.get(username="demo")
print(" ".join(str(task.pk) for task in park_runs(recipe, demo, group, {count})))
"""

# Changes made behind the server's back: no push reaches the page, only the catch-up.
CLOSE_QUIETLY = """
from runner.models import HumanTask
HumanTask.objects.filter(pk={task_id}).update(status="decided", decision="approve")
"""
OPEN_QUIETLY = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from tests.runner.open_tasks import park_runs
from workflows.models import Recipe

recipe = Recipe.objects.get(slug="creative-writing-qc")
demo = get_user_model().objects.get(username="demo")
print(park_runs(recipe, demo, Group.objects.get(name="paging-reviewers"), 1)[0].pk)
"""


def test_an_inbox_of_many_tasks_pages_and_keeps_its_count(
    app_server: AppServer, login: Any
) -> None:
    output = app_server.manage(
        "shell", "-v0", "-c", SET_UP.format(username=USERNAME, password=PASSWORD, count=PARKED)
    )
    parked = [int(pk) for pk in output.split()]
    app_server.passwords[USERNAME] = PASSWORD
    reviewer = login(USERNAME)
    inbox = reviewer.new_page()
    inbox.goto("/inbox/")
    cards = inbox.locator(".task-card")
    more = inbox.locator("#inbox-more")  # hidden with its row when nothing more is open

    # The oldest page, the whole count, and more to load.
    expect(cards).to_have_count(PAGE_SIZE)
    expect(inbox.locator("[data-inbox-total]")).to_have_text(str(PARKED))
    expect(inbox).to_have_title(re.compile(rf"^\({PARKED}\) Inbox"))
    inbox.evaluate("window.__sameDocument = true")
    more.click()
    expect(cards).to_have_count(PARKED)
    expect(more).to_be_hidden()
    assert [int(i) for i in cards.evaluate_all("cs => cs.map(c => c.dataset.taskId)")] == parked

    # A task of the first page closes and one opens, both unheard: the catch-up's snapshot
    # removes the first's card and counts the second, which "Load more" brings.
    closed = parked[2]
    app_server.manage("shell", "-v0", "-c", CLOSE_QUIETLY.format(task_id=closed))
    expect(inbox.locator(f"#task-{closed}")).to_have_count(0, timeout=CATCH_UP_TIMEOUT_MS)
    expect(inbox.locator("#inbox-notices")).to_contain_text(f"Task {closed} is no longer open.")
    expect(inbox.locator("[data-inbox-total]")).to_have_text(str(PARKED - 1))
    opened = int(app_server.manage("shell", "-v0", "-c", OPEN_QUIETLY))
    expect(inbox.locator("[data-inbox-total]")).to_have_text(
        str(PARKED), timeout=CATCH_UP_TIMEOUT_MS
    )
    expect(more).to_be_visible()
    more.click()
    expect(inbox.locator(f"#task-{opened}")).to_have_count(1)
    expect(cards).to_have_count(PARKED)
    expect(more).to_be_hidden()
    assert cards.last.get_attribute("id") == f"task-{opened}"

    # Deciding one here takes its card off the queue, saying what was recorded; the count
    # follows, and the next task is selected.
    first = cards.first
    first_id = first.get_attribute("data-task-id")
    first.get_by_role("button", name="Approve").click()
    expect(inbox.locator(f"#task-{first_id}")).to_have_count(0)
    expect(inbox.locator("#inbox-notices")).to_contain_text(f"You chose approve on task {first_id}")
    expect(inbox.locator(".task-card.selected")).to_have_count(1)
    expect(inbox.locator("[data-inbox-total]")).to_have_text(str(PARKED - 1))
    expect(inbox).to_have_title(re.compile(rf"^\({PARKED - 1}\) Inbox"))
    assert inbox.evaluate("window.__sameDocument === true")
    assert reviewer.errors == []
