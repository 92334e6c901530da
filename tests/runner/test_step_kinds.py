"""Validation loops, decision trees, classification, learned retries, escalation, step limits."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runner import services
from runner.human import task_decide, tasks_expire
from runner.models import Run, StepRun
from runner.status import RunStatus, TaskStatus
from runner.steps import EXECUTORS
from runner.steps.actor_stats import actor_stat_rows
from tests.factories import ActorFactory, GroupFactory
from tests.runner.conftest import wait_for
from workflows.engine.step_kinds.registry import KIND_NAMES
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db(transaction=True)

END = {
    "name": "end",
    "priority": 99,
    "when": {"type": "default"},
    "action": "CONTINUE",
    "target": "@complete",
}


def test_every_step_kind_of_the_recipe_format_has_an_executor() -> None:
    assert sorted(EXECUTORS) == sorted(KIND_NAMES)


def publish(owner: Any, document: dict[str, Any]) -> Recipe:
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def document(
    slug: str, steps: list[dict[str, Any]], actors: dict[str, str], inputs: dict | None = None
) -> dict:
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": inputs or {},
        "actors": actors,
        "steps": steps,
    }


def scores(points: int, feedback: str = "") -> str:
    return json.dumps(
        {
            "relevance": points,
            "helpfulness": points,
            "accuracy": points,
            "completeness": points,
            "feedback": feedback,
        }
    )


@pytest.fixture
def scripted(db: None) -> None:
    for name in ("k-writer", "k-judge", "k-a", "k-b", "k-c"):
        ActorFactory(name=name, config={"replies": ["unused"]})


@pytest.fixture
def validated_recipe(owner: Any, scripted: None) -> Recipe:
    return publish(
        owner,
        document(
            "validated",
            [
                {
                    "key": "answer",
                    "name": "Answer",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Explain owls.",
                    "validation": {
                        "threshold": 0.75,
                        "max_attempts": 3,
                        "judge": "judge",
                        "fallback": "No good answer could be written.",
                    },
                    "branches": [END],
                }
            ],
            {"writer": "k-writer", "judge": "k-judge"},
        ),
    )


def test_the_validation_loop_retries_with_the_judges_feedback(
    worker: Any, validated_recipe: Recipe, owner: Any
) -> None:
    script = {
        "writer": ["I'm sorry, I cannot help.", "Owls are nocturnal raptors with silent flight."],
        "judge": [scores(5, "Say something about owls."), scores(24)],
    }
    run = services.run_start(user=owner, recipe=validated_recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED)

    step = run.steps.get()
    assert step.response == "Owls are nocturnal raptors with silent flight."
    attempts = step.details["validation"]["attempts"]
    assert len(attempts) == 2
    assert attempts[0]["feedback"] == "Say something about owls."
    assert step.confidence >= 0.75


def test_the_validation_loop_falls_back_after_the_last_attempt(
    worker: Any, validated_recipe: Recipe, owner: Any
) -> None:
    script = {"writer": ["meh"], "judge": [scores(2, "Try harder.")]}
    run = services.run_start(user=owner, recipe=validated_recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED)

    step = run.steps.get()
    assert step.response == "No good answer could be written."
    assert step.details["validation"]["used_fallback"] is True
    assert len(step.details["validation"]["attempts"]) == 3


@pytest.mark.parametrize(("images", "expected"), [(3, "describe_images"), (0, "read_text")])
def test_a_decision_tree_sends_the_run_to_its_leafs_step(
    worker: Any, owner: Any, scripted: None, images: int, expected: str
) -> None:
    tree = {
        "version": "1.0",
        "tree": {
            "type": "node",
            "priority": 1,
            "condition": {
                "type": "check_count",
                "field": "image_count",
                "operator": "greater_than",
                "value": 0,
            },
            "if_true": {"type": "leaf", "prompt": "images"},
            "if_false": {"type": "leaf", "prompt": "text"},
        },
    }
    recipe = publish(
        owner,
        document(
            "tree",
            [
                {
                    "key": "route",
                    "name": "Route",
                    "kind": "decision_tree",
                    "prompt": "",
                    "tree": tree,
                    "leaf_targets": {"images": "describe_images", "text": "read_text"},
                    "branches": [],
                },
                {
                    "key": "describe_images",
                    "name": "Images",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Describe {image_count} images",
                    "branches": [END],
                },
                {
                    "key": "read_text",
                    "name": "Text",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Read it",
                    "branches": [END],
                },
            ],
            {"writer": "k-writer"},
            {"image_count": {"type": "integer", "required": True}},
        ),
    )

    run = services.run_start(user=owner, recipe=recipe, inputs={"image_count": images})
    run = wait_for(run, RunStatus.SUCCEEDED)

    assert list(run.steps.order_by("seq").values_list("step_key", flat=True)) == ["route", expected]
    assert run.steps.get(step_key="route").details["trace"]


def test_a_classify_step_selects_routes_that_branches_follow(
    worker: Any, owner: Any, scripted: None
) -> None:
    recipe = publish(
        owner,
        document(
            "triage",
            [
                {
                    "key": "triage",
                    "name": "Triage",
                    "kind": "classify",
                    "actor": "classifier",
                    "prompt": "{message}",
                    "routes": [
                        {
                            "name": "billing",
                            "instructions": "Questions about invoices or payments.",
                            "examples": [{"text": "Where is my invoice?", "selected": True}],
                        },
                        {"name": "outage", "instructions": "Reports that the service is down."},
                    ],
                    "branches": [
                        {
                            "name": "to_billing",
                            "priority": 1,
                            "when": {
                                "type": "route_selected",
                                "operator": "includes",
                                "value": "billing",
                            },
                            "action": "CONTINUE",
                            "target": "billing",
                        },
                        {
                            "name": "to_outage",
                            "priority": 2,
                            "when": {
                                "type": "route_selected",
                                "operator": "includes",
                                "value": "outage",
                            },
                            "action": "CONTINUE",
                            "target": "outage",
                        },
                    ],
                },
                {
                    "key": "billing",
                    "name": "Billing",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Bill",
                    "branches": [END],
                },
                {
                    "key": "outage",
                    "name": "Outage",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Down",
                    "branches": [END],
                },
            ],
            {"classifier": "k-a", "writer": "k-writer"},
            {"message": {"type": "string", "required": True}},
        ),
    )
    script = {
        "classifier": [
            '{"selected": true, "reason": "asks about an invoice"}',
            "NO - not an outage",
        ]
    }

    run = services.run_start(
        user=owner, recipe=recipe, inputs={"message": "Invoice missing"}, script=script
    )
    run = wait_for(run, RunStatus.SUCCEEDED)

    triage = run.steps.get(step_key="triage")
    assert triage.details["selected"] == ["billing"]
    assert list(run.steps.order_by("seq").values_list("step_key", flat=True)) == [
        "triage",
        "billing",
    ]


def test_a_retry_with_a_different_actor_picks_the_best_one_learned(
    worker: Any, owner: Any, scripted: None
) -> None:
    recipe = publish(
        owner,
        document(
            "primes",
            [
                {
                    "key": "solve",
                    "name": "Solve",
                    "kind": "llm",
                    "actor": "a",
                    "prompt": "Solve it",
                    "branches": [
                        {
                            "name": "wrong",
                            "priority": 1,
                            "when": {
                                "type": "pattern_match",
                                "operator": "contains",
                                "value": "wrong",
                            },
                            "action": "RETRY_WITH_DIFFERENT_ACTOR",
                            "target": "@repeat",
                            "params": {"max_retries": 1},
                        },
                        END,
                    ],
                }
            ],
            {"a": "k-a", "b": "k-b", "c": "k-c"},
        ),
    )
    # Earlier runs' history: b succeeded 9 times in 10, c twice in 10.
    earlier = Run.objects.create(
        recipe=recipe,
        version=recipe.versions.get(),
        created_by=owner,
        status=RunStatus.SUCCEEDED,
    )
    StepRun.objects.bulk_create(
        StepRun(
            run=earlier,
            seq=seq,
            step_key="solve",
            step_name="Solve",
            kind="llm",
            actor_alias=alias,
            status="succeeded" if ok else "failed",
            latency_ms=latency,
        )
        for seq, (alias, ok, latency) in enumerate(
            [("b", i < 9, 100) for i in range(10)] + [("c", i < 2, 50) for i in range(10)],
            start=1,
        )
    )
    script = {"a": ["wrong answer"], "b": ["right answer"], "c": ["wrong again"]}

    run = services.run_start(user=owner, recipe=recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.SUCCEEDED)

    assert list(run.steps.order_by("seq").values_list("actor_alias", "response")) == [
        ("a", "wrong answer"),
        ("b", "right answer"),
    ]
    stats = {r["actor_alias"]: r for r in actor_stat_rows(run__recipe_id=recipe.pk)}
    # b's answer went on (neutral) in a completed run: a success; a's answer was retried with
    # another actor: a failure, though its model call did not error.
    assert (stats["b"]["successes"], stats["b"]["attempts"]) == (10, 11)
    assert (stats["a"]["successes"], stats["a"]["failures"], stats["a"]["attempts"]) == (0, 1, 1)


def test_an_overdue_task_escalates_then_times_out(worker: Any, owner: Any, editors: Any) -> None:
    leads = GroupFactory(name="test-leads")
    recipe = publish(
        owner,
        document(
            "escalate",
            [
                {
                    "key": "review",
                    "name": "Review",
                    "kind": "human",
                    "actor": "editors",
                    "prompt": "OK?",
                    "timeout_s": 60,
                    "escalate_to": "leads",
                    "branches": [
                        {
                            "name": "yes",
                            "priority": 1,
                            "when": {
                                "type": "human_decision",
                                "operator": "user_choice",
                                "value": "approve",
                            },
                            "action": "CONTINUE",
                            "target": "@complete",
                        },
                        {
                            "name": "silence",
                            "priority": 2,
                            "when": {
                                "type": "execution_timeout",
                                "operator": "equals",
                                "value": True,
                            },
                            "action": "END_RECIPE",
                            "target": "@end",
                        },
                    ],
                }
            ],
            {"editors": "@human:test-editors", "leads": "@human:test-leads"},
        ),
    )
    run = wait_for(
        services.run_start(user=owner, recipe=recipe, inputs={}), RunStatus.WAITING_HUMAN
    )

    tasks_expire(now=timezone.now() + timedelta(seconds=61))
    task = run.tasks.get()
    assert (task.status, task.group, task.escalated_at is not None) == (
        TaskStatus.OPEN,
        leads,
        True,
    )
    assert run.events.filter(type="human_task.escalated").exists()

    tasks_expire(now=timezone.now() + timedelta(seconds=200))
    run = wait_for(run, RunStatus.ENDED)
    assert run.tasks.get().status == TaskStatus.TIMED_OUT


def test_a_run_that_loops_stops_at_the_step_limit(
    worker: Any, owner: Any, scripted: None, settings: Any
) -> None:
    settings.RUN_MAX_STEPS = 5
    loop = {"name": "again", "priority": 1, "when": {"type": "default"}, "action": "CONTINUE"}
    recipe = publish(
        owner,
        document(
            "loop",
            [
                {
                    "key": "ping",
                    "name": "Ping",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "ping",
                    "branches": [{**loop, "target": "pong"}],
                },
                {
                    "key": "pong",
                    "name": "Pong",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "pong",
                    "branches": [{**loop, "target": "ping"}],
                },
            ],
            {"writer": "k-writer"},
        ),
    )

    run = wait_for(services.run_start(user=owner, recipe=recipe, inputs={}), RunStatus.FAILED)

    assert "step limit" in run.error
    assert Run.objects.get(pk=run.pk).steps.count() == 5


def test_a_script_can_walk_failure_and_timeout_branches(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    script = {"judge": ["@error: judge is down"], "editors": ["@timeout"]}

    run = services.run_start(user=owner, recipe=story_recipe, inputs={"topic": "x"}, script=script)
    run = wait_for(run, RunStatus.ENDED)

    write = run.steps.get(step_key="write")
    assert "judge is down" in write.evaluations.get(branch="great").reason
    assert run.tasks.get().status == TaskStatus.TIMED_OUT
    assert run.steps.get(step_key="review").evaluations.get(taken=True).branch == "no_answer"


def test_a_human_step_shows_reviewers_the_material_it_names(
    worker: Any, owner: Any, editors: Any, scripted: None
) -> None:
    recipe = publish(
        owner,
        document(
            "material",
            [
                {
                    "key": "draft",
                    "name": "Draft",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Draft",
                    "branches": [{**END, "target": "check", "action": "HUMAN_REVIEW"}],
                },
                {
                    "key": "check",
                    "name": "Check",
                    "kind": "human",
                    "actor": "editors",
                    "prompt": "Is the draft for {who} fine?",
                    "material": "Draft for {who}: {steps.draft.response}",
                    "branches": [],
                },
            ],
            {"writer": "k-writer", "editors": "@human:test-editors"},
            {"who": {"type": "string", "required": True}},
        ),
    )

    run = services.run_start(
        user=owner, recipe=recipe, inputs={"who": "Ann"}, script={"writer": ["Hello"]}
    )
    run = wait_for(run, RunStatus.WAITING_HUMAN)

    task = run.tasks.get()
    assert (task.question, task.material) == ("Is the draft for Ann fine?", "Draft for Ann: Hello")


def ping_pong(owner: Any) -> Recipe:
    """A loop of two steps whose prompts name each other's latest answer."""
    loop = {"name": "again", "priority": 1, "when": {"type": "default"}, "action": "CONTINUE"}
    return publish(
        owner,
        document(
            "ping-pong",
            [
                {
                    "key": "ping",
                    "name": "Ping",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "ping after {steps.pong.response}",
                    "branches": [{**loop, "target": "pong"}],
                },
                {
                    "key": "pong",
                    "name": "Pong",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "pong after {step1_response}",
                    "branches": [{**loop, "target": "ping"}],
                },
            ],
            {"writer": "k-writer"},
        ),
    )


