"""Editor fixtures: an author, a stranger, the actors the story recipe names, and the recipe."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.test.signals import template_rendered
from template_partials.templatetags.partials import TemplateProxy

from tests.factories import ActorFactory, GroupFactory, UserFactory
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

STORY = "Once upon a time a lighthouse keeper found a map inside a bottle and sailed away. " * 4

STORY_DOCUMENT: dict[str, Any] = {
    "format": "branchline.recipe/v1",
    "slug": "story",
    "name": "Story with review",
    "description": "",
    "inputs": {"topic": {"type": "string", "required": True}},
    "actors": {
        "writer": "editor-writer",
        "judge": "editor-judge",
        "editors": "@human:editor-reviewers",
    },
    "steps": [
        {
            "key": "write",
            "name": "Write",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Write a story about {topic}",
            "position": {"x": 80, "y": 120},
            "branches": [
                {
                    "name": "too_short",
                    "priority": 1,
                    "when": {"type": "length_check", "operator": "less_than", "value": 40},
                    "action": "REQUEST_MORE_DETAIL",
                    "target": "@repeat",
                    "params": {"retry_suffix": "Longer, please.", "max_retries": 2},
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
            "position": {"x": 380, "y": 120},
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
                    "target": "@complete",
                },
            ],
        },
    ],
}


@pytest.fixture(autouse=True)
def _partials_report_their_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let `response.context` see partial renders, as the test runner does for whole templates."""
    original = TemplateProxy._render

    def render(self: TemplateProxy, context: Any) -> Any:
        template_rendered.send(sender=self, template=self, context=context)
        return original(self, context)

    monkeypatch.setattr(TemplateProxy, "_render", render)


def story_document(**fields: Any) -> dict[str, Any]:
    """Return a fresh copy of the story recipe, with `fields` replacing top-level keys."""
    return {**copy.deepcopy(STORY_DOCUMENT), **fields}


@pytest.fixture
def author(db: None) -> Any:
    return UserFactory(username="ada")


@pytest.fixture
def stranger(db: None) -> Any:
    return UserFactory(username="eve")


@pytest.fixture
def reviewers(db: None) -> Group:
    return GroupFactory(name="editor-reviewers")


@pytest.fixture
def story_actors(db: None, reviewers: Group) -> None:
    ActorFactory(name="editor-writer", config={"replies": [STORY]})
    ActorFactory(name="editor-judge", config={"replies": ["9"]})


@pytest.fixture
def story(author: Any, story_actors: None) -> Recipe:
    return recipe_import(user=author, data=story_document()).recipe


@pytest.fixture
def published(story: Recipe, author: Any) -> Recipe:
    """The story, published as version 1."""
    recipe_publish(recipe=story, user=author)
    return story


@pytest.fixture
def web(author: Any) -> Client:
    """A browser-like test client logged in as the author."""
    client = Client(raise_request_exception=True)
    client.force_login(author)
    return client


@pytest.fixture
def stranger_web(stranger: Any) -> Client:
    client = Client()
    client.force_login(stranger)
    return client


def htmx_post(client: Client, url: str, document: dict[str, Any] | None, **fields: Any) -> Any:
    """POST a panel request as htmx does, with the page's current document."""
    data = {k: v for k, v in fields.items()}
    if document is not None:
        data["document"] = json.dumps(document)
    return client.post(url, data, HTTP_HX_REQUEST="true")


def draft(recipe: Recipe) -> dict[str, Any]:
    return document_from_recipe(recipe)


def live_answer(response: Any) -> dict[str, Any]:
    """Return a panel's answer to an edit applied as typed (`apply=1`): its result (None:
    nothing applied), its errors by posted field name, its errors of no field, its fixes."""
    assert response.status_code == 200, response.content[:500]
    return response.json()


def answer_errors(answer: dict[str, Any]) -> str:
    """Return every message of a live answer, beside a field or not, as one text."""
    messages = [m for ms in answer["errors"].values() for m in ms] + answer["form_errors"]
    return " ".join(messages)
