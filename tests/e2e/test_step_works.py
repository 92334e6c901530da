"""The demo adaptive recipe's "what works" page after 20 dry runs, in the browser: reached from
the recipe's stats page, it shows the learner's pick (the mathematician) with its evidence, the
chart and table of every actor and prompt, and the learner's latest choices."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runner import services
from runner.status import RunStatus
from tests.runner.recipes import drive, publish_document
from workflows.demo import recipe_files
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe

from .conftest import BrowserPage

pytestmark = pytest.mark.e2e

DRY_RUNS = 20


@pytest.fixture
def adaptive_demo(e2e_user: Any) -> Recipe:
    """The demo adaptive recipe, published by the page's user, with the scripted demo actors
    answering at once (their demo delay only makes the monitor watchable)."""
    for spec in DEMO_ACTORS:
        Actor.objects.create(**{**spec, "config": {**spec.get("config", {}), "delay_ms": 0}})
    path = next(p for p in recipe_files() if p.name == "first-1000-primes.json")
    return publish_document(e2e_user, json.loads(path.read_text()))


def test_after_20_dry_runs_the_page_shows_the_learned_choice_and_its_evidence(
    browser_page: BrowserPage, e2e_user: Any, adaptive_demo: Recipe, artifacts: Path
) -> None:
    for _ in range(DRY_RUNS):
        # Executed in this thread; the live server reads the same database.
        run = drive(services.run_start(user=e2e_user, recipe=adaptive_demo, inputs={}))
        assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")

    page = browser_page.open(f"/recipes/{adaptive_demo.slug}/stats/")
    page.get_by_role("navigation", name="What works on each step").get_by_role(
        "link", name="Deliver the Data"
    ).click()
    page.wait_for_url(re.compile(r"/recipes/first-1000-primes/steps/deliver/works/$"))

    pick = page.locator("#learner-pick")
    assert pick.is_visible()
    assert page.get_by_role("heading", name="What the learner picks now").is_visible()
    picked = pick.locator("[data-pick]").inner_text()
    assert picked.startswith("mathematician · ")
    # Its evidence: every judged attempt of the mathematician succeeded, and why it is picked.
    evidence = pick.inner_text()
    found = re.search(r"(\d+) of (\d+) judged attempts? succeeded", evidence)
    assert found and found.group(1) == found.group(2) and int(found.group(1)) > 0
    assert "best success rate" in pick.locator("#learner-reason").inner_text()
    assert "Exploration is on" in evidence
    # The table marks the same arm; the coder never succeeded with any prompt.
    table = page.locator("#works-table")
    assert picked in table.locator("tr[data-picked] th").inner_text()
    for coder in table.locator('tr[data-arm^="coder|"]').all():
        assert coder.locator('[data-col="successes"]').inner_text() == "0"
    # The chart, drawn on the server, with the rates written on it.
    chart = page.locator("svg#success-rates")
    assert chart.is_visible()
    assert "100%" in chart.locator("text").all_text_contents()
    assert page.locator("#learner-choices tbody tr").count() == 10
    browser_page.screenshot("what-works")
    page.screenshot(
        path=str(artifacts / f"{browser_page.name}-what-works-full.png"), full_page=True
    )
