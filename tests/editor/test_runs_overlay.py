"""Runs on the canvas: the editor's overlay asks what the last runs of a published version did,
per step and branch, with the newest runs that took each branch to link to."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from runner.models import BranchEvaluation, Run, StepRun
from runner.services import run_start
from runner.stats import RUNS_LISTED
from tests.editor.conftest import story_document
from tests.editor.test_runs_pages import client_for, run_until_it_rests, start
from tests.factories import UserFactory
from workflows.models import Recipe
from workflows.services import recipe_draft_snapshot, recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

URL = "/recipes/story/runs-overlay/"
SHORT = "Too short."
FAILED = "An error occurred: the story failed to appear at all."


@pytest.fixture
def history(author: Any, published: Recipe) -> list[Run]:
    """Five real runs of version 1, oldest first, each down another path."""
    return [
        # great (the judge scores 9): approved at once.
        start(author, published),
        # to_review (the judge scores 3), then the editors approve.
        start(author, published, judge=["3"], editors=["approve"]),
        # too_short once (the second story is long enough), then great.
        start(author, published, writer=[SHORT, "A long enough story about owls, at last."]),
        # too_short twice (its max_retries), then great: one run, taken twice.
        start(author, published, writer=[SHORT]),
        # broken: the run ends.
        start(author, published, writer=[FAILED]),
    ]


def overlay(web: Client, **params: Any) -> dict[str, Any]:
    response = web.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()


def counts(data: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int]]:
    """Return (runs, times taken) per (step, branch)."""
    return {(b["step"], b["branch"]): (b["runs"], b["taken"]) for b in data["branches"]}


def visits(data: dict[str, Any]) -> dict[str, int]:
    return {s["step"]: s["runs"] for s in data["steps"]}


def taken_in_database(runs: list[Run]) -> dict[tuple[str, str], tuple[int, int]]:
    """Count, straight from the evaluations, the runs that took each branch and how often."""
    found: dict[tuple[str, str], list[int]] = {}
    rows = BranchEvaluation.objects.filter(taken=True, step_run__run__in=runs).values_list(
        "step_run__step_key", "branch", "step_run__run_id"
    )
    for step, branch, run_id in rows:
        found.setdefault((step, branch), []).append(run_id)
    return {key: (len(set(ids)), len(ids)) for key, ids in found.items()}


# -- the counts ------------------------------------------------------------------------------


def test_it_counts_the_runs_that_took_each_branch_and_how_often(
    web: Client, history: list[Run]
) -> None:
    assert [run.status for run in history] == [
        "succeeded",
        "succeeded",
        "succeeded",
        "succeeded",
        "ended",
    ]

    data = overlay(web)

    assert data["version"]["number"] == 1
    assert data["last"] == 50
    assert counts(data) == {
        ("write", "great"): (3, 3),
        ("write", "too_short"): (2, 3),
        ("write", "to_review"): (1, 1),
        ("write", "broken"): (1, 1),
        ("review", "approved"): (1, 1),
    }
    assert counts(data) == taken_in_database(history)
    assert visits(data) == {"write": 5, "review": 1}


def test_it_lists_the_runs_that_took_a_branch_newest_first_with_links_to_their_monitors(
    web: Client, history: list[Run]
) -> None:
    data = overlay(web)

    great = next(b for b in data["branches"] if b["branch"] == "great")
    assert great["run_ids"] == [history[3].pk, history[2].pk, history[0].pk]
    assert [run["id"] for run in data["runs"]] == [run.pk for run in reversed(history)]
    newest = data["runs"][0]
    assert newest["url"] == f"/runs/{history[4].pk}/"
    assert newest["status"] == "ended"
    assert newest["status_label"] == "Ended"
    assert newest["created_at"].startswith(str(history[4].created_at.date()))


def test_it_counts_only_the_last_n_runs(web: Client, history: list[Run]) -> None:
    data = overlay(web, last=2)

    assert [run["id"] for run in data["runs"]] == [history[4].pk, history[3].pk]
    assert counts(data) == {
        ("write", "too_short"): (1, 2),
        ("write", "great"): (1, 1),
        ("write", "broken"): (1, 1),
    }
    assert counts(data) == taken_in_database(history[3:])
    assert visits(data) == {"write": 2}


def test_it_lists_at_most_the_newest_twenty_runs_of_a_branch(
    web: Client, author: Any, published: Recipe
) -> None:
    first = start(author, published)
    # Copies of a finished run: the runs list what was stored, however it got there.
    for _ in range(RUNS_LISTED):
        copy_run(first)

    data = overlay(web)

    great = next(b for b in data["branches"] if b["branch"] == "great")
    assert great["runs"] == RUNS_LISTED + 1
    assert len(great["run_ids"]) == RUNS_LISTED
    assert first.pk not in great["run_ids"]


def copy_run(run: Run) -> Run:
    steps = list(StepRun.objects.filter(run=run).prefetch_related("evaluations"))
    copy = Run.objects.create(
        recipe=run.recipe,
        version=run.version,
        created_by=run.created_by,
        status=run.status,
        outcome=run.outcome,
        inputs=run.inputs,
    )
    for step in steps:
        evaluations = list(step.evaluations.all())
        step.pk = None
        step.run = copy
        step.save()
        for evaluation in evaluations:
            evaluation.pk = None
            evaluation.step_run = step
            evaluation.save()
    return copy


def test_a_version_without_runs_counts_nothing(web: Client, published: Recipe) -> None:
    data = overlay(web, version=1)

    assert data["version"]["number"] == 1
    assert data["runs"] == data["steps"] == data["branches"] == []


def test_a_recipe_without_published_versions_has_nothing_to_show(
    web: Client, story: Recipe
) -> None:
    data = overlay(web)

    assert data["versions"] == []
    assert data["version"] is None
    assert data["runs"] == data["branches"] == []


# -- versions --------------------------------------------------------------------------------


def test_it_opens_on_the_latest_version_that_has_runs_and_offers_every_published_one(
    web: Client, author: Any, history: list[Run], published: Recipe
) -> None:
    recipe_publish(recipe=published, user=author)

    data = overlay(web)

    assert data["version"]["number"] == 1
    assert data["versions"] == [
        {"number": 2, "label": "v2", "has_runs": False},
        {"number": 1, "label": "v1", "has_runs": True},
    ]
    assert overlay(web, version=2)["runs"] == []


def test_the_draft_snapshots_of_test_runs_are_neither_offered_nor_counted(
    web: Client, author: Any, history: list[Run], published: Recipe
) -> None:
    snapshot = recipe_draft_snapshot(recipe=published, user=author)
    test_run = run_start(
        user=author, recipe=published, inputs={"topic": "owls"}, script=None, snapshot=snapshot
    )
    run_until_it_rests(test_run)

    data = overlay(web)

    assert [v["number"] for v in data["versions"]] == [1]
    assert test_run.pk not in [run["id"] for run in data["runs"]]
    assert counts(data)[("write", "great")] == (3, 3)
    assert web.get(URL, {"version": 0}).status_code == 404


def test_it_names_the_steps_and_branches_of_the_version_counted(
    web: Client, author: Any, story: Recipe
) -> None:
    document = story_document()
    document["steps"][0]["branches"][2]["name"] = "excellent"
    recipe_import(user=author, data=document, replace=True)
    recipe_publish(recipe=story, user=author)

    data = overlay(web, version=1)

    assert data["version"]["label"] == "v1"
    assert data["version"]["graph"] == [
        {"step": "write", "branches": ["too_short", "broken", "excellent", "to_review"]},
        {"step": "review", "branches": ["approved", "rejected", "revise"]},
    ]


# -- who may ask -----------------------------------------------------------------------------


def test_it_needs_a_login(story: Recipe) -> None:
    response = Client().get(URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_another_users_recipe_does_not_exist(stranger_web: Client, history: list[Run]) -> None:
    response = stranger_web.get(URL)

    assert response.status_code == 404
    assert response.json() == {"errors": ["No recipe 'story'."]}


def test_a_user_the_recipe_is_shared_with_sees_its_runs(
    history: list[Run], published: Recipe
) -> None:
    friend = UserFactory(username="fran")
    published.shared_with_users.add(friend)

    data = overlay(client_for(friend))

    assert len(data["runs"]) == len(history)


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "status", "error"),
    [
        ({"last": "0"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "101"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "-5"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "fifty"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "2.5"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "²"}, 400, "last: a whole number from 1 to 100"),
        ({"last": "9" * 5000}, 400, "last: a whole number from 1 to 100"),
        ({"version": "v1"}, 400, "version: a version number, e.g. 3"),
        ({"version": "-1"}, 400, "version: a version number, e.g. 3"),
        ({"version": "1e3"}, 400, "version: a version number, e.g. 3"),
        ({"version": "9" * 5000}, 400, "version: a version number, e.g. 3"),
        ({"version": "9" * 18}, 404, "version: 'story' has no published version " + "9" * 18),
        ({"version": "7"}, 404, "version: 'story' has no published version 7"),
        ({"version": "0"}, 404, "version: 'story' has no published version 0"),
    ],
)
def test_it_refuses_what_it_cannot_draw_with_the_reason(
    history: list[Run], author: Any, params: dict[str, str], status: int, error: str
) -> None:
    web = Client(raise_request_exception=False)
    web.force_login(author)

    response = web.get(URL, params)

    assert response.status_code == status
    assert response.json() == {"errors": [error]}


def test_it_answers_get_only(web: Client, published: Recipe) -> None:
    assert web.post(URL).status_code == 405


# -- cost ------------------------------------------------------------------------------------


def test_it_reads_the_same_few_queries_however_many_runs_there_are(
    web: Client, author: Any, published: Recipe
) -> None:
    start(author, published)
    with CaptureQueriesContext(connection) as few:
        overlay(web)
    for script in ({"judge": ["3"], "editors": ["approve"]}, {"writer": [SHORT]}, {}):
        start(author, published, **script)
        start(author, published, **script)
    with CaptureQueriesContext(connection) as many:
        data = overlay(web)

    assert len(data["runs"]) == 7
    assert len(many.captured_queries) == len(few.captured_queries)
    assert len(many.captured_queries) <= 8, [q["sql"] for q in many.captured_queries]
