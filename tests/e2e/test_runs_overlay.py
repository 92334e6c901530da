"""Runs on the canvas: the editor's Runs button draws what the last runs of a version did over
the draft (counts in the labels, a heat scale, untaken branches dimmed), a click on a branch
lists its runs with links to their monitors, and turning it off leaves the canvas as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from runner.models import BranchEvaluation, Run, StepRun
from runner.services import run_start
from tests.e2e.test_everywhere import AXE
from tests.editor.test_runs_pages import run_until_it_rests
from workflows.demo import REVIEWER_GROUP, recipe_files
from workflows.demo.actors import DEMO_ACTORS, SHORT_STORY, STORY
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish

from .conftest import BrowserPage
from .editor_page import wait_settled

pytestmark = pytest.mark.e2e

SLUG = "creative-writing-qc"
# Each run's script, oldest first: the writer's first story is too short every time but one.
SCRIPTS: list[dict[str, list[str]]] = [
    {"writer": [SHORT_STORY, STORY], "judge": ["9"]},  # too_short, high_quality_story
    {"writer": [SHORT_STORY, STORY], "judge": ["6", "5", "5"], "editors": ["approve"]},
    {"writer": [STORY], "judge": ["6", "7", "7"]},  # default_evaluation, good_quality
    {"writer": [SHORT_STORY, STORY], "judge": ["9"]},
]

# How every element is drawn, for comparing the canvas before the overlay and after it.
DRAWING = """() => {
    const cy = branchline.cy;
    cy.elements().unselect();
    return cy.elements().map((e) => ({
        id: e.id(),
        classes: e.classes().filter((c) => c !== 'hovered').sort(),
        label: e.style('label'),
        width: e.style('width'),
        color: e.isEdge() ? e.style('line-color') : e.style('border-color'),
        opacity: e.style('opacity'),
        // Cytoscape's removeData leaves a key that it sets to undefined.
        data: Object.keys(e.data()).filter((k) => k.startsWith('runs') && e.data(k) !== undefined),
    }));
}"""


@pytest.fixture
def demo_runs(e2e_user: Any) -> list[Run]:
    """The demo's creative-writing recipe, published, with four finished runs of version 1."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    path = next(p for p in recipe_files() if p.stem == SLUG)
    recipe = recipe_import(user=e2e_user, data=path.read_bytes()).recipe
    recipe_publish(recipe=recipe, user=e2e_user)
    runs = [
        run_until_it_rests(
            run_start(user=e2e_user, recipe=recipe, inputs={"topic": "a storm"}, script=script)
        )
        for script in SCRIPTS
    ]
    assert [run.status for run in runs] == ["succeeded"] * len(SCRIPTS)
    return runs


def runs_that_took() -> dict[tuple[str, str], set[int]]:
    """Return, from the database, the runs that took each branch."""
    took: dict[tuple[str, str], set[int]] = {}
    for step, branch, run_id in BranchEvaluation.objects.filter(taken=True).values_list(
        "step_run__step_key", "branch", "step_run__run_id"
    ):
        took.setdefault((step, branch), set()).add(run_id)
    return took


def turn_on(page: Any) -> None:
    page.click("#btn-runs")
    page.wait_for_selector("#runs-overlay[data-state=shown]")
    wait_settled(page)


def edge(page: Any, step: str, branch: str, expr: str) -> Any:
    return page.evaluate(f"([s, b]) => branchline.edgeByName(s, b).{expr}", [step, branch])


def click_label(page: Any, step: str, branch: str) -> None:
    """Bring a branch's label to the middle of the canvas and click it."""
    point = page.evaluate(
        """([s, b]) => {
            const e = branchline.edgeByName(s, b);
            branchline.cy.center(e);
            const box = e.renderedBoundingBox({includeNodes: false, includeEdges: false,
                                               includeLabels: true, includeOverlays: false});
            const cy = document.getElementById('cy').getBoundingClientRect();
            return {x: cy.left + (box.x1 + box.x2) / 2, y: cy.top + (box.y1 + box.y2) / 2};
        }""",
        [step, branch],
    )
    page.mouse.click(point["x"], point["y"])


def axe_violations(page: Any, *selectors: str) -> list[str]:
    """Run axe-core's default rules on the parts of the page named; describe each violation."""
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        "(include) => axe.run({include: include}).then((r) => r.violations)", list(selectors)
    )
    return [f"{v['id']}: {v['help']} {[n['target'] for n in v['nodes'][:3]]}" for v in violations]


