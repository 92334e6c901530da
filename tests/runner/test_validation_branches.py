"""Branches on how a validation loop ended, a loop without a fallback refused at import, and
a classify step whose classifier gives no readable answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import services
from runner.models import Run
from runner.status import Outcome, RunStatus
from tests.factories import ActorFactory
from tests.runner.conftest import wait_for
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db(transaction=True)

FALLBACK = "No good answer could be written."


def complete(name: str = "end", priority: int = 999) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "when": {"type": "default"},
        "action": "CONTINUE",
        "target": "@complete",
    }


def llm(key: str, prompt: str = "Say it.", **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "kind": "llm",
        "actor": "writer",
        "prompt": prompt,
        "branches": [complete()],
        **fields,
    }


def document(slug: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "actors": {"writer": "v-writer", "judge": "v-judge", "classifier": "v-classifier"},
        "steps": steps,
    }


def scores(points: int, feedback: str = "") -> str:
    keys = ("relevance", "helpfulness", "accuracy", "completeness")
    return json.dumps({**dict.fromkeys(keys, points), "feedback": feedback})


@pytest.fixture
def scripted(db: None) -> None:
    for name in ("v-writer", "v-judge", "v-classifier"):
        ActorFactory(name=name, config={"replies": ["unused"]})


def publish(owner: Any, doc: dict[str, Any]) -> Recipe:
    recipe = recipe_import(user=owner, data=doc).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def validated(**validation: Any) -> dict[str, Any]:
    settings = {"threshold": 0.75, "max_attempts": 2, "judge": "judge", **validation}
    return llm("answer", "Explain owls.", validation=settings)


@pytest.fixture
def unsure_recipe(owner: Any, scripted: None) -> Recipe:
    answer = validated(fallback=FALLBACK)
    answer["branches"] = [
        {
            "name": "unsure",
            "priority": 1,
            "when": {"type": "fallback_used", "operator": "equals", "value": True},
            "action": "CONTINUE",
            "target": "apologise",
        },
        {
            "name": "confident",
            "priority": 2,
            "when": {"type": "confidence", "operator": "greater_equal", "value": 0.75},
            "action": "QUALITY_APPROVED",
            "target": "@complete",
        },
    ]
    return publish(owner, document("unsure", [answer, llm("apologise", "Say sorry.")]))


def taken(run: Run, step_key: str) -> list[tuple[str, bool, bool, str]]:
    step = run.steps.get(step_key=step_key)
    return [(e.branch, e.matched, e.taken, e.reason) for e in step.evaluations.order_by("priority")]


def test_a_branch_on_fallback_used_takes_the_run_on_when_the_loop_ends_below_threshold(
    worker: Any, owner: Any, unsure_recipe: Recipe
) -> None:
    script = {"writer": ["meh", "still meh", "Sorry for that."], "judge": [scores(2)]}
    run = services.run_start(user=owner, recipe=unsure_recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)

    assert run.status == RunStatus.SUCCEEDED, run.error
    keys = list(run.steps.order_by("seq").values_list("step_key", flat=True))
    assert keys == ["answer", "apologise"]
    assert run.steps.get(step_key="answer").response == FALLBACK
    [(branch, matched, was_taken, reason)] = taken(run, "answer")
    assert (branch, matched, was_taken) == ("unsure", True, True)
    assert reason.startswith("fallback used: confidence 0.")
    assert reason.endswith(" < 0.75 after 2 attempts")


def test_the_confidence_branch_reads_a_loop_that_passed(
    worker: Any, owner: Any, unsure_recipe: Recipe
) -> None:
    script = {"writer": ["Owls are nocturnal raptors with silent flight."], "judge": [scores(24)]}
    run = services.run_start(user=owner, recipe=unsure_recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert list(run.steps.values_list("step_key", flat=True)) == ["answer"]
    unsure, confident = taken(run, "answer")
    assert unsure[:3] == ("unsure", False, False)
    assert unsure[3].startswith("fallback not used: confidence 0.")
    assert confident[:3] == ("confident", True, True)
    assert confident[3].startswith("confidence 0.") and " >= 0.75" in confident[3]


def test_a_loop_that_can_end_below_its_threshold_is_refused_without_a_fallback(
    owner: Any, scripted: None
) -> None:
    doc = document("no-fallback", [llm("plan"), validated()])
    with pytest.raises(RecipeRejected) as refused:
        recipe_import(user=owner, data=doc)
    assert refused.value.errors == [
        "steps[1].validation.fallback: required: the loop can end below its threshold 0.75, "
        "and the answer would then be empty"
    ]
    assert not Recipe.objects.filter(slug="no-fallback").exists()


def test_the_import_api_refuses_it_with_the_path(client: Any, owner: Any, scripted: None) -> None:
    client.force_login(owner)
    doc = document("no-fallback", [validated(fallback="  ")])
    response = client.post("/api/recipes/import", doc, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "steps[0].validation.fallback: required: the loop can end below its threshold 0.75, "
        "and the answer would then be empty"
    ]


def triage(*branches: dict[str, Any]) -> dict[str, Any]:
    return document(
        "triage",
        [
            {
                "key": "triage",
                "name": "Triage",
                "kind": "classify",
                "actor": "classifier",
                "prompt": "Where is my invoice?",
                "routes": [{"name": "billing", "instructions": "Invoices and payments."}],
                "branches": list(branches),
            },
            llm("pay", "Pay."),
            llm("apologise", "Say sorry."),
        ],
    )


ON_BILLING = {
    "name": "on_billing",
    "priority": 2,
    "when": {"type": "route_selected", "operator": "includes", "value": "billing"},
    "action": "CONTINUE",
    "target": "pay",
}
OTHERWISE = {**complete("otherwise"), "target": "pay"}
UNCLASSIFIED = {
    "name": "unclassified",
    "priority": 1,
    "when": {"type": "classification_failed", "operator": "equals", "value": True},
    "action": "CONTINUE",
    "target": "apologise",
}
ON_ERROR = {
    "name": "on_error",
    "priority": 1,
    "when": {"type": "execution_error", "operator": "equals", "value": True},
    "action": "ERROR_HANDLER",
    "target": "apologise",
}
UNREADABLE = {"classifier": ["perhaps"]}


CLASSIFIED = {
    **UNCLASSIFIED,
    "name": "classified",
    "when": {**UNCLASSIFIED["when"], "value": False},
}


@pytest.mark.parametrize(
    "branches",
    [(ON_BILLING, OTHERWISE), (CLASSIFIED, ON_BILLING, OTHERWISE)],
    ids=["no-branch-reads-it", "a-branch-reads-it-but-does-not-hold"],
)
def test_a_classifier_with_no_readable_answer_fails_a_step_without_a_branch_for_it(
    worker: Any, owner: Any, scripted: None, branches: tuple[dict[str, Any], ...]
) -> None:
    recipe = publish(owner, triage(*branches))
    run = services.run_start(user=owner, recipe=recipe, inputs={}, script=UNREADABLE)
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)

    # Before, the default branch ran on a selection nobody knew.
    assert run.status == RunStatus.FAILED
    assert run.error.startswith(
        "step 'triage' failed: classification failed: billing: not selected, no readable "
        "answer in 3 tries: "
    )
    assert list(run.steps.values_list("step_key", flat=True)) == ["triage"]
    assert run.steps.get().details["classification_failure"].startswith("billing: ")


@pytest.mark.parametrize(
    ("branch", "outcome"),
    [(UNCLASSIFIED, Outcome.COMPLETED), (ON_ERROR, Outcome.ERROR_HANDLED)],
    ids=["cf", "error"],
)
def test_a_branch_for_the_failure_or_the_error_branch_takes_the_run_on(
    worker: Any, owner: Any, scripted: None, branch: dict[str, Any], outcome: str
) -> None:
    recipe = publish(owner, triage(branch, ON_BILLING, OTHERWISE))
    run = services.run_start(user=owner, recipe=recipe, inputs={}, script=UNREADABLE)
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)

    assert run.status == RunStatus.SUCCEEDED, run.error
    keys = list(run.steps.order_by("seq").values_list("step_key", flat=True))
    assert keys == ["triage", "apologise"]
    first = taken(run, "triage")[0]
    assert first[:3] == (branch["name"], True, True)
    assert run.outcome == outcome


def test_a_readable_classifier_passes_the_failure_branch_by(
    worker: Any, owner: Any, scripted: None
) -> None:
    recipe = publish(owner, triage(UNCLASSIFIED, ON_BILLING, OTHERWISE))
    script = {"classifier": ['{"selected": true, "reason": "an invoice"}']}
    run = services.run_start(user=owner, recipe=recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED)

    assert run.status == RunStatus.SUCCEEDED, run.error
    keys = list(run.steps.order_by("seq").values_list("step_key", flat=True))
    assert keys == ["triage", "pay"]
    assert taken(run, "triage")[0] == (
        "unclassified",
        False,
        False,
        "classification did not fail",
    )
