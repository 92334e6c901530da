"""Save as test on a dry run's monitor: a name typed in its small form, then the recipe's tests
page, where the test passes."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from runner.services import run_start
from runner.status import TERMINAL
from tests.editor.conftest import STORY
from tests.runner.conftest import wait_for
from workflows.models import Recipe
from workflows.services import recipe_draft_snapshot, recipe_publish

from .conftest import BrowserPage
from .test_everywhere import axe_violations

pytestmark = pytest.mark.e2e


def test_a_draft_test_run_is_saved_as_a_test_that_passes(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    # A test run of the draft, as the editor starts one: scripted, on a hidden snapshot.
    snapshot = recipe_draft_snapshot(recipe=story, user=e2e_user)
    script = {"writer": [STORY], "judge": ["5"], "editors": ["approve: good"]}
    run = wait_for(
        run_start(
            user=e2e_user, recipe=story, inputs={"topic": "owls"}, script=script, snapshot=snapshot
        ),
        *TERMINAL,
        timeout=30,
    )
    page = browser_page.open(f"/runs/{run.pk}/")

    page.get_by_text("Save as test…").click()
    name = page.get_by_label("Test name")
    expect(name).to_have_attribute("placeholder", f"Run #{run.pk}")
    browser_page.screenshot("save-as-test-form")
    for scheme in ("dark", "light"):
        page.emulate_media(color_scheme=scheme)
        browser_page.screenshot(f"save-as-test-form-{scheme}")
        violations = axe_violations(page)
        assert not violations, "\n".join(violations)
    # On a phone the form fits the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.get_by_text("Save as test…").click()
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    browser_page.screenshot("save-as-test-form-phone")
    page.set_viewport_size({"width": 1280, "height": 900})
    name.fill("Owls, reviewed and approved")
    page.get_by_role("button", name="Save as test").click()

    page.wait_for_url(f"**/recipes/{story.slug}/tests/")
    row = page.locator('.test-row[data-test="Owls, reviewed and approved"]')
    expect(row).to_contain_text("write → review")
    expect(page.locator("body")).to_contain_text("saved as the test “Owls, reviewed and approved”")
    page.get_by_role("button", name="Run all tests").click()
    expect(row.locator(".badge")).to_have_text("passed", timeout=30_000)
    browser_page.screenshot("save-as-test-passed")
