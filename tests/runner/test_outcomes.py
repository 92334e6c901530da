"""Each attempt's outcome comes from the branch taken after it, and the actor statistics (what
a retry with another actor learns from) count successes from those outcomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import services
from runner.models import Run, StepRun
from runner.status import RunStatus
from runner.steps.actor_stats import actor_stat_rows
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.demo import recipe_files
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe

pytestmark = pytest.mark.django_db

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}


def document(slug: str, steps: list[dict[str, Any]], actors: dict[str, str]) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "actors": actors,
        "steps": steps,
    }


def llm(key: str, actor: str, *branches: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": key,
        "name": key,
        "kind": "llm",
        "actor": actor,
        "prompt": "Go",
        "branches": [*branches],
    }


@pytest.fixture
def three(db: None) -> None:
    for name in ("k-a", "k-b", "k-c"):
        ActorFactory(name=name, config={"replies": ["unused"]})


def stats(recipe: Recipe) -> dict[str, tuple[int, int, int]]:
    """Per alias: (attempts, successes, failures) of the recipe's LLM steps."""
    rows = actor_stat_rows(run__recipe_id=recipe.pk)
    return {r["actor_alias"]: (r["attempts"], r["successes"], r["failures"]) for r in rows}


def test_a_retry_tries_each_actor_once_until_one_answers_right(owner: Any, three: None) -> None:
    retry = branch("wrong", 1, WRONG, "@repeat", action="RETRY_WITH_DIFFERENT_ACTOR")
    retry["params"] = {"max_retries": 5}
    recipe = publish_document(
        owner,
        document(
            "three-actors",
            [llm("solve", "a", retry, branch("done", 2, DEFAULT, "@complete"))],
            {"a": "k-a", "b": "k-b", "c": "k-c"},
        ),
    )
    script = {"a": ["wrong from a"], "b": ["wrong from b"], "c": ["right from c"]}

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))

    assert run.status == RunStatus.SUCCEEDED
    trail = run.steps.order_by("seq").values_list("actor_alias", "response", "outcome")
    assert list(trail) == [
        ("a", "wrong from a", "failure"),
        ("b", "wrong from b", "failure"),
        ("c", "right from c", "neutral"),
    ]
    assert run.state["tried_actors"] == {"solve": ["a", "b"]}
    # c's answer went on (neutral) in a run that completed: a success.
    assert stats(recipe) == {"a": (1, 0, 1), "b": (1, 0, 1), "c": (1, 1, 0)}


def test_an_answer_that_went_on_counts_as_a_failure_when_the_run_then_fails(
    owner: Any, three: None
) -> None:
    recipe = publish_document(
        owner,
        document(
            "fails-later",
            [
                llm("draft", "a", branch("on", 1, DEFAULT, "check")),
                llm("check", "b", branch("done", 1, DEFAULT, "@complete")),
            ],
            {"a": "k-a", "b": "k-b"},
        ),
    )
    script = {"a": ["a draft"], "b": ["@error: the checker is down"]}

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))

    assert run.status == RunStatus.FAILED
    assert run.steps.get(step_key="draft").outcome == "neutral"
    # The draft went on (neutral) in a run that failed: it counts against its actor.
    assert stats(recipe)["a"] == (1, 0, 1)


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"action": "QUALITY_APPROVED"}, "success"),
        ({"action": "CONTINUE"}, "neutral"),
        ({"action": "CONTINUE", "counts_as": "failure"}, "failure"),
        ({"action": "QUALITY_APPROVED", "counts_as": "neutral"}, "neutral"),
    ],
)
def test_the_branch_taken_gives_the_attempts_outcome(
    owner: Any, three: None, fields: dict[str, Any], outcome: str
) -> None:
    recipe = publish_document(
        owner,
        document(
            "one-branch",
            [llm("solve", "a", branch("only", 1, DEFAULT, "@complete", **fields))],
            {"a": "k-a"},
        ),
    )
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script={"a": ["x"]}))

    assert run.steps.get().outcome == outcome


