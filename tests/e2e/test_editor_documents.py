"""Documents through the canvas: every demo recipe and odd documents come back unchanged,
and the canvas labels conditions as the engine does, from the catalog."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.editor.conftest import story_document
from tests.engine.test_catalog import SUMMARIES
from workflows import engine
from workflows.adapters import document_from_recipe
from workflows.engine import condition_summary
from workflows.models import Recipe

from .conftest import BrowserPage
from .editor_page import add_step

pytestmark = pytest.mark.e2e


# Drafts list branches by priority (as the rows are read back); equal priorities keep their order.
ODD_DOCUMENTS = [
    {**story_document(), "extra_top_level": {"kept": True}},
    story_document(
        steps=[
            {
                "key": "a",
                "name": "A",
                "kind": "llm",
                "actor": "writer",
                "prompt": "",
                "position": {"x": 1.5, "y": -2},
                "branches": [
                    {
                        "name": "dangling",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "nowhere",
                        "active": False,
                    },
                    {
                        "name": "skip",
                        "priority": 2,
                        "when": {"type": "default"},
                        "action": "SKIP_TO_END",
                        "target": "",
                    },
                    {
                        "name": "self",
                        "priority": 3,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "a",
                        "params": {"x": [1, {"y": None}]},
                    },
                ],
            },
            {
                "key": "b",
                "name": "B",
                "kind": "decision_tree",
                "prompt": "",
                "tree": {"version": "1", "tree": {"type": "leaf", "prompt": "a"}},
                "leaf_targets": {"a": "@end"},
                "branches": [],
            },
            {
                "key": "c",
                "name": "C",
                "kind": "human",
                "actor": "editors",
                "prompt": "",
                "options": ["approve"],
                "branches": [
                    {
                        "name": "same_priority",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "ENHANCE_PROMPT",
                        "target": "",
                        "params": {"prompt_enhancement": "x"},
                    },
                    {
                        "name": "same_priority_2",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                ],
            },
        ]
    ),
]


def test_every_demo_recipe_opens_renders_and_round_trips_unchanged(
    browser_page: BrowserPage, e2e_user: Any
) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    e2e_user.is_staff = True
    e2e_user.save()
    files = sorted((settings.BASE_DIR / "workflows" / "demo" / "recipes").glob("*.json"))
    assert files, "no demo recipes found"
    for path in files:
        slug = json.loads(path.read_text())["slug"]
        recipe = Recipe.objects.get(slug=slug)
        before = copy.deepcopy(document_from_recipe(recipe))
        revision = recipe.revision
        page = browser_page.open_editor(slug)
        counts = page.evaluate(
            "() => [branchline.cy.nodes('[kind = \"step\"]').length,"
            " branchline.cy.edges('[kind = \"branch\"]').length,"
            " branchline.cy.nodes('[kind = \"missing\"]').length]"
        )
        branches = sum(len(s.get("branches", [])) for s in before["steps"])
        assert counts == [len(before["steps"]), branches, 0], slug
        page.wait_for_selector("#lint .count")
        assert "0 errors" in page.inner_text("#lint .count"), slug
        browser_page.screenshot(f"demo-{slug}")
        assert page.evaluate("branchline.save(false)"), slug
        recipe.refresh_from_db()
        assert recipe.revision == revision + 1, slug
        assert document_from_recipe(recipe) == before, slug


def test_the_converter_gives_back_the_document_it_was_given(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    for document in ODD_DOCUMENTS:
        back = page.evaluate(
            """async (doc) => {
                const G = await import('/static/editor/recipe-graph.js');
                const built = G.toElements(doc);
                const cy = cytoscape({headless: true, elements: built.elements});
                G.syncEdges(cy);
                return G.toDocument(cy, built.meta).document;
            }""",
            document,
        )
        assert back == document


def test_the_canvas_summarises_conditions_as_the_engine_does(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    long = {"type": "pattern_match", "operator": "contains", "value": "x" * 90}
    garbage: list[object] = [None, "text", 3, [], {"type": 5}, {}, {"type": []}]
    cases = [when for when, _ in SUMMARIES] + [long, *garbage]
    drawn = page.evaluate(
        """async (cases) => {
            const catalog = await import('/static/editor/catalog.js');
            return cases.map((when) => catalog.summarize(when));
        }""",
        cases,
    )
    assert drawn == [condition_summary(when) for when in cases]
    assert drawn[: len(SUMMARIES)] == [summary for _, summary in SUMMARIES]


def test_the_palette_offers_every_step_kind_of_the_catalog(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    offered = page.eval_on_selector_all(
        "#palette [data-add-step]", "(bs) => bs.map((b) => b.dataset.addStep)"
    )
    assert offered == [kind["kind"] for kind in engine.catalog()["steps"]]
    add_step(page, "classify")
    page.wait_for_selector("#panel [data-op=rt-add]")
    # A new step is named after its kind and given the actor of the recipe's first LLM step.
    steps = document_from_recipe(story)["steps"]
    model = next(s["actor"] for s in steps if s.get("kind", "llm") == "llm")
    label = page.evaluate("branchline.cy.$(':selected').data('label')")
    assert label == f"New Classify\nClassify · {model}"