def test_a_prompt_reads_the_latest_answer_of_the_step_it_names(
    worker: Any, owner: Any, scripted: None, settings: Any
) -> None:
    settings.RUN_MAX_STEPS = 5
    script = {"writer": [f"answer-{n}" for n in range(1, 6)]}
    run = services.run_start(user=owner, recipe=ping_pong(owner), inputs={}, script=script)
    run = wait_for(run, RunStatus.FAILED)

    assert list(run.steps.values_list("seq", "attempt", "prompt", "response")) == [
        (1, 1, "ping after ", "answer-1"),
        (2, 1, "pong after answer-1", "answer-2"),
        (3, 2, "ping after answer-2", "answer-3"),
        (4, 2, "pong after answer-3", "answer-4"),
        (5, 3, "ping after answer-4", "answer-5"),
    ]
    # The answers live in their StepRuns only: the run's state refers to them.
    assert "answer-" not in json.dumps(run.state)
    assert (run.state["latest_seq"], run.state["attempts"]) == (
        {"ping": 5, "pong": 4},
        {"ping": 3, "pong": 2},
    )


def test_a_run_whose_state_holds_every_response_in_full_goes_on(
    worker: Any, owner: Any, editors: Any, reviewer: Any, scripted: None
) -> None:
    # A run in flight across the upgrade: its state was stored with `responses` and `latest`.
    recipe = publish(
        owner,
        document(
            "legacy",
            [
                {
                    "key": "draft",
                    "name": "Draft",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Draft",
                    "branches": [{**END, "target": "check", "action": "HUMAN_REVIEW"}],
                },
                {
                    "key": "check",
                    "name": "Check",
                    "kind": "human",
                    "actor": "editors",
                    "prompt": "Fine?",
                    "branches": [{**END, "target": "draft", "action": "CONTINUE"}],
                },
            ],
            {"writer": "k-writer", "editors": "@human:test-editors"},
        ),
    )
    script = {"writer": ["first draft", "second draft"]}
    run = services.run_start(user=owner, recipe=recipe, inputs={}, script=script)
    run = wait_for(run, RunStatus.WAITING_HUMAN)
    state = {k: v for k, v in run.state.items() if k not in ("latest_seq", "attempts")}
    state["responses"] = [{"seq": 1, "step": "draft", "response": "first draft"}]
    state["latest"] = {"draft": "first draft"}
    Run.objects.filter(pk=run.pk).update(state=state)

    task_decide(task_id=run.tasks.get().pk, user=reviewer, decision="approve", comment="ok")
    run = wait_for(run, RunStatus.WAITING_HUMAN, RunStatus.FAILED)

    assert list(run.steps.values_list("seq", "step_key", "attempt", "response")) == [
        (1, "draft", 1, "first draft"),
        (2, "check", 1, "ok"),
        (3, "draft", 2, "second draft"),
        (4, "check", 2, ""),
    ]
    tasks = run.tasks.order_by("pk")
    assert [t.material for t in tasks] == ["first draft", "second draft"]  # the last answer
    assert "responses" not in run.state
    assert run.state["latest_seq"] == {"draft": 3, "check": 2}
