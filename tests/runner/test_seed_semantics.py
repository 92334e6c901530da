"""The reference seeds' semantics through real runs: the outcome an approval sets whatever the
target, the seed's `ai_evaluation` keys, and a ledger that matches the run."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import ModelCall, Run, RunEvent
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.conftest import wait_for
from tests.runner.recipes import DEFAULT, branch, publish_document
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

JUDGED = {
    "type": "ai_evaluation",
    "operator": "greater_equal",
    "value": 8,
    "evaluator_actor": "judge",
    "eval_prompt": "Rate story quality 1-10",
}


def recipe(owner: Any, branches: list[dict[str, Any]]) -> Recipe:
    ActorFactory(name="seed-writer", config={"replies": ["A story."]})
    ActorFactory(name="seed-judge", config={"replies": ["9"]})
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "seed-semantics",
            "name": "Seed semantics",
            "inputs": {},
            "actors": {"writer": "seed-writer", "judge": "seed-judge"},
            "steps": [
                {
                    "key": "write",
                    "name": "Write",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Write a story.",
                    "branches": branches,
                },
                {"key": "revise", "name": "Revise", "actor": "writer", "prompt": "Revise it."},
            ],
        },
    )


def start(recipe: Recipe, owner: Any, script: dict[str, Any]) -> Run:
    return services.run_start(user=owner, recipe=recipe, inputs={}, script=script)


def test_an_approval_that_ends_the_run_keeps_its_outcome_and_the_named_judge_grades(
    worker: Any, owner: Any
) -> None:
    approved = branch("great", 1, JUDGED, "@end", action="QUALITY_APPROVED")
    run = start(recipe(owner, [approved]), owner, {"writer": ["A story."], "judge": ["9"]})
    run = wait_for(run, RunStatus.ENDED, RunStatus.SUCCEEDED, RunStatus.FAILED)

    assert (run.status, run.outcome) == (RunStatus.ENDED, "approved")
    calls = list(ModelCall.objects.filter(run=run).values_list("actor_alias", flat=True))
    assert sorted(calls) == ["judge", "writer"]
    [evaluation] = run.steps.get().evaluations.all()
    assert (evaluation.branch, evaluation.taken, evaluation.reason) == (
        "great",
        True,
        "judge scored 9 >= 8",
    )


def test_a_failed_step_with_no_error_branch_records_no_branch_as_taken(
    worker: Any, owner: Any
) -> None:
    onward = branch("onward", 99, DEFAULT, "revise")
    run = start(recipe(owner, [onward]), owner, {"writer": ["@error: the model is down"]})
    run = wait_for(run, RunStatus.FAILED, RunStatus.SUCCEEDED)

    assert (run.status, run.outcome) == (RunStatus.FAILED, "failed")
    assert list(run.steps.values_list("step_key", flat=True)) == ["write"]
    [evaluation] = run.steps.get().evaluations.all()
    assert (evaluation.matched, evaluation.taken) == (True, False)
    events = RunEvent.objects.filter(run=run)
    evaluated = [e.data for e in events.filter(type="branch.evaluated")]
    assert [e["taken"] for e in evaluated] == [False]
    [followed] = [e.data for e in events.filter(type="branch.taken")]
    assert (followed["branch"], followed["kind"]) == (None, "fail")
