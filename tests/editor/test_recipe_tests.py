"""Recipe tests run for real: dry runs on a Celery worker, their results and branch coverage."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.models import RecipeTest
from editor.selectors import run_path
from editor.services import recipe_tests_refresh, recipe_tests_run
from runner.models import Run
from runner.services import run_start
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import STORY, htmx_post


@pytest.fixture
def published(story: Recipe, author: Any, celery_worker: Any, transactional_db: None) -> Recipe:
    recipe_publish(recipe=story, user=author)
    return story


def wait_until_done(recipe: Recipe, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while recipe_tests_refresh(recipe=recipe):
        if time.monotonic() > deadline:
            raise AssertionError("the recipe tests did not finish")
        time.sleep(0.05)


def wait_for_run(run: Run, timeout: float = 20) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in ("succeeded", "failed", "ended", "cancelled"):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run.pk} is still {run.status}")


def test_the_path_of_a_run_lists_every_step_visit_and_taken_branch(
    published: Recipe, author: Any
) -> None:
    run = run_start(
        user=author,
        recipe=published,
        inputs={"topic": "sea"},
        script={"writer": ["short", STORY], "judge": ["9"]},
    )
    wait_for_run(run)
    path, taken = run_path(run)
    assert path == ["write", "write"]
    assert taken == [["write", "too_short"], ["write", "great"]]


def test_running_all_tests_records_passes_failures_and_coverage(
    published: Recipe, author: Any
) -> None:
    RecipeTest.objects.create(
        recipe=published,
        name="approved at once",
        inputs={"topic": "sea"},
        script={"writer": [STORY], "judge": ["9"]},
        expected_path=["write"],
        expected_status="succeeded",
    )
    RecipeTest.objects.create(
        recipe=published,
        name="wrong expectation",
        inputs={"topic": "sea"},
        script={"writer": ["it failed, sadly, at the very end of a long story"]},
        expected_path=["write", "review"],
    )
    RecipeTest.objects.create(
        recipe=published,
        name="missing input",
        inputs={},
        script={},
        expected_path=["write"],
    )
    recipe_tests_run(recipe=published, user=author)
    wait_until_done(published)
    results = {t.name: t for t in RecipeTest.objects.all()}
    assert results["approved at once"].last_result == "passed"
    assert results["approved at once"].last_taken == [["write", "great"]]
    failed = results["wrong expectation"]
    assert failed.last_result == "failed"
    assert failed.last_message == "took write; expected write → review"
    assert results["missing input"].last_result == "error"
    assert "inputs.topic: required" in results["missing input"].last_message


def test_the_tests_panel_shows_results_and_the_untaken_branches(
    published: Recipe, author: Any
) -> None:
    client = Client()
    client.force_login(author)
    RecipeTest.objects.create(
        recipe=published,
        name="happy",
        inputs={"topic": "sea"},
        script={"writer": [STORY], "judge": ["9"]},
        expected_path=["write"],
    )
    running = htmx_post(client, reverse("recipe-tests-run", args=[published.slug]), None)
    assert running.status_code == 200
    wait_until_done(published)
    page = client.get(
        reverse("recipe-tests", args=[published.slug]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "passed" in page
    assert "every 700ms" not in page
    assert "1 of 7" in page
    assert 'data-branch-name="too_short"' in page
    assert 'data-branch-name="great"' not in page


def test_a_test_saved_from_a_run_takes_that_run_as_its_first_result(
    published: Recipe, author: Any
) -> None:
    client = Client()
    client.force_login(author)
    run = run_start(
        user=author,
        recipe=published,
        inputs={"topic": "sea"},
        script={"writer": ["it failed badly, at the very end of a long story"]},
    )
    wait_for_run(run)
    result = client.get(reverse("recipe-testrun-result", args=[published.slug]), {"run": run.pk})
    page = result.content.decode()
    assert "<code>write</code>" in page
    assert "ended" in page
    assert "regex matched" in page or "matched" in page
    saved = htmx_post(
        client,
        reverse("recipe-tests", args=[published.slug]),
        None,
        name="ends on failure",
        run=str(run.pk),
        inputs='{"topic": "sea"}',
        script='{"writer": ["it failed badly, at the very end of a long story"]}',
        expected_path="write",
        expected_status="ended",
    )
    assert "it passed" in saved.content.decode()
    test = RecipeTest.objects.get()
    assert (test.last_result, test.last_run_id) == ("passed", run.pk)
