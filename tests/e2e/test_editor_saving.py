"""The editor saves, publishes, restores, exports and imports drafts, and never loses an edit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.editor.conftest import story_document
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_publish, recipe_update

from .conftest import BrowserPage
from .editor_page import (
    apply_panel,
    click_settled,
    outline_text,
    wait_saved,
    wait_settled,
)

pytestmark = pytest.mark.e2e


def test_a_save_from_another_tab_is_a_clear_conflict_not_a_lost_edit(
    browser_page: BrowserPage, open_page: Any, e2e_user: Any, story: Recipe
) -> None:
    mine = browser_page.open_editor(story.slug)
    theirs_page = open_page(e2e_user, "other-tab")
    theirs = theirs_page.open_editor(story.slug)

    theirs.click("#outline .outline-item.step >> text=Review")
    theirs.wait_for_selector("#panel [name=name]")
    theirs.fill("#panel [name=name]", "Their review")
    apply_panel(theirs)
    theirs.click("#btn-save")
    wait_saved(theirs)

    mine.click("#outline .outline-item.step >> text=Write")
    mine.wait_for_selector("#panel [name=name]")
    mine.fill("#panel [name=name]", "My write")
    apply_panel(mine)
    mine.click("#btn-save")
    mine.wait_for_selector("#conflict:not([hidden])")
    assert "Someone else saved this draft" in mine.inner_text("#conflict")
    assert mine.inner_text("#save-state") == "● Unsaved changes"
    browser_page.screenshot("conflict")
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][1]["name"] == "Their review"

    mine.click("#btn-conflict-overwrite")
    wait_saved(mine)
    assert document_from_recipe(story)["steps"][0]["name"] == "My write"


def test_a_publish_includes_the_save_in_flight_and_refuses_a_draft_saved_elsewhere(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.branch >> text=len < 40")
    page.wait_for_selector("#panel [name='c-value']")
    page.fill("#panel [name='c-value']", "60")
    apply_panel(page)
    page.click("#tab-versions")
    page.wait_for_selector("#panel-versions [name=note]")
    wait_settled(page)
    # Saving and publishing at once: the publish waits for the save and carries its revision.
    page.evaluate(
        "() => { branchline.save(false);"
        " document.querySelector('#panel-versions button.primary').click(); }"
    )
    page.wait_for_selector("#panel-versions .applied")
    assert story.versions.get().document["steps"][0]["branches"][0]["when"]["value"] == 60

    story.refresh_from_db()
    recipe_update(recipe=story, document={**document_from_recipe(story), "name": "Theirs"})
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .error")
    assert "saved elsewhere" in page.inner_text("#panel-versions")
    assert story.versions.count() == 1


def test_versions_compare_and_restore(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe
) -> None:
    recipe_publish(recipe=story, user=e2e_user, note="original")
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.branch >> text=len < 40")
    page.wait_for_selector("#panel [name='c-value']")
    page.fill("#panel [name='c-value']", "80")
    apply_panel(page)
    page.click("#tab-versions")
    page.fill("#panel-versions [name=note]", "longer minimum")
    click_settled(page, "#panel-versions button.primary")  # saves the draft first, then publishes
    page.wait_for_selector("#panel-versions .applied")
    assert story.versions.count() == 2
    click_settled(page, "#panel-versions form[aria-label='Compare versions'] button[type=submit]")
    page.wait_for_selector("#version-diff .diff")
    diff = page.inner_text("#version-diff")
    assert "From v1 to v2" in diff
    assert "too_short" in diff
    with page.expect_navigation():
        click_settled(page, "#panel-versions tr:has-text('v1') button:has-text('Restore')")
    browser_page.wait_ready()
    outline_text(page, "len < 40")
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][0]["branches"][0]["when"]["value"] == 40


def test_export_downloads_the_draft_and_import_replaces_it(
    browser_page: BrowserPage, story: Recipe, tmp_path: Any
) -> None:
    page = browser_page.open_editor(story.slug)
    with page.expect_download() as download:
        page.click("#btn-export")
    exported = json.loads(download.value.path().read_text())
    assert exported == document_from_recipe(story)

    changed = story_document(slug="whatever", name="Imported over the draft")
    changed["steps"][0]["branches"][0]["when"]["value"] = 120
    upload = tmp_path / "recipe.json"
    upload.write_text(json.dumps(changed))
    page.click("#tab-recipe")
    page.wait_for_selector("#import-file")
    page.set_input_files("#import-file", str(upload))
    with page.expect_navigation():
        click_settled(page, ".import-draft button[type=submit]")
    browser_page.wait_ready()
    assert page.inner_text("#recipe-title") == "Imported over the draft"
    outline_text(page, "len < 120")
    story.refresh_from_db()
    assert story.slug == "story"

    bad = tmp_path / "bad.yaml"
    bad.write_text("format: nope\nsteps: []\n")
    page.click("#tab-recipe")
    page.wait_for_selector("#import-file")
    page.set_input_files("#import-file", str(bad))
    click_settled(page, ".import-draft button[type=submit]")
    page.wait_for_selector("#import-result .error")
    assert "The file was not imported" in page.inner_text("#import-result")
