"""Intent steps and criteria_met branches, run end to end with scripted actors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import services
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.conftest import wait_for
from tests.runner.recipes import publish_document
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

INTENT = {
    "intent": "Explain what an owl eats",
    "output_type": "a short paragraph",
    "success_criteria": ["names mice as prey", "mentions <b>insects</b>"],
}


def verdicts(*met: tuple[bool, str]) -> str:
    items = [{"n": n, "met": yes, "why": why} for n, (yes, why) in enumerate(met, 1)]
    return f"Score: {sum(yes for yes, _ in met)}\n" + json.dumps({"criteria": items})


@pytest.fixture
def recipe(owner: Any, db: None) -> Recipe:
    for name in ("i-analyst", "i-writer", "i-judge"):
        ActorFactory(name=name, config={"replies": ["unused"]})
    understand = {
        "key": "understand",
        "name": "Understand",
        "kind": "intent",
        "actor": "analyst",
        "prompt": "{request}",
        "max_attempts": 2,
        "branches": [],
    }
    answer = {
        "key": "answer",
        "name": "Answer",
        "actor": "writer",
        "prompt": "Answer {request}. Meet: {steps.understand.response}",
        "branches": [
            {
                "name": "all_met",
                "priority": 1,
                "when": {
                    "type": "criteria_met",
                    "operator": "all",
                    "intent_step": "understand",
                    "evaluator": "judge",
                },
                "action": "QUALITY_APPROVED",
                "target": "@complete",
            },
            {
                "name": "half_met",
                "priority": 2,
                "when": {
                    "type": "criteria_met",
                    "operator": "at_least",
                    "value": 0.5,
                    "intent_step": "understand",
                    "evaluator": "judge",
                },
                "action": "CONTINUE",
                "target": "polish",
            },
        ],
    }
    polish = {"key": "polish", "name": "Polish", "actor": "writer", "prompt": "Polish it."}
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "intent-owls",
            "name": "Intent owls",
            "inputs": {"request": {"type": "string", "required": True}},
            "actors": {"analyst": "i-analyst", "writer": "i-writer", "judge": "i-judge"},
            "steps": [understand, answer, polish],
        },
    )


def test_a_criteria_met_branch_is_taken_with_a_reason_per_criterion(
    worker: Any, owner: Any, recipe: Recipe, client: Any
) -> None:
    script = {
        "analyst": ["Sure! " + "```json\n" + json.dumps(INTENT) + "\n```"],
        "writer": ["Owls eat mice.", "Owls eat mice and beetles."],
        "judge": [verdicts((True, "mice named"), (False, "no insects"))],
    }
    run = services.run_start(
        user=owner, recipe=recipe, inputs={"request": "What do owls eat?"}, script=script
    )
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.SUCCEEDED, run.error

    steps = {s.step_key: s for s in run.steps.order_by("seq")}
    assert list(steps) == ["understand", "answer", "polish"]
    understand = steps["understand"]
    read = {**INTENT, "expected_format": "", "quality_requirements": {}}
    assert json.loads(understand.response) == read
    assert understand.details["intent"] == {**read, "trace": ["attempt 1: read, 2 criteria"]}
    # Later templates read the normalised JSON.
    assert json.dumps(read, ensure_ascii=False) in steps["answer"].prompt

    client.force_login(owner)
    api = client.get(f"/api/runs/{run.pk}/").json()
    [answer] = [s for s in api["steps"] if s["step"] == "answer"]
    assert [(e["branch"], e["matched"], e["taken"]) for e in answer["evaluations"]] == [
        ("all_met", False, False),
        ("half_met", True, True),
    ]
    reason = (
        "1/2 criteria met (needs {}): 1. 'names mice as prey' met (mice named); "
        "2. 'mentions <b>insects</b>' not met (no insects)"
    )
    assert answer["evaluations"][0]["reason"] == reason.format("all")
    assert answer["evaluations"][1]["reason"] == reason.format("at least 0.5 of them")
    # The judge was asked once for both branches.
    assert run.modelcall_set.filter(purpose="evaluation").count() == 1

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Explain what an owl eats" in page
    assert "<li>mentions &lt;b&gt;insects&lt;/b&gt;</li>" in page
    assert "<b>insects</b>" not in page


def test_an_intent_step_asks_again_then_fails_with_the_problem(
    worker: Any, owner: Any, recipe: Recipe
) -> None:
    script = {
        "analyst": ["I think they want owls.", json.dumps({**INTENT, "success_criteria": []})]
    }
    run = services.run_start(
        user=owner, recipe=recipe, inputs={"request": "What do owls eat?"}, script=script
    )
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert run.status == RunStatus.FAILED
    [understand] = run.steps.all()
    assert understand.error == (
        'intent analysis failed: no readable intent in 2 attempt(s): "success_criteria" is '
        "empty: give at least one criterion"
    )
    assert understand.details["intent"]["trace"] == [
        "attempt 1: unreadable: the answer holds no JSON object: 'I think they want owls.'",
        'attempt 2: unreadable: "success_criteria" is empty: give at least one criterion',
    ]
    assert run.modelcall_set.filter(purpose="answer").count() == 2
