"""The editor lays out a recipe without saved positions off the main thread, and caches it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import BrowserPage
from workflows.models import Recipe
from workflows.services import recipe_import

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

STEPS = 40

# Where the page placed the steps, and how: "worker", "cache" or "page" (canvas.js `placed`).
PLACEMENT = """async () => {
    const canvas = await import("/static/editor/canvas.js");
    const source = await canvas.placed();
    const marks = performance.getEntriesByType("mark").map((m) => m.name);
    const positions = {};
    branchline.cy.nodes('[kind = "step"]').forEach((n) => {
        positions[n.data("key")] = [Math.round(n.position("x")), Math.round(n.position("y"))];
    });
    return {source: source, positions: positions, marks: marks};
}"""

# The same graph laid out by dagre in the page, as the editor did before the worker.
IN_PAGE = """async () => {
    const style = await import("/static/editor/canvas-style.js");
    const cy = branchline.cy;
    const copy = cytoscape({headless: true, styleEnabled: true, style: style.LAYOUT_STYLE,
                            elements: cy.elements().jsons()});
    copy.layout(Object.assign({}, style.LAYOUT, {fit: false})).run();
    const positions = {};
    copy.nodes('[kind = "step"]').forEach((n) => {
        positions[n.data("key")] = [Math.round(n.position("x")), Math.round(n.position("y"))];
    });
    copy.destroy();
    return positions;
}"""


def chain_document(steps: int) -> dict[str, Any]:
    """Return a recipe of `steps` steps in a chain, two branches each, without positions."""
    keys = [f"step_{i:03d}" for i in range(1, steps + 1)]
    return {
        "format": "branchline.recipe/v1",
        "slug": "long-chain",
        "name": "Long chain",
        "actors": {"writer": "editor-writer"},
        "steps": [
            {
                "key": key,
                "name": f"Step {i + 1}",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Go on.",
                "branches": [
                    {
                        "name": "short",
                        "priority": 1,
                        "when": {"type": "length_check", "operator": "less_than", "value": 9},
                        "action": "CONTINUE",
                        "target": keys[i + 1] if i + 1 < steps else "@complete",
                    },
                    {
                        "name": "otherwise",
                        "priority": 999,
                        "when": {"type": "default"},
                        "action": "DEFAULT_CONTINUE",
                        "target": keys[i + 2] if i + 2 < steps else "@complete",
                    },
                ],
            }
            for i, key in enumerate(keys)
        ],
    }


@pytest.fixture
def chain(e2e_user: Any, story_actors: None) -> Recipe:
    return recipe_import(user=e2e_user, data=chain_document(STEPS)).recipe


def test_it_lays_out_in_a_worker_then_opens_from_the_cache(
    browser_page: BrowserPage, chain: Recipe
) -> None:
    page = browser_page.open_editor(chain.slug)
    first = page.evaluate(PLACEMENT)
    assert first["source"] == "worker"
    # The worker runs the page's own dagre on the page's node sizes: the very same places.
    assert first["positions"] == page.evaluate(IN_PAGE)
    xs = [first["positions"][f"step_{i:03d}"][0] for i in range(1, STEPS + 1)]
    assert xs == sorted(xs) and len(set(xs)) == STEPS  # left to right
    marks = first["marks"]
    assert marks.index("editor-laid-out") < marks.index("editor-ready")
    assert page.evaluate("branchline.dirty") is False
    browser_page.screenshot("worker")

    page = browser_page.open_editor(chain.slug)
    second = page.evaluate(PLACEMENT)
    assert second["source"] == "cache"
    assert second["positions"] == first["positions"]
    assert page.evaluate("branchline.dirty") is False
    browser_page.screenshot("cache")
    # Opening changed nothing in the draft: the positions live in this browser only.
    revision = chain.revision
    chain.refresh_from_db()
    assert chain.revision == revision
    assert not chain.steps.exclude(position=None).exists()


def test_a_changed_graph_is_laid_out_again(browser_page: BrowserPage, chain: Recipe) -> None:
    page = browser_page.open_editor(chain.slug)
    assert page.evaluate(PLACEMENT)["source"] == "worker"
    document = chain_document(STEPS)
    document["steps"][0]["branches"][1]["target"] = "step_010"
    recipe_import(user=chain.owner, data=document, replace=True)

    page = browser_page.open_editor(chain.slug)
    assert page.evaluate(PLACEMENT)["source"] == "worker"


def test_without_workers_it_lays_out_in_the_page(browser_page: BrowserPage, chain: Recipe) -> None:
    browser_page.page.add_init_script("delete window.Worker;")
    page = browser_page.open_editor(chain.slug)
    placement = page.evaluate(PLACEMENT)
    assert placement["source"] == "page"
    assert placement["positions"] == page.evaluate(IN_PAGE)
