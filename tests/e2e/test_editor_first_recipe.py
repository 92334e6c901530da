"""A new author's first recipe, from scratch, in at most 30 actions: draft (a model step whose
prompt names an input it declares in one click) → a judge branch back to the draft when the
score is under 7 → a human review with its three branches in one click → end; saved,
published, and dry-run to the review. Every click, fill, menu pick, key press and drag counts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import ActorFactory, GroupFactory
from workflows.adapters import document_from_recipe
from workflows.models import Recipe

from .conftest import BrowserPage
from .editor_page import canvas_point, wait_applied, wait_saved, wait_settled

pytestmark = pytest.mark.e2e

MOST_ACTIONS = 30
DRAFT = "A keeper of the lighthouse found a map in a bottle, sailed for the island it showed."


class CountedPage:
    """The page as the author drives it: each action counts one; waiting and reading do not."""

    ACTIONS = ("click", "fill", "select_option", "check", "press", "type")

    def __init__(self, page: Any) -> None:
        self.page = page
        self.actions: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.page, name)
        if name not in self.ACTIONS:
            return attribute

        def counted(selector: str, *args: Any, **kwargs: Any) -> Any:
            self.actions.append(f"{name} {selector}")
            return attribute(selector, *args, **kwargs)

        return counted

    def drag(self, source: dict[str, float], target: dict[str, float], label: str) -> None:
        """Drag with the mouse from `source` to `target` (one action)."""
        self.actions.append(f"drag {label}")
        mouse = self.page.mouse
        mouse.move(source["x"], source["y"])
        mouse.down()
        mouse.move(target["x"], target["y"], steps=12)
        mouse.up()


def handle_of(page: Any, key: str) -> dict[str, float]:
    """Point at a step (the pointer resting on it shows its branch handle); return the handle."""
    point = canvas_point(page, f"branchline.nodeByKey('{key}')")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#eh-handle:not([hidden])")
    box = page.locator("#eh-handle").bounding_box()
    return {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}


def test_a_first_recipe_from_scratch_takes_at_most_30_actions(
    browser_page: BrowserPage, e2e_user: Any, run_worker: Any
) -> None:
    ActorFactory(name="house-drafter", config={"replies": [DRAFT]})
    ActorFactory(name="house-judge", config={"replies": ["Score: 8"]})
    e2e_user.groups.add(GroupFactory(name="editors"))
    browser_page.open("/recipes/")
    page = CountedPage(browser_page.page)

    # A new recipe.
    page.click("text=New recipe")
    page.fill("#id_name", "Lighthouse story")
    page.click("button[name=create]")
    browser_page.wait_ready()

    # Draft: a model step; its prompt names `topic`, declared in one click.
    page.click("#btn-palette")
    page.click("#palette [data-add-step=llm]")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.fill("#panel [name=name]", "Draft")
    page.fill("#panel [name=key]", "draft")
    page.fill("#panel [name=prompt]", "Write a short story about {topic}.")
    page.wait_for_selector("#panel button.fix:text('Add `topic` as an input')")
    page.click("#panel button.fix:text('Add `topic` as an input')")
    wait_applied(page.page, "#panel")

    # Review: a human step after it, from the "+" under the draft, and its three branches.
    page.click("#btn-add-next")
    page.click("#palette [data-add-step=human]")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.fill("#panel [name=name]", "Review")
    page.fill("#panel [name=key]", "review")
    wait_applied(page.page, "#panel")
    page.click("#btn-review-branches")

    # The judge: a branch from the draft back to itself, taken when the score is under 7.
    wait_settled(page.page)
    start = handle_of(page.page, "draft")
    page.drag(start, canvas_point(page.page, "branchline.nodeByKey('draft')"), "draft → draft")
    page.wait_for_selector("#panel form[data-editor-form=branch]")
    page.select_option("#panel [name='c-type']", "ai_evaluation")
    page.select_option("#panel [name='c-evaluator']", "+house-judge")
    page.select_option("#panel [name='c-operator']", "less_than")
    page.fill("#panel [name='c-value']", "7")
    wait_applied(page.page, "#panel")

    # Saved, published.
    page.click("#btn-save")
    wait_saved(page.page)
    page.click("#btn-publish")
    page.wait_for_selector("#panel-versions [name=note]")
    page.click("#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .applied, #panel-versions table")

    # A dry run reaches the review.
    page.click("#btn-run")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    page.fill("#panel-testrun [name=input_topic]", "a lighthouse")
    page.click("#panel-testrun button.primary")
    page.wait_for_function(
        "document.getElementById('testrun-live')?.textContent === 'Waiting for a reviewer…'",
        timeout=30000,
    )
    assert "run-visited" in page.evaluate("branchline.nodeByKey('review').classes()")
    browser_page.screenshot("dry-run")

    print(f"\n{len(page.actions)} actions:\n  " + "\n  ".join(page.actions))
    assert len(page.actions) <= MOST_ACTIONS
    recipe = Recipe.objects.get(slug="lighthouse-story")
    assert recipe.latest_version is not None
    saved = document_from_recipe(recipe)
    assert saved["inputs"] == {"topic": {"type": "string"}}
    assert saved["actors"] == {
        "house-drafter": "house-drafter",
        "editors": "@human:editors",
        "house-judge": "house-judge",
    }
    draft, review = saved["steps"]
    assert (draft["key"], draft["actor"], review["key"]) == ("draft", "house-drafter", "review")
    (judge,) = draft["branches"]
    assert judge["when"] == {
        "type": "ai_evaluation",
        "operator": "less_than",
        "value": 7,
        "evaluator": "house-judge",
    }
    assert judge["target"] == "@repeat"  # back to the draft; otherwise on, to the review
    choices = {b["when"]["value"]: (b["action"], b["target"]) for b in review["branches"]}
    assert choices == {
        "approve": ("QUALITY_APPROVED", "@complete"),
        "reject": ("END_RECIPE", "@end"),
        "revise": ("CONTINUE", "draft"),
    }
