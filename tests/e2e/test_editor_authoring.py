"""Authoring speed: the searchable palette (`/`, Ctrl+K), dragging a kind onto the canvas, the
right-click menus, copy / paste / duplicate of steps with their branches, and new steps that
start with the recipe's writer, not its judge."""

from __future__ import annotations

from typing import Any

import pytest

from editor.services import recipe_create
from tests.e2e.test_everywhere import axe_violations
from tests.editor.conftest import story_document
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_draft_save, recipe_import

from .conftest import BrowserPage
from .editor_page import canvas_point, open_step_menu, wait_saved, wait_settled

pytestmark = pytest.mark.e2e

STEP_KEYS = "branchline.cy.nodes('[kind = \"step\"]').map((n) => n.data('key'))"
# Each branch of a step as [name, the key or terminal of the node it is drawn to].
BRANCHES_OF = """(key) => branchline.nodeByKey(key).outgoers('edge[kind = "branch"]').map(
    (e) => [e.data('branch').name, e.data('branch').target, e.target().data('key') ||
            e.target().data('terminal') || e.target().data('kind')])"""


def select_step(page: Any, key: str) -> None:
    order = page.evaluate("(k) => branchline.nodeByKey(k).data('order')", key)
    page.click(f'#outline .outline-item[data-path="steps[{order}]"]')
    wait_settled(page)
    # Keys go to the canvas, as after a click on it.
    page.focus("#cy")


def save_now(page: Any) -> None:
    """Save with the button and wait until it is saved (with errors or not)."""
    wait_settled(page)
    page.click("#btn-save")
    page.wait_for_function(
        "!branchline.dirty && document.getElementById('save-state').textContent.startsWith('Saved')"
    )
    wait_settled(page)


def saved_document(recipe: Recipe) -> dict[str, Any]:
    recipe.refresh_from_db()
    return document_from_recipe(recipe)


