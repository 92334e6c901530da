"""Unfinished work is saved: a draft with an error autosaves, reloads with it marked, and
publishing refuses it."""

from __future__ import annotations

import pytest

from workflows.adapters import document_from_recipe
from workflows.models import Recipe

from .conftest import BrowserPage
from .editor_page import click_settled

pytestmark = pytest.mark.e2e

SAVED_WITH_ERRORS = "document.getElementById('save-state').textContent.startsWith('Saved with')"


def test_a_draft_with_an_error_saves_and_reloads(browser_page: BrowserPage, story: Recipe) -> None:
    page = browser_page.open_editor(story.slug)
    revision = story.revision

    # Deleting the review step leaves the branch that led to it with no target: an error.
    # The edit is autosaved anyway, as written.
    page.evaluate(
        "branchline.cy.elements().unselect(); branchline.nodeByKey('review').select(); null"
    )
    click_settled(page, "#btn-delete")
    page.wait_for_function(SAVED_WITH_ERRORS)
    assert "1 error" in page.inner_text("#save-state")
    story.refresh_from_db()
    assert story.revision == revision + 1
    saved = document_from_recipe(story)
    assert [s["key"] for s in saved["steps"]] == ["write"]
    assert saved["steps"][0]["branches"][3]["target"] == "review"
    browser_page.screenshot("saved-with-an-error")

    # Reloaded: the draft as written, its error in the problems panel and on the canvas.
    page.reload()
    browser_page.wait_ready()
    page.wait_for_selector("#lint .problem.error")
    assert "steps[0].branches[3].target" in page.inner_text("#lint")
    page.wait_for_function("branchline.edgeByName('write', 'to_review').hasClass('has-error')")
    assert page.inner_text("#save-state") == "Saved with errors (fix to publish)"
    assert page.evaluate("branchline.nodeByKey('review').empty()")
    browser_page.screenshot("reloaded-with-an-error")

    # Publishing needs a clean draft: refused, with the error.
    page.click("#tab-versions")
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .error")
    assert "steps[0].branches[3].target" in page.inner_text("#panel-versions")
    assert not story.versions.exists()
    browser_page.screenshot("publish-refused")
    assert browser_page.errors == []
