"""Runner fixtures: a real Celery worker (in this process), and a recipe that branches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from config.celery import app as celery_app
from runner.models import Run
from tests.factories import ActorFactory, GroupFactory, UserFactory
from tests.runner.event_checks import events_match_their_schema  # noqa: F401 (autouse)
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

STORY = "Once upon a time a lighthouse keeper found a map inside a bottle and sailed away."


def story_document() -> dict[str, Any]:
    """Return a recipe with every kind of branch the runner has to honour."""
    return {
        "format": "branchline.recipe/v1",
        "slug": "story",
        "name": "Story with review",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {
            "writer": "test-writer",
            "judge": "test-judge",
            "editors": "@human:test-editors",
        },
        "steps": [
            {
                "key": "write",
                "name": "Write",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write a story about {topic}",
                "branches": [
                    {
                        "name": "too_short",
                        "priority": 1,
                        "when": {"type": "length_check", "operator": "less_than", "value": 40},
                        "action": "REQUEST_MORE_DETAIL",
                        "target": "@repeat",
                        "params": {
                            "retry_suffix": "Please write a longer story.",
                            "max_retries": 2,
                        },
                    },
                    {
                        "name": "broken",
                        "priority": 2,
                        "when": {
                            "type": "pattern_match",
                            "operator": "regex_match",
                            "value": "(error|failed)",
                        },
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                    {
                        "name": "great",
                        "priority": 3,
                        "when": {
                            "type": "ai_evaluation",
                            "operator": "greater_equal",
                            "value": 8,
                            "evaluator": "judge",
                            "prompt": "Rate story quality 1-10",
                        },
                        "action": "QUALITY_APPROVED",
                        "target": "@complete",
                    },
                    {
                        "name": "to_review",
                        "priority": 999,
                        "when": {"type": "default"},
                        "action": "HUMAN_REVIEW",
                        "target": "review",
                    },
                ],
            },
            {
                "key": "review",
                "name": "Review",
                "kind": "human",
                "actor": "editors",
                "prompt": "Is this story good? {steps.write.response}",
                "timeout_s": 3600,
                "branches": [
                    {
                        "name": "approved",
                        "priority": 1,
                        "when": {
                            "type": "human_decision",
                            "operator": "user_choice",
                            "value": "approve",
                        },
                        "action": "QUALITY_APPROVED",
                        "target": "@complete",
                    },
                    {
                        "name": "rejected",
                        "priority": 2,
                        "when": {
                            "type": "human_decision",
                            "operator": "user_choice",
                            "value": "reject",
                        },
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                    {
                        "name": "revise",
                        "priority": 3,
                        "when": {
                            "type": "human_decision",
                            "operator": "user_choice",
                            "value": "revise",
                        },
                        "action": "CONTINUE",
                        "target": "revise",
                    },
                    {
                        "name": "no_answer",
                        "priority": 4,
                        "when": {"type": "execution_timeout", "operator": "equals", "value": True},
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                ],
            },
            {
                "key": "revise",
                "name": "Revise",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Revise: {steps.write.response}\nEditor says: {steps.review.response}\n"
                "Feedback: {feedback}",
                "branches": [
                    {
                        "name": "done",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "@complete",
                    },
                ],
            },
        ],
    }


@pytest.fixture
def editors(db: None) -> Group:
    return GroupFactory(name="test-editors")


@pytest.fixture
def owner(db: None) -> Any:
    return UserFactory(username="olivia")


@pytest.fixture
def reviewer(editors: Group) -> Any:
    user = UserFactory(username="rita")
    user.groups.add(editors)
    return user


@pytest.fixture
def story_recipe(owner: Any, editors: Group) -> Recipe:
    ActorFactory(name="test-writer", config={"replies": [STORY]})
    ActorFactory(name="test-judge", config={"replies": ["9"]})
    recipe = recipe_import(user=owner, data=story_document()).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


@pytest.fixture
def worker(celery_worker: Any, transactional_db: None) -> Any:
    return celery_worker


@pytest.fixture
def runs_settled(transactional_db: None) -> Iterator[None]:
    """After the test, drop queued messages and wait until no worker holds a run's lease, so
    that the module's worker is not writing while the test's database is flushed."""
    yield
    celery_app.control.purge()
    deadline = time.monotonic() + 20
    quiet = 0
    while quiet < 3:
        assert time.monotonic() < deadline, "a run's lease is still held 20 s after the test"
        leased = Run.objects.filter(lease_expires_at__gt=timezone.now()).exists()
        quiet = 0 if leased else quiet + 1
        celery_app.control.purge()  # what a commit handed back meanwhile
        time.sleep(0.05)


def wait_for(run: Run, *statuses: str, timeout: float = 20) -> Run:
    """Wait until the run reaches one of `statuses`; fail with its state if it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in statuses:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run.pk} is {run.status} (error: {run.error!r}), not {statuses}")
