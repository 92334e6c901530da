"""Export: a recipe exports as the document it was imported from, and never with a secret."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.conftest import api_client
from tests.factories import JUDGE, OPENAI, OPENAI_KEY_ENV, REVIEWERS, WRITER
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_import

pytestmark = pytest.mark.django_db

SECRET = "sk-test-d0-not-leak-7f3a9c"


def rich_document() -> dict[str, Any]:
    """Return a document with every step kind, nested logic, params, sources and an inactive
    branch.

    It is written the way export writes a document (`target` always, `params` only when
    set, `active` only when false), so an import followed by an export must give it back.
    """
    return copy.deepcopy(
        {
            "format": "branchline.recipe/v1",
            "slug": "creative-writing-qc",
            "name": "Creative Writing with Quality Control",
            "description": "Write a story, check it, and have an editor approve it.",
            "inputs": {
                "topic": {"type": "string", "required": True, "description": "what to write about"},
                "image_count": {"type": "integer", "default": 0},
            },
            "actors": {
                "writer": WRITER,
                "judge": JUDGE,
                "gpt": OPENAI,
                "editors": f"@human:{REVIEWERS}",
                "desk": "editors-desk",
            },
            "steps": [
                {
                    "key": "generate_story",
                    "name": "Generate Story",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Write a creative story about {topic}",
                    "timeout_s": 300,
                    "validation": {
                        "threshold": 0.75,
                        "max_attempts": 3,
                        "judge": "judge",
                        "fallback": "No story today.",
                    },
                    "position": {"x": 80, "y": 120},
                    "branches": [
                        {
                            "name": "story_too_short",
                            "priority": 1,
                            "when": {
                                "type": "length_check",
                                "operator": "less_than",
                                "value": 50,
                                "unit": "words",
                            },
                            "action": "REQUEST_MORE_DETAIL",
                            "target": "@repeat",
                            "params": {
                                "retry_suffix": "Please write a longer story.",
                                "max_retries": 2,
                            },
                        },
                        {
                            "name": "inappropriate_content",
                            "priority": 2,
                            "when": {
                                "type": "pattern_match",
                                "operator": "regex_match",
                                "value": "(violence|inappropriate)",
                                "flags": "i",
                            },
                            "action": "END_RECIPE",
                            "target": "@end",
                        },
                        {
                            "name": "timed_out",
                            "priority": 3,
                            "when": {
                                "type": "execution_timeout",
                                "operator": "equals",
                                "value": True,
                            },
                            "action": "ERROR_HANDLER",
                            "target": "review",
                            "active": False,
                        },
                        {
                            "name": "prose_about_dragons",
                            "priority": 4,
                            "when": {
                                "type": "and",
                                "conditions": [
                                    {
                                        "type": "or",
                                        "conditions": [
                                            {
                                                "type": "content_type",
                                                "operator": "is",
                                                "value": "prose",
                                            },
                                            {
                                                "type": "pattern_match",
                                                "operator": "contains",
                                                "value": "dragon",
                                            },
                                        ],
                                    },
                                    {
                                        "type": "not",
                                        "conditions": [
                                            {
                                                "type": "execution_error",
                                                "operator": "equals",
                                                "value": True,
                                            }
                                        ],
                                    },
                                ],
                            },
                            "action": "CONTINUE",
                            "target": "triage",
                        },
                        {
                            "name": "high_quality_story",
                            "priority": 5,
                            "when": {
                                "type": "ai_evaluation",
                                "operator": "greater_than_or_equal",
                                "value": 8,
                                "evaluator": "judge",
                                "prompt": "Rate story quality 1-10",
                            },
                            "action": "QUALITY_APPROVED",
                            "target": "triage",
                        },
                        {
                            "name": "default_evaluation",
                            "priority": 999,
                            "when": {"type": "default"},
                            "action": "DEFAULT_CONTINUE",
                            "target": "triage",
                        },
                    ],
                },
                {
                    "key": "triage",
                    "name": "Triage",
                    "kind": "classify",
                    "actor": "gpt",
                    "prompt": "Classify this story: {steps.generate_story.response}",
                    "position": {"x": 320, "y": 120},
                    "routes": [
                        {
                            "name": "fiction",
                            "instructions": "An invented story.",
                            "examples": [
                                {"text": "Once upon a time", "selected": True},
                                {
                                    "text": "Quarterly results",
                                    "selected": False,
                                    "reason": "a report",
                                },
                            ],
                            "always_active": False,
                        },
                        {
                            "name": "audit",
                            "instructions": "Every story is audited.",
                            "examples": [],
                            "always_active": True,
                        },
                    ],
                    "bypass": False,
                    "max_reclassify": 1,
                    "failure_severity": "RECLASSIFICATION",
                    "branches": [
                        {
                            "name": "is_fiction",
                            "priority": 1,
                            "when": {
                                "type": "route_selected",
                                "operator": "includes",
                                "value": "fiction",
                            },
                            "action": "CONTINUE",
                            "target": "safety",
                        },
                        {
                            "name": "otherwise",
                            "priority": 2,
                            "when": {"type": "default", "operator": "always"},
                            "action": "HUMAN_REVIEW_NEEDED",
                            "target": "review",
                        },
                    ],
                },
                {
                    "key": "safety",
                    "name": "Safety",
                    "kind": "decision_tree",
                    "prompt": "",
                    "tree": {
                        "version": "1.0",
                        "tree": {
                            "type": "node",
                            "priority": 1,
                            "condition": {"type": "check_safety", "has_unsafe_pages": True},
                            "if_true": {"type": "leaf", "prompt": "review"},
                            "if_false": {"type": "leaf", "prompt": "publish"},
                        },
                    },
                    "leaf_targets": {"publish": "polish"},
                    "branches": [],
                },
                {
                    "key": "review",
                    "name": "Editor Review",
                    "kind": "human",
                    "actor": "editors",
                    "prompt": "Review this story: {step1_response}",
                    "timeout_s": 86400,
                    "options": ["approve", "reject", "revise"],
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
                            "target": "polish",
                        },
                        {
                            "name": "many_images",
                            "priority": 2,
                            "when": {
                                "type": "check_count",
                                "field": "image_count",
                                "operator": "greater_equal",
                                "value": 3,
                            },
                            "action": "SKIP_TO_END",
                            "target": "",
                        },
                        {
                            "name": "rejected",
                            "priority": 3,
                            "when": {
                                "type": "human_decision",
                                "operator": "user_choice",
                                "value": "reject",
                            },
                            "action": "END_RECIPE",
                            "target": "@end",
                        },
                    ],
                },
                {
                    "key": "desk_check",
                    "name": "Desk Check",
                    "kind": "human",
                    "actor": "desk",
                    "prompt": "Anything to add about {topic}?",
                    "branches": [],
                },
                {
                    "key": "polish",
                    "name": "Polish",
                    "kind": "llm",
                    "actor": "gpt",
                    "prompt": "Polish this story: {steps.generate_story.response}\n{sources}",
                    "sources": [
                        {
                            "knowledge_base": "style-guide",
                            "query": "{topic} style",
                            "top_k": 3,
                            "min_score": 0.2,
                            "mode": "fulltext",
                        }
                    ],
                    "branches": [
                        {
                            "name": "rate_limited",
                            "priority": 1,
                            "when": {
                                "type": "execution_error",
                                "operator": "contains",
                                "value": "rate limit",
                            },
                            "action": "RETRY_DIFFERENT_ACTOR",
                            "target": "@repeat",
                            "params": {"alternative_actor": "writer", "max_retries": 1},
                        },
                        {
                            "name": "done",
                            "priority": 2,
                            "when": {"type": "default"},
                            "action": "CONTINUE",
                            "target": "find_facts",
                        },
                    ],
                },
                {
                    "key": "find_facts",
                    "name": "Find Facts",
                    "kind": "retrieve",
                    "prompt": "",
                    "sources": [
                        {"knowledge_base": "encyclopedia"},
                        {"knowledge_base": "atlas", "query": "{steps.polish.response}"},
                    ],
                    "branches": [
                        {
                            "name": "nothing_found",
                            "priority": 1,
                            "when": {"type": "retrieval", "operator": "less_than", "value": 1},
                            "action": "END_RECIPE",
                            "target": "@end",
                        },
                        {
                            "name": "well_found",
                            "priority": 2,
                            "when": {
                                "type": "retrieval",
                                "operator": "greater_equal",
                                "value": 0.8,
                                "measure": "top_score",
                            },
                            "action": "QUALITY_APPROVED",
                            "target": "@complete",
                        },
                    ],
                },
            ],
        }
    )


@pytest.fixture
def rich_recipe(user: Any, actors: Any) -> Recipe:
    return recipe_import(user=user, data=rich_document()).recipe


def test_it_exports_the_document_it_imported(rich_recipe: Recipe) -> None:
    assert document_from_recipe(rich_recipe) == rich_document()


def test_it_exports_the_same_document_through_the_api(api: Any, rich_recipe: Recipe) -> None:
    response = api.get("/api/recipes/creative-writing-qc/export")

    assert response.status_code == 200
    assert response.json() == rich_document()
    assert response["Content-Disposition"] == 'attachment; filename="creative-writing-qc.json"'


def test_an_export_imports_back_as_an_equal_recipe(
    user: Any, rich_recipe: Recipe, api: Any
) -> None:
    exported = api.get("/api/recipes/creative-writing-qc/export").json()
    rich_recipe.delete()

    again = recipe_import(user=user, data=json.dumps(exported)).recipe

    assert document_from_recipe(again) == exported == rich_document()


def test_it_keeps_the_step_order_and_the_inactive_branch(rich_recipe: Recipe) -> None:
    assert list(rich_recipe.steps.values_list("key", flat=True)) == [
        "generate_story",
        "triage",
        "safety",
        "review",
        "desk_check",
        "polish",
        "find_facts",
    ]
    first = rich_recipe.steps.get(key="generate_story")
    assert list(first.branches.filter(active=False).values_list("name", flat=True)) == ["timed_out"]


def test_it_exports_a_published_version(api: Any, rich_recipe: Recipe) -> None:
    assert api.post("/api/recipes/creative-writing-qc/publish").status_code == 201

    response = api.get("/api/recipes/creative-writing-qc/export?version=1")

    assert response.status_code == 200
    assert response.json() == rich_document()


@pytest.mark.parametrize("version", ["one", "-1", "0", "99999999999999999999999"])
def test_it_refuses_to_export_a_version_that_is_no_version_number(
    api: Any, rich_recipe: Recipe, version: str
) -> None:
    response = api.get(f"/api/recipes/creative-writing-qc/export?version={version}")

    assert response.status_code == 400
    assert response.json() == {
        "errors": [f"version: no version {version} of 'creative-writing-qc'"]
    }


@pytest.mark.parametrize("version", ["7", "999999999999999999"])
def test_exporting_a_version_that_does_not_exist_is_not_found(
    api: Any, rich_recipe: Recipe, version: str
) -> None:
    response = api.get(f"/api/recipes/creative-writing-qc/export?version={version}")

    assert response.status_code == 404
    assert response.json()["detail"] == f"No version {version} of 'creative-writing-qc'."


def test_it_never_exports_an_api_key(
    monkeypatch: pytest.MonkeyPatch, api: Any, rich_recipe: Recipe, actors: Any
) -> None:
    monkeypatch.setenv(OPENAI_KEY_ENV, SECRET)
    assert api.post("/api/recipes/creative-writing-qc/publish").status_code == 201

    for url in [
        "/api/recipes/creative-writing-qc/export",
        "/api/recipes/creative-writing-qc/export?version=1",
        "/api/recipes/creative-writing-qc",
        "/api/recipes",
        "/api/actors/",
        f"/api/actors/{actors.openai.pk}/",
    ]:
        response = api.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url


def test_it_shows_the_key_variable_name_but_not_its_value(
    monkeypatch: pytest.MonkeyPatch, actors: Any, staff_user: Any
) -> None:
    monkeypatch.setenv(OPENAI_KEY_ENV, SECRET)
    staff = api_client(staff_user)

    actor = staff.get(f"/api/actors/{actors.openai.pk}/").json()
    changed = staff.patch(f"/api/actors/{actors.openai.pk}/", {"model": "gpt-4.1"}, format="json")

    assert actor["api_key_env"] == OPENAI_KEY_ENV
    assert changed.status_code == 200
    assert SECRET not in json.dumps(actor) + changed.content.decode()


def test_an_exported_recipe_names_actors_not_their_settings(rich_recipe: Recipe) -> None:
    text = json.dumps(document_from_recipe(rich_recipe))

    assert OPENAI_KEY_ENV not in text
    assert "llm.example.com" not in text
