"""A readable canvas: the demo recipes open with readable labels, a minimap clear of the steps,
parallel branches whose labels do not pile up, a step list that does not move the view, and a
monitor path graph that fills its panel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group

from editor.services import recipe_create
from runner.services import run_start
from workflows.demo import REVIEWER_GROUP, recipe_files
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish

from .conftest import BrowserPage
from .editor_page import wait_settled

pytestmark = pytest.mark.e2e

# Each node whose label is drawn: its on-screen font size (the library's computed font size
# times the zoom), whether Cytoscape hides it as too small, and its rendered box.
NODE_LABELS = """() => {
    const cy = branchline.cy;
    const zoom = cy.zoom();
    return cy.nodes().map((n) => ({
        id: n.id(),
        label: n.data('label'),
        px: zoom * parseFloat(n.style('font-size')),
        minPx: parseFloat(n.style('min-zoomed-font-size')),
        shown: n.style('label') !== '' && n.visible(),
    }));
}"""

# Every pair of edges between the same two nodes (either way), with their labels' rendered
# boxes where the label is drawn.
PARALLEL_LABELS = """() => {
    const cy = branchline.cy;
    const box = (e) => {
        const b = e.renderedBoundingBox({includeNodes: false, includeEdges: false,
                                         includeLabels: true, includeOverlays: false});
        return {x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2, w: b.w, h: b.h};
    };
    const pairs = [];
    const edges = cy.edges().filter((e) => e.data('label') && e.style('label') !== '' &&
        parseFloat(e.style('text-opacity')) > 0);
    edges.forEach((a, i) => {
        edges.slice(i + 1).forEach((b) => {
            const same = (a.source().same(b.source()) && a.target().same(b.target())) ||
                (a.source().same(b.target()) && a.target().same(b.source()));
            if (same) pairs.push({a: a.data('label'), b: b.data('label'), boxA: box(a), boxB: box(b)});
        });
    });
    return pairs;
}"""

NAV_OVERLAPS = """() => {
    const cy = branchline.cy;
    const nav = document.getElementById('cy-nav');
    if (nav.dataset.corner === 'none') return {hidden: true, hits: []};
    const c = document.getElementById('cy').getBoundingClientRect();
    const r = nav.getBoundingClientRect();
    const hits = cy.nodes().filter((n) => {
        const b = n.renderedBoundingBox();
        return b.x1 + c.left < r.right && b.x2 + c.left > r.left &&
            b.y1 + c.top < r.bottom && b.y2 + c.top > r.top;
    }).map((n) => n.data('label'));
    return {hidden: false, hits: hits, width: r.width};
}"""


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]


@pytest.fixture
def demo_recipes(e2e_user: Any) -> list[str]:
    """Import the demo recipes (with the actors and group they name) as drafts."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    return [recipe_import(user=e2e_user, data=p.read_bytes()).recipe.slug for p in recipe_files()]


def wait_view(page: Any) -> None:
    """Wait for the page to settle and the navigator to be placed for the current view."""
    wait_settled(page)
    page.wait_for_function(
        "(() => { const d = document.getElementById('cy-nav').dataset;"
        " return d.corner !== undefined && d.pending === undefined; })()"
    )


@pytest.mark.parametrize("path", recipe_files(), ids=lambda p: p.stem)
def test_each_demo_recipe_opens_readable_with_the_minimap_clear_of_its_steps(
    browser_page: BrowserPage, demo_recipes: list[str], path: Path
) -> None:
    page = browser_page.open_editor(path.stem)
    wait_view(page)
    browser_page.screenshot("initial-fit")

    labels = page.evaluate(NODE_LABELS)
    shown = [n for n in labels if n["shown"]]
    # Every node, the terminals included, is drawn with its label: none is hidden as too small.
    assert len(shown) == len(labels)
    small = [(n["label"], round(n["px"], 1)) for n in shown if n["px"] < 11 or n["px"] < n["minPx"]]
    assert small == []
    # Each step card draws its kind's icon.
    icons = page.evaluate("branchline.cy.nodes('.step').map((n) => n.style('background-image'))")
    assert icons and all(str(i).startswith("data:image/svg+xml") for i in icons), icons
    nav = page.evaluate(NAV_OVERLAPS)
    assert nav["hits"] == []
    pairs = page.evaluate(PARALLEL_LABELS)
    piled = [(p["a"], p["b"]) for p in pairs if overlap(p["boxA"], p["boxB"])]
    assert piled == []


