"""A judge branch's settings written in its `params` as note 000 writes them, through a real
dry run: the named judge grades with the named prompt, and the recipe exports them once, as
`when` fields."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import ModelCall
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.adapters import document_from_recipe

pytestmark = pytest.mark.django_db

JUDGE = {"type": "ai_evaluation", "operator": "greater_equal", "value": "8"}
SEED_PARAMS = {
    "evaluator_actor": "critic",
    "eval_prompt": "Rate story quality 1-10",
    "threshold": 8,
}


def document() -> dict[str, Any]:
    approved = branch(
        "high_quality_story", 3, JUDGE, "@end", action="QUALITY_APPROVED", params=SEED_PARAMS
    )
    return {
        "format": "branchline.recipe/v1",
        "slug": "judge-params",
        "name": "Judge params",
        "inputs": {},
        "actors": {"writer": "jp-writer", "critic": "jp-critic"},
        "steps": [
            {
                "key": "write",
                "name": "Write",
                "actor": "writer",
                "prompt": "Write a story.",
                "branches": [approved, branch("onward", 999, DEFAULT, "revise")],
            },
            {"key": "revise", "name": "Revise", "actor": "writer", "prompt": "Revise it."},
        ],
    }


def test_the_judge_named_in_params_grades_with_its_prompt(owner: Any) -> None:
    ActorFactory(name="jp-writer", config={"replies": ["A story about a lighthouse."]})
    # The critic scores 9 only when asked with the seed's prompt (the default prompt: 2).
    rules = [{"match": "Rate story quality 1-10", "reply": "9"}, {"match": ".", "reply": "2"}]
    ActorFactory(name="jp-critic", config={"rules": rules})
    recipe = publish_document(owner, document())
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}))

    assert (run.status, run.outcome) == (RunStatus.ENDED, "approved")
    judged = ModelCall.objects.get(run=run, purpose=ModelCall.Purpose.EVALUATION)
    assert judged.actor_alias == "critic"
    evaluation = run.steps.get(step_key="write").evaluations.get(branch="high_quality_story")
    assert (evaluation.taken, evaluation.reason) == (True, "judge scored 9 >= 8")


def test_the_recipe_exports_the_judge_settings_once_as_when_fields(owner: Any) -> None:
    ActorFactory(name="jp-writer")
    ActorFactory(name="jp-critic")
    recipe = publish_document(owner, document())

    [approved, _] = document_from_recipe(recipe)["steps"][0]["branches"]
    assert approved["when"] == {**JUDGE, "evaluator": "critic", "prompt": "Rate story quality 1-10"}
    assert "params" not in approved