def test_palette_search_adds_a_step_with_the_keyboard_only(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.focus("#cy")

    page.keyboard.press("/")
    page.wait_for_selector("#palette:not([hidden])")
    assert page.evaluate("document.activeElement.id") == "palette-search"
    page.keyboard.type("classif")
    # Only what has every letter typed is left, and the first of it is highlighted.
    shown = page.eval_on_selector_all(
        "#palette-list .palette-item:not([hidden])", "(items) => items.map((i) => i.innerText)"
    )
    assert shown and all("classif" in s.lower() for s in shown)
    browser_page.screenshot("palette-search")
    page.keyboard.press("Enter")

    page.wait_for_selector("#palette", state="hidden")
    assert page.evaluate("branchline.cy.$(':selected').data('stepKind')") == "classify"
    assert len(page.evaluate(STEP_KEYS)) == 3
    assert browser_page.errors == []


def test_ctrl_k_goes_to_a_step_and_runs_a_command(browser_page: BrowserPage, story: Recipe) -> None:
    page = browser_page.open_editor(story.slug)
    page.focus("#cy")

    page.keyboard.press("Control+k")
    page.keyboard.type("go to revi")
    page.keyboard.press("Enter")
    assert page.evaluate("branchline.cy.$(':selected').data('key')") == "review"

    wait_settled(page)
    page.focus("#cy")
    page.keyboard.press("Control+k")
    page.keyboard.type("duplicate")
    page.keyboard.press("ArrowDown")  # one result only: the highlight stays on it
    page.keyboard.press("Enter")
    assert "review_copy" in page.evaluate(STEP_KEYS)
    # Escape closes the palette and gives the focus back.
    page.focus("#cy")
    page.keyboard.press("/")
    page.keyboard.press("Escape")
    page.wait_for_selector("#palette", state="hidden")
    assert page.evaluate("document.activeElement.id") == "cy"


def test_the_open_palette_has_no_axe_violation(browser_page: BrowserPage, story: Recipe) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#btn-palette")
    page.keyboard.type("step")
    assert axe_violations(page) == []


def test_a_kind_dragged_from_the_palette_is_placed_where_it_is_dropped(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    box = page.locator("#cy").bounding_box()
    # An empty spot: below the steps, left of the middle.
    drop = {"x": box["width"] * 0.3, "y": box["height"] * 0.8}
    page.click("#btn-palette")

    page.drag_and_drop("#palette [data-add-step=human]", "#cy", target_position=drop)

    wait_settled(page)
    added = page.evaluate(
        "(() => { const n = branchline.cy.$(':selected'); const p = n.renderedPosition();"
        " return {kind: n.data('stepKind'), x: p.x, y: p.y}; })()"
    )
    assert added["kind"] == "human"
    assert abs(added["x"] - drop["x"]) < 2 and abs(added["y"] - drop["y"]) < 2
    assert page.is_hidden("#palette")


def test_copy_and_paste_duplicates_a_step_with_its_branches(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    select_step(page, "write")

    page.keyboard.press("Control+c")
    page.keyboard.press("Control+v")

    assert page.evaluate(STEP_KEYS) == ["write", "review", "write_copy"]
    assert page.evaluate("branchline.cy.$(':selected').data('key')") == "write_copy"
    # Its repeat loops on the copy; the other branches lead where the original's do.
    assert page.evaluate(BRANCHES_OF, "write_copy") == [
        ["too_short", "@repeat", "write_copy"],
        ["broken", "@end", "@end"],
        ["great", "@complete", "@complete"],
        ["to_review", "review", "review"],
    ]
    browser_page.screenshot("pasted")
    page.click("#btn-save")
    wait_saved(page)
    saved = saved_document(story)
    original, copy = saved["steps"][0], saved["steps"][2]
    assert copy["name"] == "Write (copy)"
    assert copy["branches"] == original["branches"]
    assert copy["position"] != original["position"]
    # One undo takes the whole paste back.
    page.focus("#cy")
    page.keyboard.press("Control+z")
    assert page.evaluate(STEP_KEYS) == ["write", "review"]


def test_copied_steps_that_lead_to_each_other_lead_to_each_others_copies(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.evaluate("branchline.cy.nodes('[kind = \"step\"]').select(); null")
    page.focus("#cy")

    page.keyboard.press("Control+c")
    page.keyboard.press("Control+v")

    branches = page.evaluate(BRANCHES_OF, "write_copy")
    assert ["to_review", "review_copy", "review_copy"] in branches
    # Pasting again places another copy apart from the first.
    page.evaluate("branchline.cy.nodes('[kind = \"step\"]').unselect(); null")
    page.focus("#cy")
    page.keyboard.press("Control+v")
    assert page.evaluate(STEP_KEYS)[-2:] == ["write_copy_2", "review_copy_2"]
    positions = page.evaluate(
        "['write_copy', 'write_copy_2'].map((k) => branchline.nodeByKey(k).position())"
    )
    assert positions[0] != positions[1]


def test_the_right_click_menus_duplicate_a_step_and_add_one_where_clicked(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)

    open_step_menu(page, "review")
    browser_page.screenshot("step-menu")
    page.click("#cm-duplicate")
    assert "review_copy" in page.evaluate(STEP_KEYS)

    box = page.locator("#cy").bounding_box()
    spot = {"x": box["x"] + box["width"] * 0.3, "y": box["y"] + box["height"] * 0.85}
    page.mouse.click(spot["x"], spot["y"], button="right")
    page.hover("#cm-add")
    page.click("#cm-add-llm")
    wait_settled(page)
    added = page.evaluate(
        "(() => { const n = branchline.cy.$(':selected'); const p = n.renderedPosition();"
        " return {kind: n.data('stepKind'), x: p.x, y: p.y}; })()"
    )
    assert added["kind"] == "llm"
    assert abs(box["x"] + added["x"] - spot["x"]) < 2
    assert abs(box["y"] + added["y"] - spot["y"]) < 2
    assert browser_page.errors == []


def test_an_open_menu_stays_open_and_in_place_when_the_canvas_changes_size(
    browser_page: BrowserPage, story: Recipe
) -> None:
    # Until the author touches the view, the first fit follows the canvas's size (the problems
    # panel grows as the first check answers). A right-click touches it: the refit would move
    # the step from under the pointer and close the menu.
    page = browser_page.open_editor(story.slug)
    point = open_step_menu(page, "review")

    size = page.viewport_size
    page.set_viewport_size({"width": size["width"] - 60, "height": size["height"] - 60})
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")

    assert page.is_visible("#cm-duplicate")
    assert canvas_point(page, "branchline.nodeByKey('review')") == point


def test_steps_pasted_into_another_recipe_bring_the_actor_aliases_they_name(
    browser_page: BrowserPage, story: Recipe, e2e_user: Any
) -> None:
    other = recipe_create(user=e2e_user, name="Other", slug="other")
    page = browser_page.open_editor(story.slug)
    select_step(page, "write")
    page.keyboard.press("Control+c")

    page = browser_page.open_editor(other.slug)
    page.focus("#cy")
    page.keyboard.press("Control+v")
    save_now(page)

    saved = saved_document(other)
    assert [s["key"] for s in saved["steps"]] == ["write_copy"]
    # The step's actor and the judge of its branch come along; the reviewers it does not name do not.
    assert saved["actors"] == {"writer": "editor-writer", "judge": "editor-judge"}
    # One undo takes back the steps and the aliases together; a redo brings both again.
    page.focus("#cy")
    page.keyboard.press("Control+z")
    save_now(page)
    assert (saved_document(other)["steps"], saved_document(other)["actors"]) == ([], {})
    page.focus("#cy")
    page.keyboard.press("Control+Shift+z")
    save_now(page)
    assert saved_document(other)["actors"] == saved["actors"]


def test_a_new_llm_step_starts_with_the_recipes_writer_not_its_judge(
    browser_page: BrowserPage, story: Recipe, e2e_user: Any
) -> None:
    doc = story_document(slug="judge-first", name="Judge first")
    doc["actors"] = {"judge": "editor-judge", **doc["actors"]}
    recipe = recipe_import(user=e2e_user, data=doc).recipe
    page = browser_page.open_editor(recipe.slug)

    page.click("#btn-palette")
    page.click("#palette [data-add-step=llm]")

    assert page.evaluate("branchline.cy.$(':selected').data('step').actor") == "writer"


def test_the_step_list_is_drawn_from_the_graph_as_text_and_follows_edits(
    browser_page: BrowserPage, story_actors: None, e2e_user: Any
) -> None:
    doc = story_document(slug="escaped", name="Escaped")
    doc["steps"][0]["name"] = "<img src=x onerror=alert(1)>"
    recipe = recipe_import(user=e2e_user, data=doc).recipe
    page = browser_page.open_editor(recipe.slug)

    assert page.locator("#outline img").count() == 0
    # The rows are content-visibility: auto, so innerText leaves out a row not rendered yet.
    first = str(page.text_content('#outline .outline-item[data-path="steps[0]"]'))
    assert "<img src=x onerror=alert(1)>" in first
    assert "len < 40" in str(page.text_content('#outline [data-path="steps[0].branches[0]"]'))

    select_step(page, "review")
    page.keyboard.press("Control+d")
    page.wait_for_selector('#outline .outline-item[data-path="steps[2]"]')
    assert "Review (copy)" in str(page.text_content('#outline [data-path="steps[2]"]'))
    assert page.inner_text("#outline h2") == "Steps (3)"
    page.keyboard.press("Control+z")
    page.wait_for_function("!document.querySelector('#outline [data-path=\"steps[2]\"]')")


def test_a_step_with_a_branch_to_a_missing_step_deletes_undoes_and_redoes(
    browser_page: BrowserPage, story: Recipe
) -> None:
    doc = document_from_recipe(story)
    doc["steps"][1]["branches"][0]["target"] = "not_drawn_yet"
    doc["steps"][1]["branches"][0]["action"] = "CONTINUE"
    assert recipe_draft_save(recipe=story, document=doc).errors
    page = browser_page.open_editor(story.slug)
    missing = "branchline.cy.nodes('[kind = \"missing\"]').map((n) => n.data('label'))"
    assert page.evaluate(missing) == ["missing: not_drawn_yet"]

    select_step(page, "review")
    page.keyboard.press("Delete")
    # Its own branch's placeholder goes with it; the branch that led to it now leads nowhere.
    assert page.evaluate(missing) == ["missing: review"]
    page.keyboard.press("Control+z")
    assert page.evaluate(missing) == ["missing: not_drawn_yet"]
    page.keyboard.press("Control+Shift+z")
    page.keyboard.press("Control+z")

    assert ["approved", "not_drawn_yet", "missing"] in page.evaluate(BRANCHES_OF, "review")
    assert browser_page.errors == []
