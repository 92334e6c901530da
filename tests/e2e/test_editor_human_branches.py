"""Building on the canvas in few clicks: a human step's review branches in one click, a "+"
under a step that adds the next one connected to it, and a tool bar on one row from 1280 px
with Publish and Run in it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.editor.conftest import story_document
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

from .conftest import BrowserPage
from .editor_page import canvas_point, wait_settled

pytestmark = pytest.mark.e2e

BRANCHES = """(key) => branchline.nodeByKey(key).connectedEdges('[kind = "branch"]')
    .filter((e) => e.source().data('key') === key)
    .map((e) => { const b = e.data('branch');
                  return [b.name, b.when.value || b.when.type, b.action, b.target]; })"""


@pytest.fixture
def review_recipe(e2e_user: Any, story_actors: None) -> Recipe:
    """Write → Review (a human step with no branches yet) → Publish."""
    doc = story_document(slug="to-review", name="To review")
    doc["steps"][1]["branches"] = []
    doc["steps"].append(
        {
            "key": "publish",
            "name": "Publish",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Polish {steps.write.response}",
            "position": {"x": 680, "y": 120},
            "branches": [],
        }
    )
    return recipe_import(user=e2e_user, data=doc).recipe


def hover_step(page: Any, key: str) -> None:
    point = canvas_point(page, f"branchline.nodeByKey('{key}')")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#step-actions:not([hidden])")


def test_one_click_adds_the_approve_reject_and_revise_branches(
    browser_page: BrowserPage, review_recipe: Recipe
) -> None:
    page = browser_page.open_editor(review_recipe.slug)
    hover_step(page, "review")
    browser_page.screenshot("step-actions")

    page.click("#btn-review-branches")

    assert sorted(page.evaluate(BRANCHES, "review")) == [
        ["approved", "approve", "CONTINUE", "publish"],
        ["rejected", "reject", "END_RECIPE", "@end"],
        ["revise", "revise", "CONTINUE", "write"],
    ]
    # In the flow control band (51-100), as a decision that steers the run is.
    priorities = page.evaluate(
        "branchline.nodeByKey('review').outgoers('edge[kind = \"branch\"]')"
        ".map((e) => e.data('branch').priority)"
    )
    assert sorted(priorities) == [51, 52, 53]
    labels = page.evaluate(
        "branchline.nodeByKey('review').outgoers('edge[kind = \"branch\"]').map((e) => e.data('label'))"
    )
    assert sorted(labels) == ["approve → Publish", "reject → End", "revise → Write"]
    # Each is an ordinary branch, edited in the panel: the reviewer's choice is a menu.
    page.click('#outline [data-path="steps[1].branches[2]"]')
    page.wait_for_selector("#panel select[name=c-value]")
    options = page.eval_on_selector_all(
        "#panel select[name=c-value] option", "(os) => os.map((o) => o.value)"
    )
    assert options == ["", "approve", "reject", "revise"]
    # Every option is handled now: the button is gone, and the branches are one undo.
    page.wait_for_selector("#btn-review-branches", state="hidden")
    page.click("#btn-undo")
    assert page.evaluate(BRANCHES, "review") == []
    wait_settled(page)
    assert browser_page.errors == []


def test_the_plus_under_a_step_adds_a_next_step_connected_to_it(
    browser_page: BrowserPage, review_recipe: Recipe
) -> None:
    page = browser_page.open_editor(review_recipe.slug)

    # The last step can fall through: the new step comes next in order, the dashed arrow joins them.
    hover_step(page, "publish")
    page.click("#btn-add-next")
    assert "after “Publish”" in page.inner_text("#palette .palette-help")
    page.click("#palette [data-add-step=llm]")

    added = page.evaluate("branchline.cy.$(':selected').data('key')")
    assert added and added not in ("write", "review", "publish")
    follows = page.evaluate(
        "(k) => branchline.nodeByKey('publish').outgoers('edge[kind = \"sequence\"]')"
        ".targets().map((n) => n.data('key'))",
        added,
    )
    assert follows == [added]
    position = page.evaluate("(k) => branchline.nodeByKey(k).position()", added)
    assert position["x"] > 680

    # A step that always branches somewhere gets a branch to the new step.
    hover_step(page, "write")
    page.click("#btn-add-next")
    page.click("#palette [data-add-step=human]")
    second = page.evaluate("branchline.cy.$(':selected').data('key')")
    targets = [b[3] for b in page.evaluate(BRANCHES, "write")]
    assert second in targets
    # Not ahead of the branch always taken (to the review): that path is as it was.
    priorities = page.evaluate(
        "branchline.nodeByKey('write').outgoers('edge[kind = \"branch\"]')"
        ".map((e) => [e.data('branch').target, e.data('branch').priority])"
    )
    assert dict(priorities)[second] > dict(priorities)["review"]

    page.click("#btn-undo")
    assert page.evaluate("(k) => branchline.nodeByKey(k).empty()", second)
    assert second not in [b[3] for b in page.evaluate(BRANCHES, "write")]
    wait_settled(page)
    assert browser_page.errors == []


STEP_ORDER = """() => branchline.cy.nodes('[kind = "step"]')
    .sort((a, b) => a.data('order') - b.data('order')).map((n) => n.data('key'))"""


def next_in_order(page: Any, key: str) -> Any:
    return page.evaluate(
        "(k) => branchline.nodeByKey(k).outgoers('edge[kind = \"sequence\"]')"
        ".targets().map((n) => n.data('key') || n.id())",
        key,
    )


def test_the_plus_on_a_step_not_last_puts_the_new_step_in_between(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="skips", name="Skips")
    # Write always goes on to Publish; Review falls through to Publish.
    doc["steps"][0]["branches"] = [
        {
            "name": "go",
            "priority": 5,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "publish",
        }
    ]
    doc["steps"][1]["branches"] = []
    doc["steps"].append(
        {
            "key": "publish",
            "name": "Publish",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Polish {steps.write.response}",
            "branches": [],
        }
    )
    recipe = recipe_import(user=e2e_user, data=doc).recipe
    page = browser_page.open_editor(recipe.slug)

    # The branch always taken goes through the new step, which goes on to where it went.
    hover_step(page, "write")
    page.click("#btn-add-next")
    page.click("#palette [data-add-step=llm]")
    first = page.evaluate("branchline.cy.$(':selected').data('key')")
    assert page.evaluate(STEP_ORDER) == ["write", first, "review", "publish"]
    assert page.evaluate(BRANCHES, "write") == [["go", "default", "CONTINUE", first]]
    assert [b[2:] for b in page.evaluate(BRANCHES, first)] == [["CONTINUE", "publish"]]

    # A step that falls through to the next falls through to the new step, and it to the next.
    hover_step(page, "review")
    page.click("#btn-add-next")
    page.click("#palette [data-add-step=llm]")
    second = page.evaluate("branchline.cy.$(':selected').data('key')")
    assert page.evaluate(STEP_ORDER) == ["write", first, "review", second, "publish"]
    assert page.evaluate(BRANCHES, "review") == []
    assert next_in_order(page, "review") == [second]
    assert next_in_order(page, second) == ["publish"]

    # Each is one undo.
    page.click("#btn-undo")
    page.click("#btn-undo")
    assert page.evaluate(STEP_ORDER) == ["write", "review", "publish"]
    assert page.evaluate(BRANCHES, "write") == [["go", "default", "CONTINUE", "publish"]]
    wait_settled(page)
    assert browser_page.errors == []


TOOLBAR = """() => {
    const bar = document.querySelector('.editor-bar');
    // On one row, every group's box crosses one horizontal line.
    const boxes = Array.from(bar.children).map((c) => c.getBoundingClientRect());
    const oneRow = Math.max(...boxes.map((b) => b.top)) < Math.min(...boxes.map((b) => b.bottom));
    const shown = (id) => { const e = document.getElementById(id); const r = e.getBoundingClientRect();
                            return r.width > 0 && r.right <= window.innerWidth; };
    return {height: bar.getBoundingClientRect().height, oneRow: oneRow,
            scroll: bar.scrollWidth - bar.clientWidth,
            publish: shown('btn-publish'), run: shown('btn-run'), save: shown('btn-save')};
}"""


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_toolbar_is_one_row_with_publish_and_run_even_when_saved_with_an_error(
    browser_page: BrowserPage, story: Recipe, width: int
) -> None:
    page = browser_page.page
    page.set_viewport_size({"width": width, "height": 800})
    browser_page.open_editor(story.slug)
    wait_settled(page)
    # The longest thing the save state says.
    page.evaluate(
        "document.getElementById('save-state').textContent = 'Saved with 1 error (fix to publish)'"
    )

    bar = page.evaluate(TOOLBAR)

    assert bar["oneRow"] and bar["scroll"] <= 0, bar
    assert bar["publish"] and bar["run"] and bar["save"], bar
    assert bar["height"] < 64, bar
    browser_page.screenshot(f"toolbar-{width}")

    page.click("#btn-publish")
    page.wait_for_selector("#panel-versions [name=note]")
    assert page.evaluate("document.activeElement.name") == "note"


def test_run_opens_the_run_page_once_a_version_is_published(
    browser_page: BrowserPage, story: Recipe, e2e_user: Any
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#btn-run")
    page.wait_for_selector("#panel-testrun:not([hidden]) form")

    recipe_publish(recipe=story, user=e2e_user)
    page = browser_page.open_editor(story.slug)
    page.click("#btn-run")

    page.wait_for_url(f"**/recipes/{story.slug}/run/")
