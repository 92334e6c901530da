"""The branch form's suggested judge threshold fills the field; Apply puts it in the draft."""

from __future__ import annotations

from typing import Any

from runner.status import RunStatus
from tests.editor.test_judge_thresholds import judged_run
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import BrowserPage
from .editor_page import apply_panel, click_settled, wait_saved


def test_the_suggested_threshold_is_used_only_when_the_author_applies_it(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    for score in (9, 9, 8):
        judged_run(story, e2e_user, score, status=RunStatus.SUCCEEDED)
    for score in (7, 7, 6):
        judged_run(story, e2e_user, score, status=RunStatus.SUCCEEDED, decision="approve")
    for score in (5, 5, 3, 4):
        judged_run(story, e2e_user, score, status=RunStatus.ENDED, decision="reject")
    page = browser_page.open_editor(story.slug)

    page.click("#outline .outline-item.branch >> text=great")
    page.wait_for_selector("#panel .judge-advice button")
    assert "Suggested threshold: 6" in page.inner_text("#panel .judge-advice")
    assert page.input_value("#panel [name='c-value']") == "8"
    page.click("#panel .judge-advice button")
    assert page.input_value("#panel [name='c-value']") == "6"
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][0]["branches"][2]["when"]["value"] == 8

    apply_panel(page)
    click_settled(page, "#btn-save")
    wait_saved(page)
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][0]["branches"][2]["when"]["value"] == 6