def test_an_actor_whose_every_answer_is_rejected_shows_no_success(owner: Any, three: None) -> None:
    # The adaptive demo's situation: the coder always answers with code, which a branch
    # rejects; the model call never errs, yet not one of its answers is a success.
    rejected = branch(
        "code_not_data",
        1,
        {"type": "content_type", "operator": "is", "value": "code"},
        "@repeat",
        action="RETRY_WITH_DIFFERENT_ACTOR",
        params={"max_retries": 2},
    )
    recipe = publish_document(
        owner,
        document(
            "adaptive",
            [
                llm(
                    "deliver",
                    "coder",
                    rejected,
                    branch("delivered", 2, DEFAULT, "@complete", action="QUALITY_APPROVED"),
                )
            ],
            {"coder": "k-a", "mathematician": "k-b"},
        ),
    )
    code = "```python\ndef primes(n):\n    return [p for p in range(2, n)]\n```"
    script = {"coder": [code], "mathematician": ["2, 3, 5, 7, 11"]}
    for _ in range(4):
        run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))
        assert run.status == RunStatus.SUCCEEDED

    assert stats(recipe) == {"coder": (4, 0, 4), "mathematician": (4, 4, 0)}


def test_the_demo_coder_shows_no_success_after_four_dry_runs(owner: Any) -> None:
    for spec in DEMO_ACTORS:
        Actor.objects.create(**{**spec, "config": {**spec.get("config", {}), "delay_ms": 0}})
    path = next(p for p in recipe_files() if p.name == "first-1000-primes.json")
    recipe = publish_document(owner, json.loads(path.read_text()))
    for _ in range(4):
        run = drive(services.run_start(user=owner, recipe=recipe, inputs={}))
        assert run.status == RunStatus.SUCCEEDED

    learned = stats(recipe)
    # Whenever the learner tries the coder: code (a sharper prompt asked for), code again
    # (retried with another actor). Not one of those answers counts as a success.
    attempts, successes, failures = learned["coder"]
    assert attempts > 0 and (successes, failures) == (0, attempts)
    # The mathematician's list went on to be approved in every run.
    assert learned["mathematician"] == (4, 4, 0)


def test_rows_committed_before_outcomes_count_by_their_status(owner: Any, three: None) -> None:
    recipe = publish_document(
        owner,
        document(
            "legacy", [llm("solve", "a", branch("done", 1, DEFAULT, "@complete"))], {"a": "k-a"}
        ),
    )
    earlier = Run.objects.create(
        recipe=recipe, version=recipe.versions.get(), created_by=owner, status=RunStatus.SUCCEEDED
    )
    StepRun.objects.bulk_create(
        StepRun(
            run=earlier,
            seq=seq,
            step_key="solve",
            step_name="Solve",
            kind="llm",
            actor_alias="a",
            status=status,
            latency_ms=10,
        )
        for seq, status in enumerate(["succeeded", "succeeded", "failed"], start=1)
    )

    assert stats(recipe) == {"a": (3, 2, 1)}


def test_each_attempts_outcome_is_in_the_api_and_on_the_monitor(
    owner: Any, three: None, client: Any
) -> None:
    retry = branch("wrong", 1, WRONG, "@repeat", action="RETRY_WITH_DIFFERENT_ACTOR")
    recipe = publish_document(
        owner,
        document(
            "outcomes-shown",
            [llm("solve", "a", retry, branch("done", 2, DEFAULT, "@complete"))],
            {"a": "k-a", "b": "k-b"},
        ),
    )
    script = {"a": ["wrong from a"], "b": ["right from b"]}
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))
    client.force_login(owner)

    steps = client.get(f"/api/runs/{run.pk}/").json()["steps"]
    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert [(s["actor"], s["outcome"]) for s in steps] == [("a", "failure"), ("b", "neutral")]
    assert page.count("<dt>Counted as</dt>") == 2
    assert ">failure</dd>" in page
