"""The learner in real runs: a step whose actor is `@learned` (or that lists variants) is run
with the actor and prompt its evidence favours, every choice is stored with its reason, and a
retry with another actor never goes back to one that failed."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import Run, StepRun
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}
ACTORS = {"a": "k-a", "b": "k-b", "c": "k-c"}
SCRIPT = {"a": ["wrong from a"], "b": ["wrong from b"], "c": ["right from c"]}


@pytest.fixture
def three(db: None) -> None:
    for name in ACTORS.values():
        ActorFactory(name=name, config={"replies": ["unused"]})


def learned_recipe(
    owner: Any, slug: str = "learned", actors: dict[str, str] = ACTORS, **step: Any
) -> Recipe:
    retry = branch("wrong", 1, WRONG, "@repeat", action="RETRY_WITH_DIFFERENT_ACTOR")
    retry["params"] = {"max_retries": 5}
    approved = branch("right", 2, DEFAULT, "@complete", action="QUALITY_APPROVED")
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": slug,
            "name": slug,
            "actors": actors,
            "steps": [
                {
                    "key": "solve",
                    "name": "Solve",
                    "kind": "llm",
                    "actor": "@learned",
                    "prompt": "Solve it.",
                    "branches": [retry, approved],
                    **step,
                }
            ],
        },
    )


def run_once(owner: Any, recipe: Recipe, script: dict[str, list[str]] = SCRIPT) -> Run:
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def test_after_20_runs_the_learner_asks_the_actor_that_answers_right_first(
    owner: Any, three: None
) -> None:
    recipe = learned_recipe(owner)
    runs = [run_once(owner, recipe) for _ in range(30)]

    firsts = []
    for run in runs:
        attempts = list(run.steps.order_by("seq"))
        actors = [s.actor_alias for s in attempts]
        assert len(actors) == len(set(actors)), f"a retry went back to a failed actor: {actors}"
        assert actors[-1] == "c"
        # Every attempt of a learning step says how it was chosen.
        assert all(s.choice and s.choice["actor"] == s.actor_alias for s in attempts)
        firsts.append(actors[0])
    # While evidence is gathered the least tried goes first; each run's retries hear b and c.
    assert firsts[:3] == ["a", "a", "a"]
    assert firsts[20:].count("c") >= 9, firsts


def test_the_choice_and_its_evidence_are_in_the_api_and_on_the_monitor(
    owner: Any, three: None, client: Any
) -> None:
    recipe = learned_recipe(owner, "shown")
    run = run_once(owner, recipe)
    client.force_login(owner)

    steps = client.get(f"/api/runs/{run.pk}/").json()["steps"]
    page = client.get(f"/runs/{run.pk}/").content.decode()

    first = steps[0]["choice"]
    assert (first["actor"], first["rule"], first["explored"]) == ("a", "gathering evidence", True)
    assert first["reason"] == "a: gathering evidence, 0 of 0 attempts succeeded"
    assert {e["actor"] for e in first["evidence"]} == {"a", "b", "c"}
    assert [s["variant"] for s in steps] == ["", "", ""]
    assert page.count("Chosen by the learner:") == 3
    assert "a: gathering evidence, 0 of 0 attempts succeeded" in page


def test_a_step_with_variants_learns_the_prompt_that_works(owner: Any, three: None) -> None:
    # a answers right only when asked directly; its own prompt gets a wrong answer.
    ActorFactory(
        name="k-direct",
        config={"rules": [{"match": "^Answer directly", "reply": "right"}], "replies": ["wrong"]},
    )
    recipe = learned_recipe(
        owner,
        "variants",
        {**ACTORS, "a": "k-direct"},
        actor="a",
        variants=[{"name": "direct", "prompt": "Answer directly."}],
    )
    script: dict[str, list[str]] = {}

    runs = [run_once(owner, recipe, script) for _ in range(12)]

    first_attempts = [r.steps.order_by("seq").first() for r in runs]
    assert [s.variant for s in first_attempts[:2]] == ["", "direct"]
    assert all(s.actor_alias == "a" for s in first_attempts)
    assert [s.variant for s in first_attempts[8:]].count("direct") >= 3
    direct = StepRun.objects.filter(run__recipe=recipe, variant="direct", seq=1)
    assert direct.exists() and all(s.prompt.startswith("Answer directly") for s in direct)


def test_a_suffix_that_led_to_success_becomes_a_variant_asked_up_front(
    owner: Any, three: None
) -> None:
    more = branch("short", 1, WRONG, "@repeat", action="REQUEST_MORE_DETAIL")
    more["params"] = {"retry_suffix": "Give every number.", "max_retries": 1}
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "suffixes",
            "name": "suffixes",
            "actors": {"a": "k-a"},
            "learning": {"explore": False},
            "steps": [
                {
                    "key": "solve",
                    "name": "Solve",
                    "actor": "a",
                    "prompt": "List them.",
                    "variants": [{"name": "terse", "prompt": "List them tersely."}],
                    "branches": [more, branch("done", 2, DEFAULT, "@complete")],
                }
            ],
        },
    )
    # Asked plainly, a answers short; told to give every number, it answers in full.
    script = {"a": ["wrong: 2, 3", "2, 3, 5, 7"]}

    first = run_once(owner, recipe, script)
    attempts = list(first.steps.order_by("seq"))
    assert [(s.variant, s.outcome) for s in attempts] == [
        ("", "failure"),
        ("+ Give every number.", "neutral"),
    ]
    assert attempts[1].prompt == "List them.\n\nGive every number."  # the suffix once
    # Exploiting at once: the own prompt failed once (1/3), the terse variant is unheard
    # (1/2), the learned suffix succeeded (2/3): the next run asks with it up front.
    second = run_once(owner, recipe, {"a": ["2, 3, 5, 7"]}).steps.get()
    assert (second.variant, second.choice["rule"]) == ("+ Give every number.", "best success rate")
    assert second.prompt == "List them.\n\nGive every number."