def test_document_routing_opens_at_a_readable_zoom_with_named_terminals(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("document-routing")
    wait_view(page)

    zoom = page.evaluate("branchline.cy.zoom()")
    terminals = page.evaluate(
        "() => branchline.cy.nodes('.terminal').map((n) => "
        "branchline.cy.zoom() * parseFloat(n.style('font-size')))"
    )

    assert zoom > 0.45
    assert terminals and min(terminals) >= 11


def test_clicking_a_step_on_screen_in_the_step_list_does_not_move_the_view(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("creative-writing-qc")
    wait_view(page)
    before = page.evaluate("({zoom: branchline.cy.zoom(), pan: branchline.cy.pan()})")
    on_screen = page.evaluate(
        """() => {
            const cy = branchline.cy;
            const w = cy.width(), h = cy.height();
            return cy.nodes('[kind = "step"]').filter((n) => {
                const b = n.renderedBoundingBox();
                return b.x1 >= 0 && b.y1 >= 0 && b.x2 <= w && b.y2 <= h;
            }).map((n) => n.data('key'));
        }"""
    )
    assert len(on_screen) >= 2

    for key in on_screen:
        order = page.evaluate("(k) => branchline.nodeByKey(k).data('order')", key)
        page.click(f'#outline .outline-item[data-path="steps[{order}]"]')
        assert page.evaluate("branchline.cy.$(':selected').data('key')") == key
        after = page.evaluate("({zoom: branchline.cy.zoom(), pan: branchline.cy.pan()})")
        assert after == before
    browser_page.screenshot("selected-in-list")


def test_clicking_a_step_off_screen_in_the_step_list_brings_it_into_view(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("creative-writing-qc")
    wait_view(page)
    # Pan far away so no step is on screen.
    page.evaluate("branchline.cy.pan({x: -20000, y: -20000}); null")

    page.click('#outline .outline-item[data-path="steps[0]"]')

    inside = page.evaluate(
        """() => {
            const cy = branchline.cy;
            const b = cy.$(':selected').renderedBoundingBox();
            return b.x1 >= 0 && b.y1 >= 0 && b.x2 <= cy.width() && b.y2 <= cy.height();
        }"""
    )
    assert inside


def test_a_crowded_branch_label_is_hidden_until_the_branch_is_hovered(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    # Five branches loop back onto the mathematician's step: their labels cannot all be drawn.
    page = browser_page.open_editor("first-1000-primes")
    wait_view(page)
    crowded = "branchline.cy.edges('.label-crowded').first()"
    assert page.evaluate(f"{crowded}.nonempty()")
    assert page.evaluate(f"parseFloat({crowded}.style('text-opacity'))") == 0

    page.evaluate(f"{crowded}.emit('mouseover'); null")

    assert page.evaluate(f"parseFloat({crowded}.style('text-opacity'))") == 1
    browser_page.screenshot("crowded-label-hovered")


FILL = """() => {
    const box = document.getElementById('run-graph');
    const cy = box._cyreg.cy;
    const bb = cy.elements().renderedBoundingBox();
    return {w: bb.w / box.clientWidth, h: bb.h / box.clientHeight,
            font: cy.zoom() * parseFloat(cy.nodes().first().style('font-size'))};
}"""


def test_the_monitors_path_graph_fills_its_panel(
    browser_page: BrowserPage, e2e_user: Any, demo_recipes: list[str]
) -> None:
    recipe = Recipe.objects.get(slug="creative-writing-qc")
    recipe_publish(recipe=recipe, user=e2e_user)
    run = run_start(user=e2e_user, recipe=recipe, inputs={}, script={"judge": ["9"]})
    page = browser_page.open(f"/runs/{run.pk}/")
    page.wait_for_selector("#run-graph canvas")

    fill = page.evaluate(FILL)

    # The drawing spans the panel both ways (within the fit's padding), not a strip in a box.
    assert fill["w"] > 0.85 and fill["h"] > 0.85, fill
    assert fill["font"] >= 10, fill
    browser_page.screenshot("monitor-graph")


def test_a_step_card_shows_its_lint_status_as_a_badge_beside_its_kind_icon(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("validation-loop")
    wait_view(page)
    images = "(c) => { const n = branchline.nodeByKey('answer'); n.classes('step kind-llm ' + c);"
    images += " return n.style('background-image').split(' ').length; }"

    assert page.evaluate(images, "") == 1
    assert page.evaluate(images, "has-warning") == 2
    assert page.evaluate(images, "has-error") == 2
    browser_page.screenshot("error-badge")


# Every node's rendered box, and the label box of each edge whose label is drawn.
VIEW_BOXES = """() => {
    const cy = branchline.cy;
    const plain = (b) => ({x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2});
    const nodes = cy.nodes().map((n) => ({
        label: n.data('label'), box: plain(n.renderedBoundingBox({includeLabels: false})),
    }));
    const labels = cy.edges().filter((e) => e.data('label') &&
        parseFloat(e.style('text-opacity')) > 0).map((e) => ({
        label: e.data('label'),
        box: plain(e.renderedBoundingBox({includeNodes: false, includeEdges: false,
                                         includeLabels: true, includeOverlays: false})),
    }));
    return {width: cy.width(), height: cy.height(), nodes: nodes, labels: labels};
}"""


def assert_whole_and_clear(view: dict[str, Any]) -> None:
    """Every node is in view, and no drawn branch label meets a node (it would be under it)."""
    out = [
        n["label"]
        for n in view["nodes"]
        if n["box"]["x1"] < 0
        or n["box"]["y1"] < 0
        or n["box"]["x2"] > view["width"]
        or n["box"]["y2"] > view["height"]
    ]
    assert out == []
    under = [
        (e["label"], n["label"])
        for e in view["labels"]
        for n in view["nodes"]
        if overlap(e["box"], n["box"])
    ]
    assert under == []


@pytest.mark.parametrize("path", recipe_files(), ids=lambda p: p.stem)
def test_fit_shows_every_node_of_each_demo_recipe_with_no_label_under_a_node(
    browser_page: BrowserPage, demo_recipes: list[str], path: Path
) -> None:
    page = browser_page.open_editor(path.stem)
    wait_view(page)
    assert_whole_and_clear(page.evaluate(VIEW_BOXES))
    # Most branches are labelled at first sight, not only on hover.
    view = page.evaluate(VIEW_BOXES)
    branches = page.evaluate("branchline.cy.edges('[kind = \"branch\"]').length")
    assert len(view["labels"]) >= branches / 2, (len(view["labels"]), branches)

    page.evaluate("branchline.cy.viewport({zoom: 2.5, pan: {x: -900, y: -700}}); null")
    page.click("#btn-fit")
    wait_view(page)

    assert_whole_and_clear(page.evaluate(VIEW_BOXES))
    browser_page.screenshot("fit")


def test_branches_read_in_words_with_the_engine_code_on_hover(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("creative-writing-qc")
    wait_view(page)
    label = "(b) => branchline.edgeByName(b[0], b[1]).data('label')"

    assert (
        page.evaluate(label, ["evaluate_quality", "low_quality"]) == "if judge < 6 → Human Review"
    )
    assert page.evaluate(label, ["generate_story", "default_evaluation"]) == (
        "otherwise → Evaluate Quality"
    )
    assert page.evaluate(label, ["editor_review", "editor_approved"]) == "approve → Complete"
    assert page.evaluate(label, ["generate_story", "story_too_short"]) == "if len < 200 → again"

    page.evaluate(
        "branchline.edgeByName('generate_story', 'default_evaluation').emit('mouseover'); null"
    )
    tip = page.inner_text("#edge-tip")
    assert "DEFAULT_CONTINUE" in tip and "priority 999" in tip


def test_the_next_step_in_order_is_drawn_where_no_branch_is_always_taken(
    browser_page: BrowserPage, demo_recipes: list[str]
) -> None:
    page = browser_page.open_editor("creative-writing-qc")
    wait_view(page)
    sequence = page.evaluate(
        "branchline.cy.edges('[kind = \"sequence\"]').map((e) => "
        "[e.source().data('key') || '', e.target().data('key') || e.target().data('terminal'),"
        " e.style('line-style')])"
    )

    # Generating ends with a default branch; evaluating and reviewing can fall through.
    assert sorted(sequence) == [
        ["editor_review", "revise_story", "dashed"],
        ["evaluate_quality", "editor_review", "dashed"],
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_hint_of_a_new_recipe_is_drawn_clear_of_the_terminals(
    browser_page: BrowserPage, e2e_user: Any, scheme: str
) -> None:
    recipe_create(user=e2e_user, name="Fresh", slug="fresh")
    browser_page.page.emulate_media(color_scheme=scheme)
    page = browser_page.open_editor("fresh")
    wait_view(page)

    hits = page.evaluate(
        """() => {
            const hint = document.getElementById('canvas-hint').getBoundingClientRect();
            const c = document.getElementById('cy').getBoundingClientRect();
            return branchline.cy.nodes().filter((n) => {
                const b = n.renderedBoundingBox();
                return b.x1 + c.left < hint.right && b.x2 + c.left > hint.left &&
                    b.y1 + c.top < hint.bottom && b.y2 + c.top > hint.top;
            }).map((n) => n.data('label'));
        }"""
    )

    assert page.is_visible("#canvas-hint")
    assert hits == []
    browser_page.screenshot(f"new-recipe-{scheme}")
