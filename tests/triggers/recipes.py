"""The recipes of the callbacks' tests: a story a reviewer approves, told to a receiver."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from tests.factories import ActorFactory, GroupFactory
from tests.runner.recipes import publish_document
from tests.triggers.conftest import SECRET_ENV
from workflows.models import Recipe

STORY = "A lighthouse keeper found a map in a bottle and sailed away to find the treasure."
EDITORS = "cb-editors"


def document(callbacks: list[dict[str, Any]], *, review: bool = True) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"key": "write", "name": "Write", "actor": "writer", "prompt": "Write about {topic}"},
    ]
    if review:
        steps.append(
            {
                "key": "review",
                "name": "Review",
                "kind": "human",
                "actor": "editors",
                "prompt": "Good? {steps.write.response}",
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
                    }
                ],
            }
        )
    return {
        "format": "branchline.recipe/v1",
        "slug": "notify",
        "name": "Notify",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": "cb-writer", "editors": f"@human:{EDITORS}"},
        "steps": steps,
        "callbacks": callbacks,
    }


def callback(url: str, *on: str) -> dict[str, Any]:
    return {"on": list(on or ["run.finished"]), "url": url, "secret_env": SECRET_ENV}


def editors() -> Group:
    group: Group = GroupFactory(name=EDITORS)
    return group


def publish(owner: Any, callbacks: list[dict[str, Any]], *, review: bool = True) -> Recipe:
    ActorFactory(name="cb-writer", config={"replies": [STORY]})
    editors()
    return publish_document(owner, document(callbacks, review=review))
