"""A failed step passes the branches that read its answer and reaches the one that handles it."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import BranchEvaluation
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document

pytestmark = pytest.mark.django_db

STORY = "A long story about a lighthouse keeper and the owls of the cliff. " * 4
TIMED_OUT = "not applicable: the step failed: scripted timeout after 300 s"


def story_recipe() -> dict[str, Any]:
    """The note's step 1: "too short" at priority 1, the timeout branch at 5."""
    too_short = branch(
        "story_too_short",
        1,
        {"type": "length_check", "operator": "less_than", "value": 200},
        "@repeat",
        action="REQUEST_MORE_DETAIL",
        params={"retry_suffix": "Please write a longer story.", "max_retries": 2},
    )
    timeout = branch(
        "model_timeout",
        5,
        {"type": "execution_timeout", "operator": "equals", "value": True},
        "@repeat",
        action="RETRY_WITH_DIFFERENT_ACTOR",
        params={"alternative_actor": "backup", "max_retries": 2},
    )
    return {
        "format": "branchline.recipe/v1",
        "slug": "story-on-time",
        "name": "Story on time",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": "fs-writer", "backup": "fs-backup"},
        "steps": [
            {
                "key": "generate_story",
                "name": "Generate Story",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write a creative story about {topic}",
                "timeout_s": 300,
                "branches": [too_short, timeout, branch("done", 999, DEFAULT, "@complete")],
            }
        ],
    }


def test_a_timed_out_step_takes_the_timeout_branch_not_the_too_short_one(owner: Any) -> None:
    ActorFactory(name="fs-writer", config={"replies": ["unused"]})
    ActorFactory(name="fs-backup", config={"replies": ["unused"]})
    recipe = publish_document(owner, story_recipe())
    script = {"writer": ["@timeout"], "backup": [STORY]}

    run = drive(
        services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"}, script=script)
    )

    assert run.status == RunStatus.SUCCEEDED
    first, second = run.steps.order_by("seq")
    assert (first.status, first.actor_alias) == ("timed_out", "writer")
    assert (second.actor_alias, second.response) == ("backup", STORY)
    evaluations = BranchEvaluation.objects.filter(step_run=first).order_by("order")
    assert [(e.branch, e.matched, e.taken, e.reason) for e in evaluations] == [
        ("story_too_short", False, False, TIMED_OUT),
        ("model_timeout", True, True, "step timed out"),
    ]
