"""Compare two runs in the browser: pick them in the run list, see where their paths part."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from runner.models import Run
from runner.services import run_start
from runner.status import TERMINAL
from tests.editor.conftest import STORY
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import BrowserPage

pytestmark = pytest.mark.e2e


def finished(user: Any, recipe: Recipe, **script: list[str]) -> Run:
    """Start a dry run for the worker, and wait until it finishes."""
    run = run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, script=script)
    deadline = time.monotonic() + 30
    while run.status not in TERMINAL:
        assert time.monotonic() < deadline, f"run {run.pk} is still {run.status}"
        time.sleep(0.05)
        run.refresh_from_db()
    return run


def test_two_runs_picked_in_the_list_show_where_their_paths_part_on_the_graph(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    approved = finished(e2e_user, story, writer=[STORY], judge=["9"])
    reviewed = finished(e2e_user, story, writer=[STORY], judge=["5"], editors=["approve"])
    page = browser_page.open("/runs/")

    page.get_by_label(f"Select run #{reviewed.pk} to compare").check()
    page.get_by_label(f"Select run #{approved.pk} to compare").check()
    page.get_by_role("button", name="Compare").click()

    page.wait_for_url(re.compile(rf"/runs/compare/\?a={approved.pk}&b={reviewed.pk}$"))
    page.wait_for_function("window.branchlineCompare && window.branchlineCompare.ready")
    classes = "([key, branch]) => window.branchlineCompare.edgeClasses(key, branch)"
    great = page.evaluate(classes, ["write", "great"])
    to_review = page.evaluate(classes, ["write", "to_review"])
    assert {"path-a", "first-change"} <= set(great) and "path-b" not in great
    assert {"path-b", "first-change"} <= set(to_review) and "path-a" not in to_review
    assert "path-b" in page.evaluate(classes, ["review", "approved"])
    nodes = "(key) => window.branchlineCompare.nodeClasses(key)"
    assert {"path-a", "path-b", "first-change"} <= set(page.evaluate(nodes, "write"))
    review = page.evaluate(nodes, "review")
    assert "path-b" in review and "path-a" not in review
    browser_page.screenshot("compare")

    # The table says the same, without the graph.
    verdict = page.locator("#compare-verdict")
    assert "A took great, B took to_review" in verdict.inner_text()
    assert page.locator("tbody.pair.differs").count() == 2
    assert "only in B" in page.locator("#pair-1").inner_text()
    page.locator("#compare-verdict a").first.click()
    assert page.url.endswith("#pair-0")

    # On a phone each row is a card whose cells say their column, light and dark.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    labels = page.evaluate(
        """() => [...document.querySelectorAll('#pair-0 tr.pair-row td')].map(
            (td) => getComputedStyle(td, '::before').content)"""
    )
    assert labels[:2] == ['"#: "', '"Step: "'], labels
    assert f'"A, run #{approved.pk}: "' in labels and '"What differs: "' in labels
    widths = page.evaluate("[document.body.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    page.locator("#pair-0").scroll_into_view_if_needed()
    browser_page.screenshot("compare-phone")
    page.emulate_media(color_scheme="dark")
    browser_page.screenshot("compare-phone-dark")
