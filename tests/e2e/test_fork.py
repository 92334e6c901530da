"""Fork a run from a step of its monitor with another answer, and compare the fork with it."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from runner.models import Run
from runner.services import run_start
from runner.status import TERMINAL
from tests.editor.conftest import STORY
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import BrowserPage

pytestmark = pytest.mark.e2e


def finished(run: Run) -> Run:
    """Wait until the worker has finished the run."""
    deadline = time.monotonic() + 30
    run.refresh_from_db()
    while run.status not in TERMINAL:
        assert time.monotonic() < deadline, f"run {run.pk} is still {run.status}"
        time.sleep(0.05)
        run.refresh_from_db()
    return run


def test_a_fork_with_another_answer_takes_the_other_branch_and_compares_with_its_parent(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    script = {"writer": [STORY], "judge": ["5"], "editors": ["reject"]}
    parent = run_start(user=e2e_user, recipe=story, inputs={"topic": "owls"}, script=script)
    parent = finished(parent)
    assert parent.status == "ended"
    page = browser_page.open(f"/runs/{parent.pk}/")

    # The reviewers' step: fork it with "approve" where the script rejected the story.
    review = page.locator("#step-2")
    expect(review.locator(".evaluations li.taken")).to_contain_text("rejected")
    review.get_by_text("Fork from here").click()
    answer = review.get_by_label(re.compile(r"^Answer"))
    expect(answer).to_have_value("reject")
    answer.fill("perhaps")
    review.get_by_role("button", name="Fork with this answer").click()
    expect(review.locator(".rerun-errors [role=alert]")).to_contain_text(
        "'perhaps' is not an option of step 'review'"
    )
    assert Run.objects.count() == 1
    answer.fill("approve: the owls won me over")
    browser_page.screenshot("fork-form")
    review.get_by_role("button", name="Fork with this answer").click()

    page.wait_for_url(re.compile(rf"/runs/(?!{parent.pk}/)\d+/$"))
    fork = Run.objects.get(parent=parent)
    assert page.url.endswith(f"/runs/{fork.pk}/")
    finished(fork)
    page.reload()  # the test server has no websockets: the page shows the run as it is now

    header = page.locator("#run-header")
    expect(header).to_contain_text("Succeeded")
    expect(header).to_contain_text("Approved")
    expect(page.locator(".forked-from")).to_contain_text(f"Forked from run #{parent.pk} at step 2")
    expect(page.locator("#step-1 .badge.copied")).to_be_visible()
    forked_review = page.locator("#step-2")
    expect(forked_review).to_contain_text("Decision approve: the answer given")
    expect(forked_review.locator("blockquote.comment")).to_have_text("the owls won me over")
    expect(forked_review.locator(".evaluations li.taken")).to_contain_text("approved")
    browser_page.screenshot("fork")

    # The comparison: the runs part at the review, the fork's branch highlighted.
    page.get_by_role("link", name=f"Compare with run #{parent.pk}").click()
    page.wait_for_url(re.compile(rf"/runs/compare/\?a={parent.pk}&b={fork.pk}$"))
    page.wait_for_function("window.branchlineCompare && window.branchlineCompare.ready")
    classes = "([key, branch]) => window.branchlineCompare.edgeClasses(key, branch)"
    rejected = page.evaluate(classes, ["review", "rejected"])
    approved = page.evaluate(classes, ["review", "approved"])
    assert {"path-a", "first-change"} <= set(rejected) and "path-b" not in rejected
    assert {"path-b", "first-change"} <= set(approved) and "path-a" not in approved
    assert "A took rejected, B took approved" in page.locator("#compare-verdict").inner_text()
    browser_page.screenshot("fork-compare")

    parent.refresh_from_db()
    assert (parent.status, parent.steps.count()) == ("ended", 2)


def test_a_failed_run_resumes_from_its_monitor_at_the_step_that_failed(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    script = {"writer": ["@error: the model server is down", STORY], "judge": ["9"]}
    run = finished(run_start(user=e2e_user, recipe=story, inputs={"topic": "owls"}, script=script))
    assert run.status == "failed"
    page = browser_page.open(f"/runs/{run.pk}/")
    header = page.locator("#run-header")
    expect(header).to_contain_text("step 'write' failed: the model server is down")
    browser_page.screenshot("failed")

    header.get_by_role("button", name="Resume").click()

    expect(header).not_to_contain_text("Failed")  # the page reloaded on the queued run
    finished(run)
    page.reload()
    expect(header).to_contain_text("Succeeded")
    expect(page.locator("#step-1")).to_contain_text("the model server is down")
    expect(page.locator("#step-2")).to_contain_text("attempt 2")
    expect(header.get_by_role("button", name="Resume")).to_have_count(0)
