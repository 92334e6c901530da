"""Transform steps through real runs on the Celery worker: facts computed with JMESPath from
the facts, the inputs and earlier answers (JSON or text), branches reading the results, and
an expression that fails at run time failing its step with the expression's path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.models import Run
from runner.status import RunStatus, StepStatus
from tests.factories import ActorFactory
from tests.runner.conftest import wait_for
from tests.runner.recipes import DEFAULT, branch, publish_document, steps
from workflows.models import Recipe

# Settled: no worker is still writing a run when the test's database is flushed.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_settled")]

FAILED = {"type": "execution_error", "operator": "equals", "value": True}
MANY = {"type": "field_compare", "operator": "greater_equal", "field": "count", "value": 3}
OWLS = {"owls": [{"name": "barn", "weight": 0.5}, {"name": "snowy", "weight": 2}]}


def llm(key: str, prompt: str, *branches: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "name": key.title(), "actor": "writer", "prompt": prompt,
            "branches": list(branches)}  # fmt: skip


def transform(key: str, expressions: dict[str, str], *branches: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "name": key.title(), "kind": "transform", "set": expressions,
            "branches": list(branches)}  # fmt: skip


def publish(owner: Any, slug: str, *steps_: dict[str, Any]) -> Recipe:
    ActorFactory(name=f"{slug}-writer", config={"replies": ["unused"]})
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": slug,
            "name": slug,
            "inputs": {"tags": {"type": "string", "required": True}},
            "actors": {"writer": f"{slug}-writer"},
            "steps": list(steps_),
        },
    )


def start(client: Any, owner: Any, recipe: Recipe, script: dict[str, Any]) -> Run:
    """Start a dry run through the API, as the editor's test run does; wait for its end."""
    client.force_login(owner)
    answer = client.post(
        f"/api/recipes/{recipe.slug}/runs",
        {"inputs": {"tags": "night,forest,silent"}, "script": script},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    return wait_for(run, RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ENDED)


def test_a_transform_computes_facts_from_answers_facts_and_inputs(
    worker: Any, owner: Any, client: Any
) -> None:
    recipe = publish(
        owner,
        "owl-facts",
        llm("list", "List owls as JSON."),
        llm("poem", "Write a line about {steps.list.response}."),
        transform(
            "tally",
            {
                "count": "length(steps.list.owls)",
                "heaviest": "max_by(steps.list.owls, &weight).name",
                "poem": "steps.poem",
                "missing": "no_such_fact",
                "tags": "tags",
                "asked": "inputs.tags",
            },
            branch("many", 1, MANY, "@complete", action="QUALITY_APPROVED"),
            branch("few", 999, DEFAULT, "summary"),
        ),
        transform("summary", {"line": "join(', ', [poem, heaviest])", "again": "count"}),
    )
    script = {"writer": ["```json\n" + json.dumps(OWLS) + "\n```", "Owls glide {quietly}."]}

    run = start(client, owner, recipe, script)

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "completed"), run.error
    done = steps(run)
    tally = json.loads(done["tally"].response)
    # A missing field is null to JMESPath; the input is a fact at the root, and in `inputs`.
    assert tally == {
        "count": 2,
        "heaviest": "snowy",
        "poem": "Owls glide {quietly}.",
        "missing": None,
        "tags": "night,forest,silent",
        "asked": "night,forest,silent",
    }
    assert done["tally"].prompt == json.dumps(recipe_step(recipe, "tally")["set"])
    assert done["tally"].evaluations.get(taken=True).branch == "few"
    # The second transform reads the first one's results as facts (the root of its view).
    assert json.loads(done["summary"].response) == {
        "line": "Owls glide {quietly}., snowy",
        "again": 2,
    }
    assert run.state["facts"]["line"] == "Owls glide {quietly}., snowy"
    assert run.modelcall_set.count() == 2  # the two llm steps' only: a transform calls none


def test_an_expression_that_fails_at_run_time_fails_its_step_naming_it(
    worker: Any, owner: Any, client: Any
) -> None:
    recipe = publish(
        owner,
        "owl-sums",
        llm("list", "List owls as JSON."),
        transform(
            "weigh",
            {"names": "owls[].name", "total": "sum(owls[].name)"},
            branch("broken", 1, FAILED, "explain", action="ERROR_HANDLER"),
        ),
        llm("explain", "Say what went wrong."),
    )

    run = start(client, owner, recipe, {"writer": [json.dumps(OWLS), "It broke."]})

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "error_handled"), run.error
    weigh = steps(run)["weigh"]
    assert weigh.status == StepStatus.FAILED
    assert weigh.error == (
        "steps[1].set.total: In function sum(), invalid type for value: barn, expected one "
        "of: ['array-number'], received: \"str\""
    )
    assert weigh.evaluations.get(taken=True).branch == "broken"


def test_a_result_json_cannot_hold_fails_the_step_and_without_an_error_branch_the_run(
    worker: Any, owner: Any, client: Any
) -> None:
    recipe = publish(
        owner,
        "owl-huge",
        llm("list", "List weights as JSON."),
        transform("weigh", {"total": "sum(weights)"}),
    )

    run = start(client, owner, recipe, {"writer": [json.dumps({"weights": [1e308, 1e308]})]})

    assert run.status == RunStatus.FAILED
    assert run.error == (
        "step 'weigh' failed: steps[1].set.total: the result holds NaN or Infinity, which "
        "JSON has not"
    )


def recipe_step(recipe: Recipe, key: str) -> dict[str, Any]:
    """Return a step of the recipe's published document."""
    version = recipe.versions.order_by("-number").first()
    assert version is not None
    return next(s for s in version.document["steps"] if s["key"] == key)
