"""A reviewer's Revise comment, given in the inbox, is the {feedback} of the next draft's prompt,
as the run's monitor shows it."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from runner.models import Run, StepRun
from runner.services import run_start
from runner.status import RunStatus
from tests.editor.conftest import story_document
from tests.factories import UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

from .conftest import BrowserPage

pytestmark = pytest.mark.e2e

COMMENT = "Give the owl a name, and <b>a lantern</b>."


def draft_with_feedback() -> dict[str, Any]:
    """The story recipe, its writer told the reviewer's feedback, its revise branch going back
    to the writer."""
    document = story_document(slug="owl-drafts", name="Owl drafts")
    write, review = document["steps"]
    write["prompt"] = "Write a story about {topic}.\nFeedback on the last draft: {feedback}"
    revise = next(b for b in review["branches"] if b["name"] == "revise")
    revise["target"] = "write"
    return document


def wait_for(run: Run, status: str, steps: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status == status and StepRun.objects.filter(run=run).count() >= steps:
            return
        time.sleep(0.1)
    raise AssertionError(f"run {run.pk} is {run.status}, not {status} after {steps} steps")


def test_a_revise_comment_from_the_inbox_is_in_the_next_drafts_prompt(
    browser_page: BrowserPage, open_page: Any, e2e_user: Any, story_actors: None, run_worker: Any
) -> None:
    recipe = cast(Recipe, recipe_import(user=e2e_user, data=draft_with_feedback()).recipe)
    recipe_publish(recipe=recipe, user=e2e_user)
    reviewer = UserFactory(username="rowan")
    reviewer.groups.add(Group.objects.get(name="editor-reviewers"))
    recipe.shared_with_users.add(reviewer)
    # The judge's 5 sends every draft to review.
    run = run_start(user=e2e_user, recipe=recipe, inputs={"topic": "owls"}, script={"judge": ["5"]})
    wait_for(run, RunStatus.WAITING_HUMAN, steps=2)

    inbox = open_page(reviewer, "reviewer").open("/inbox/")
    card = inbox.locator(".task-card.selected")
    expect(card).to_contain_text(f"run #{run.pk}")
    expect(card).to_contain_text(
        "the comment becomes the {feedback} of the step the run goes to next"
    )
    card.get_by_label("Comment").fill(COMMENT)
    card.get_by_role("button", name="Revise").click()
    expect(inbox.locator("#inbox-notices")).to_contain_text("You chose revise")
    wait_for(run, RunStatus.WAITING_HUMAN, steps=4)

    monitor = browser_page.open(f"/runs/{run.pk}/")
    first, second = monitor.locator('.step-card[data-step="write"]').all()
    second.locator(".prompt summary").click()
    expect(second.locator(".prompt pre")).to_have_text(
        f"Write a story about owls.\nFeedback on the last draft: {COMMENT}"
    )
    first.locator(".prompt summary").click()
    expect(first.locator(".prompt pre")).to_have_text(
        "Write a story about owls.\nFeedback on the last draft: "
    )
    browser_page.screenshot("revise-feedback-monitor")
