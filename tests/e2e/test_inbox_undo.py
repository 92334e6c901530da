"""A decision made with a single key in the inbox is held for the undo window: taken back with
u or Undo, sent when the window closes, and sent at once when the page is left meanwhile."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from editor.views.inbox import UNDO_SECONDS
from runner.models import HumanTask
from runner.status import TaskStatus
from tests.factories import GroupFactory
from tests.runner.open_tasks import park_runs
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import BrowserPage
from .test_everywhere import axe_violations

pytestmark = pytest.mark.e2e

# Past the undo window, with room for the page's request.
AFTER_THE_WINDOW_MS = UNDO_SECONDS * 1000 + 1500
MATERIALS = [
    "A lighthouse keeper finds a map.",
    "A whale sings to a gull.",
    "A storm asks for tea.",
]


def status_of(task: HumanTask) -> tuple[str, str]:
    task.refresh_from_db()
    return task.status, task.decision


def wait_for_decision(task: HumanTask, timeout_s: float = 15) -> tuple[str, str]:
    deadline = time.monotonic() + timeout_s
    while status_of(task)[0] == TaskStatus.OPEN and time.monotonic() < deadline:
        time.sleep(0.1)
    return status_of(task)


@pytest.fixture
def tasks(e2e_user: Any, story: Recipe) -> list[HumanTask]:
    recipe_publish(recipe=story, user=e2e_user)
    group = GroupFactory(name="undo-reviewers")
    e2e_user.groups.add(group)
    return [park_runs(story, e2e_user, group, 1, material=m)[0] for m in MATERIALS]


def test_a_single_key_approval_can_be_undone_and_is_sent_when_its_window_closes(
    browser_page: BrowserPage, tasks: list[HumanTask], run_worker: Any
) -> None:
    first, second, third = tasks
    page = browser_page.open("/inbox/")
    selected = page.locator(".task-card.selected")
    notices = page.locator("#inbox-notices")
    expect(selected).to_have_attribute("id", f"task-{first.pk}")
    # Rows tell the tasks apart: the step's name, the run, what is to be decided.
    row = page.locator(f"#row-{first.pk}")
    expect(row).to_contain_text("Story with review: Review")
    expect(row).to_contain_text(f"run #{first.run_id}")
    expect(row.locator(".row-snippet")).to_have_text(MATERIALS[0])

    # a holds the approval: the list moves on, the row and a notice say it is on its way.
    page.keyboard.press("a")
    expect(selected).to_have_attribute("id", f"task-{second.pk}")
    expect(row.locator(".badge.held")).to_have_text(re.compile(r"^Approve: held, \d s$"))
    expect(notices.locator(".held")).to_contain_text(f"Approve on task {first.pk}")
    browser_page.screenshot("inbox-undo-held")
    # u takes it back: nothing is sent, even after the window.
    page.keyboard.press("u")
    expect(notices).to_contain_text(f"Taken back: task {first.pk} stays open")
    expect(notices.locator(".held")).to_have_count(0)
    expect(selected).to_have_attribute("id", f"task-{first.pk}")
    page.wait_for_timeout(AFTER_THE_WINDOW_MS)
    assert status_of(first) == (TaskStatus.OPEN, "")

    # Held again and left alone: sent when the window closes, and the task leaves the list.
    page.keyboard.press("a")
    expect(page.locator(f"#task-{first.pk}")).to_have_count(0, timeout=AFTER_THE_WINDOW_MS * 2)
    expect(notices).to_contain_text(f"You chose approve on task {first.pk}")
    assert status_of(first) == (TaskStatus.DECIDED, "approve")

    # The notice's Undo button takes a rejection back too.
    expect(selected).to_have_attribute("id", f"task-{second.pk}")
    page.keyboard.press("r")
    notices.get_by_role("button", name="Undo").click()
    expect(notices).to_contain_text(f"Taken back: task {second.pk} stays open")
    assert status_of(second) == (TaskStatus.OPEN, "")

    # Leaving the page inside the window sends the decision held: none is lost unseen.
    expect(selected).to_have_attribute("id", f"task-{second.pk}")
    page.keyboard.press("a")
    expect(notices.locator(".held")).to_have_count(1)
    page.goto(browser_page.base_url + "/runs/")
    assert wait_for_decision(second) == (TaskStatus.DECIDED, "approve")
    assert status_of(third) == (TaskStatus.OPEN, "")


def test_on_a_phone_the_filters_fold_under_their_summary(
    browser_page: BrowserPage, tasks: list[HumanTask]
) -> None:
    page = browser_page.page
    page.set_viewport_size({"width": 390, "height": 844})
    page.emulate_media(color_scheme="dark")
    browser_page.open("/inbox/")
    filters = page.locator("#inbox-filters")

    expect(page.locator("#inbox-list .task-row")).to_have_count(3)
    expect(filters).to_be_hidden()
    browser_page.screenshot("inbox-phone-dark")
    page.get_by_text("Filters", exact=True).click()
    expect(filters).to_be_visible()
    browser_page.screenshot("inbox-phone-dark-filters")
    violations = axe_violations(page)
    assert not violations, "\n".join(violations)
    # Wider again, they are open without a summary to click.
    page.get_by_text("Filters", exact=True).click()
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(filters).to_be_visible()
    expect(page.get_by_text("Filters", exact=True)).to_be_hidden()


HIDE_PAGE = """() => {
    Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
    document.dispatchEvent(new Event('visibilitychange'));
}"""


def test_a_held_decision_is_sent_when_the_page_is_hidden_even_if_no_beacon_is_queued(
    browser_page: BrowserPage, tasks: list[HumanTask], run_worker: Any
) -> None:
    first, second, _ = tasks
    page = browser_page.open("/inbox/")
    notices = page.locator("#inbox-notices")
    page.keyboard.press("a")
    expect(notices.locator(".held")).to_have_count(1)
    # Hidden (a phone may close it so, without a pagehide): the beacon carries it.
    page.evaluate(HIDE_PAGE)
    assert wait_for_decision(first) == (TaskStatus.DECIDED, "approve")
    expect(page.locator(f"#row-{first.pk} .badge.held")).to_have_text("Approve: sending…")

    # The browser will not queue a beacon: the decision goes as a request, and the page says so.
    page.evaluate("Object.defineProperty(navigator, 'sendBeacon', {value: () => false})")
    page.keyboard.press("r")
    expect(notices.locator(".held")).to_have_count(1)
    page.evaluate(HIDE_PAGE)
    assert wait_for_decision(second) == (TaskStatus.DECIDED, "reject")
    expect(notices).to_contain_text(f"Task {second.pk}: the browser would not send the decision")
    expect(notices).to_contain_text(f"Task {second.pk}: reject sent.")
