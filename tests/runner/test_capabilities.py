"""Step `requires` in real runs: a retry with another actor, and the learner's first choice,
skip an actor that lacks a capability the step requires, and say so in the step's record."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}
ACTORS = {"a": "cap-a", "b": "cap-b", "c": "cap-c"}
SCRIPT = {"a": ["wrong from a"], "b": ["right from b"], "c": ["right from c"]}


@pytest.fixture
def actors(db: None) -> None:
    # a declares nothing (not checked), b declares what it has (no vision), c has vision.
    ActorFactory(name="cap-a", config={"replies": ["unused"]})
    ActorFactory(name="cap-b", config={"replies": ["unused"]}, capabilities=["tools"])
    ActorFactory(name="cap-c", config={"replies": ["unused"]}, capabilities=["vision", "tools"])


def looking_recipe(owner: Any, **step: Any) -> Recipe:
    retry = branch("wrong", 1, WRONG, "@repeat", action="RETRY_WITH_DIFFERENT_ACTOR")
    approved = branch("right", 2, DEFAULT, "@complete", action="QUALITY_APPROVED")
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "looks",
            "name": "Looks",
            "actors": ACTORS,
            "steps": [
                {
                    "key": "look",
                    "name": "Look",
                    "kind": "llm",
                    "actor": "a",
                    "prompt": "What is in the picture?",
                    "requires": ["vision"],
                    "branches": [retry, approved],
                    **step,
                }
            ],
        },
    )


def test_a_retry_skips_an_actor_that_lacks_a_required_capability(
    owner: Any, actors: None, client: Any
) -> None:
    recipe = looking_recipe(owner)
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=SCRIPT))

    assert run.status == RunStatus.SUCCEEDED, run.error
    steps = list(run.steps.order_by("seq"))
    assert [s.actor_alias for s in steps] == ["a", "c"]
    assert steps[1].choice["skipped"] == [{"actor": "b", "reason": "actor 'b' lacks vision"}]
    client.force_login(owner)
    shown = client.get(f"/api/runs/{run.pk}/").json()["steps"][1]["choice"]
    assert "skipped actor 'b' lacks vision" in shown["reason"]


def test_the_learner_never_chooses_an_incapable_candidate_first(owner: Any, actors: None) -> None:
    recipe = looking_recipe(owner, actor="@learned", candidates=["a", "b", "c"])
    firsts = []
    for _ in range(4):
        run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=SCRIPT))
        assert run.status == RunStatus.SUCCEEDED, run.error
        first = run.steps.order_by("seq").first()
        assert first is not None
        assert first.choice["skipped"] == [{"actor": "b", "reason": "actor 'b' lacks vision"}]
        firsts.append(first.actor_alias)
    assert "b" not in firsts
