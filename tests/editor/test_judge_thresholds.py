"""Suggested judge thresholds from the runs' later verdicts, on the stats page and the branch
form; nothing is suggested with fewer than MIN_RUNS runs, and nothing is changed unasked."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from runner.judge_thresholds import branch_advice, observations
from runner.models import BranchEvaluation, HumanTask, Run, StepRun
from runner.status import RunStatus, StepStatus, TaskStatus
from tests.editor.conftest import draft, htmx_post
from workflows.adapters import document_from_recipe
from workflows.engine.thresholds import MIN_RUNS, Observation
from workflows.models import Recipe
from workflows.services import recipe_update

pytestmark = pytest.mark.django_db

# The story's judge branch: step 0 `write`, branch 2 `great` (score >= 8 completes the run).
STEP, BRANCH, BRANCH_INDEX = "write", "great", 2


def judged_run(
    recipe: Recipe,
    user: Any,
    score: float,
    *,
    status: str,
    decision: str = "",
    script: dict[str, Any] | None = None,
) -> Run:
    """A run whose judge scored the story `score`, then (with `decision`) was reviewed."""
    run = Run.objects.create(
        recipe=recipe,
        version=recipe.latest_version,
        created_by=user,
        status=status,
        script=script,
    )
    write = StepRun.objects.create(
        run=run, seq=1, step_key=STEP, step_name="Write", kind="llm", status=StepStatus.SUCCEEDED
    )
    great = score >= 8
    BranchEvaluation.objects.create(
        step_run=write,
        order=3,
        branch=BRANCH,
        priority=3,
        matched=great,
        taken=great,
        reason=f"judge scored {score:g} >= 8" if great else f"judge scored {score:g}, needs >= 8",
    )
    if decision:
        review = StepRun.objects.create(
            run=run, seq=2, step_key="review", step_name="Review", kind="human", status="decided"
        )
        HumanTask.objects.create(
            run=run,
            step_run=review,
            step_key="review",
            group=Group.objects.get(name="editor-reviewers"),
            question="Is this story good?",
            options=["approve", "reject", "revise"],
            status=TaskStatus.DECIDED,
            decision=decision,
        )
    return run


@pytest.fixture
def judged(published: Recipe, author: Any) -> Recipe:
    """Ten real runs: the judge's 8s and 9s succeeded; reviewers approved its 6s and 7s."""
    for score in (9, 9, 8):
        judged_run(published, author, score, status=RunStatus.SUCCEEDED)
    for score in (7, 7, 6):
        judged_run(published, author, score, status=RunStatus.SUCCEEDED, decision="approve")
    for score in (5, 5, 3):
        judged_run(published, author, score, status=RunStatus.ENDED, decision="reject")
    judged_run(published, author, 4, status=RunStatus.FAILED)
    # No verdict: ended by the writer's error, cancelled, or a dry run (scripted): not counted.
    judged_run(published, author, 2, status=RunStatus.ENDED)
    judged_run(published, author, 2, status=RunStatus.CANCELLED)
    judged_run(published, author, 9, status=RunStatus.FAILED, script={"judge": ["9"]})
    return published


def test_observations_take_the_reviewers_verdict_else_the_runs_outcome(
    judged: Recipe, author: Any
) -> None:
    seen = observations(user=author, recipe=judged, step=STEP, branch=BRANCH)

    assert sorted(seen, key=lambda o: (o.score, o.good)) == [
        Observation(3, False),
        Observation(4, False),
        Observation(5, False),
        Observation(5, False),
        Observation(6, True),
        Observation(7, True),
        Observation(7, True),
        Observation(8, True),
        Observation(9, True),
        Observation(9, True),
    ]


def test_only_the_runs_the_user_may_see_count(judged: Recipe, stranger: Any) -> None:
    assert observations(user=stranger, recipe=judged, step=STEP, branch=BRANCH) == []


def test_the_stats_page_shows_the_suggestion_with_its_evidence(
    web: Client, judged: Recipe, author: Any
) -> None:
    response = web.get(f"/recipes/{judged.slug}/stats/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Judge thresholds" in html
    assert "<code>write</code> · <code>great</code>" in html
    assert "<td>10</td>" in html
    assert "<td>7 of 10 (70%)</td>" in html
    assert "<td><strong>6</strong></td>" in html
    assert "<td>10 of 10 (100%)</td>" in html
    # A suggestion only: the draft keeps its threshold.
    judged.refresh_from_db()
    assert document_from_recipe(judged)["steps"][0]["branches"][BRANCH_INDEX]["when"]["value"] == 8


def test_the_branch_form_offers_the_suggestion_to_fill_in(web: Client, judged: Recipe) -> None:
    response = htmx_post(
        web,
        reverse("recipe-branch-panel", args=[judged.slug]),
        draft(judged),
        step=0,
        branch=BRANCH_INDEX,
        element="b-1",
    )

    page = response.content.decode()
    assert "Suggested threshold: <strong>6</strong>" in page
    assert "agreed with 10 of the later verdicts (100%)" in page
    assert "the threshold now (8) with 7 (70%)" in page
    assert 'data-fill-field="c-value" data-fill-value="6"' in page
    assert 'name="c-value"' in page


def test_names_are_escaped_on_both_pages(web: Client, judged: Recipe, author: Any) -> None:
    document = document_from_recipe(judged)
    document["steps"][0]["branches"][BRANCH_INDEX]["name"] = "great<b>"
    BranchEvaluation.objects.filter(branch=BRANCH).update(branch="great<b>")
    recipe_update(recipe=judged, document=document)

    html = web.get(f"/recipes/{judged.slug}/stats/").content.decode()
    assert "<code>great&lt;b&gt;</code>" in html
    assert "great<b>" not in html
    advice = branch_advice(user=author, recipe=judged, document=document)
    assert [a.advice.suggested for a in advice if a.advice] == [6.0]


def test_with_too_little_evidence_nothing_is_suggested(
    web: Client, published: Recipe, author: Any
) -> None:
    for score in (9, 9, 8, 7, 7, 6, 5, 5, 3)[: MIN_RUNS - 1]:
        judged_run(published, author, score, status=RunStatus.SUCCEEDED)

    html = web.get(f"/recipes/{published.slug}/stats/").content.decode()
    assert "too few runs with a verdict to suggest a threshold" in html
    assert "<strong>" not in html.split('id="judge-thresholds"')[1].split("</section>")[0]

    page = htmx_post(
        web,
        reverse("recipe-branch-panel", args=[published.slug]),
        draft(published),
        step=0,
        branch=BRANCH_INDEX,
        element="b-1",
    ).content.decode()
    assert "Too few runs with a later verdict" in page
    assert f"{MIN_RUNS} are needed" in page
    assert "data-fill-field" not in page


def test_a_branch_that_is_no_judge_shows_no_advice(web: Client, judged: Recipe) -> None:
    page = htmx_post(
        web,
        reverse("recipe-branch-panel", args=[judged.slug]),
        draft(judged),
        step=0,
        branch=0,
        element="b-1",
    ).content.decode()

    assert "judge-advice" not in page