def test_the_runs_overlay_counts_heats_and_lists_the_runs_then_leaves_the_canvas_as_it_was(
    browser_page: BrowserPage, demo_runs: list[Run]
) -> None:
    revision = Recipe.objects.get(slug=SLUG).revision
    page = browser_page.open_editor(SLUG)
    wait_settled(page)
    before = page.evaluate(DRAWING)

    turn_on(page)

    assert page.get_attribute("#btn-runs", "aria-pressed") == "true"
    assert page.inner_text("#runs-summary") == "All 4 runs of v1."
    took = runs_that_took()
    assert took, "the runs took no branch"
    for (step, branch), run_ids in took.items():
        assert edge(page, step, branch, "data('runsRuns')") == len(run_ids), (step, branch)
        plural = "run" if len(run_ids) == 1 else "runs"
        assert edge(page, step, branch, "style('label')").endswith(f"\n{len(run_ids)} {plural}")
    # too_short repeats its step: taken by three runs, the most of any branch.
    assert len(took[("generate_story", "story_too_short")]) == 3
    assert "runs-heat-5" in edge(page, "generate_story", "story_too_short", "classes()")
    assert "runs-heat-5" not in edge(page, "evaluate_quality", "good_quality", "classes()")
    # Never taken: 0, dimmed.
    assert ("editor_review", "editor_rejected") not in took
    assert "runs-zero" in edge(page, "editor_review", "editor_rejected", "classes()")
    assert edge(page, "editor_review", "editor_rejected", "style('label')").endswith("\n0 runs")
    assert float(edge(page, "editor_review", "editor_rejected", "style('opacity')")) < 1
    # Steps say how many runs ran them.
    visited = StepRun.objects.filter(step_key="evaluate_quality").values("run").distinct()
    assert page.evaluate("branchline.nodeByKey('evaluate_quality').data('runsRuns')") == len(
        visited
    )
    assert page.evaluate("branchline.nodeByKey('revise_story').classes()").count("runs-none") == 1
    browser_page.screenshot("runs-overlay")

    # A click on a branch's count lists the runs that took it, newest first, with links.
    click_label(page, "generate_story", "default_evaluation")
    page.wait_for_selector("#runs-popover:not([hidden])")
    links = page.eval_on_selector_all(
        "#runs-popover-list a", "(links) => links.map((a) => a.getAttribute('href'))"
    )
    expected = sorted(took[("generate_story", "default_evaluation")], reverse=True)
    assert links == [f"/runs/{run_id}/" for run_id in expected]
    assert page.inner_text("#runs-popover-title") == "generate_story · default_evaluation"
    assert page.locator("#runs-popover-list .badge.succeeded").count() == len(expected)
    assert page.evaluate("document.activeElement.id") == "runs-popover"
    browser_page.screenshot("runs-popover")
    assert axe_violations(page, "#btn-runs", "#runs-overlay", "#runs-popover") == []

    page.keyboard.press("Escape")
    page.wait_for_selector("#runs-popover", state="hidden")
    assert page.evaluate("document.activeElement.id") == "cy"

    # The same from the keyboard: the panel's list, then a link, then Escape back to the list.
    page.click("#runs-branches summary")
    button = page.get_by_role("button", name="Runs that took generate_story · story_too_short")
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#runs-popover:not([hidden])")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.getAttribute('href')")
    newest = max(took[("generate_story", "story_too_short")])
    assert focused == f"/runs/{newest}/"
    page.mouse.click(5, 5)  # elsewhere: it closes
    page.wait_for_selector("#runs-popover", state="hidden")
    # A branch picked in the step list, then Enter on the canvas.
    page.click('#outline .outline-item[data-path="steps[1].branches[1]"]')
    page.focus("#cy")
    page.keyboard.press("Enter")
    page.wait_for_selector("#runs-popover:not([hidden])")
    assert page.inner_text("#runs-popover-title") == "evaluate_quality · good_quality"
    page.click("#runs-popover-close")
    page.wait_for_selector("#runs-popover", state="hidden")
    assert page.evaluate("document.activeElement.id") == "cy"

    page.click("#btn-runs")
    page.wait_for_selector("#runs-overlay", state="hidden")
    page.mouse.move(1, 1)
    # Labels that would pile up are worked out again a moment after a change.
    try:
        page.wait_for_function(
            f"JSON.stringify(({DRAWING})()) === JSON.stringify({json.dumps(before)})",
            timeout=5000,
        )
    except PlaywrightTimeout:
        after = page.evaluate(DRAWING)
        assert [a for a, b in zip(after, before, strict=True) if a != b] == []
    assert page.evaluate("branchline.dirty") is False
    assert page.evaluate("branchline.cy.undoRedo().isUndoStackEmpty()") is True
    assert page.inner_text("#save-state") == "Saved"
    assert Recipe.objects.get(slug=SLUG).revision == revision


def test_counts_of_branches_the_draft_no_longer_has_are_listed_in_a_note(
    browser_page: BrowserPage, e2e_user: Any, demo_runs: list[Run]
) -> None:
    recipe = Recipe.objects.get(slug=SLUG)
    path = next(p for p in recipe_files() if p.stem == SLUG)
    document = json.loads(path.read_text())
    document["steps"][0]["branches"][2]["name"] = "excellent_story"
    recipe_import(user=e2e_user, data=document, replace=True)
    page = browser_page.open_editor(recipe.slug)

    turn_on(page)

    note = page.inner_text("#runs-note")
    assert "Not on the canvas (renamed or removed since v1):" in note
    assert "generate_story · high_quality_story" in note
    assert "2 runs" in note
    assert "runs-absent" in edge(page, "generate_story", "excellent_story", "classes()")
    assert edge(page, "generate_story", "excellent_story", "style('label')").endswith("\nnot in v1")
    browser_page.screenshot("runs-note")
