"""An intent step and a criteria_met branch go through import, export and the JSON Schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import JUDGE, WRITER
from workflows.adapters import document_from_recipe
from workflows.recipe_format import json_schema
from workflows.services import recipe_import
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def document(**intent_fields: Any) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": "intent-format",
        "name": "Intent format",
        "description": "",
        "inputs": {"request": {"type": "string", "required": True}},
        "actors": {"writer": WRITER, "judge": JUDGE},
        "steps": [
            {
                "key": "understand",
                "name": "Understand",
                "kind": "intent",
                "actor": "writer",
                "prompt": "{request}",
                "max_attempts": 2,
                "branches": [],
                **intent_fields,
            },
            {
                "key": "answer",
                "name": "Answer",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Answer {request}: {steps.understand.response}",
                "branches": [
                    {
                        "name": "most_met",
                        "priority": 1,
                        "when": {
                            "type": "criteria_met",
                            "operator": "at_least",
                            "value": 0.75,
                            "intent_step": "understand",
                            "evaluator": "judge",
                        },
                        "action": "QUALITY_APPROVED",
                        "target": "@complete",
                    }
                ],
            },
        ],
    }


def test_it_exports_the_intent_step_and_criteria_met_it_imported(user: Any, actors: Any) -> None:
    recipe = recipe_import(user=user, data=document()).recipe
    assert document_from_recipe(recipe) == document()


def test_the_import_refuses_attempts_out_of_bounds(user: Any, actors: Any) -> None:
    with pytest.raises(RecipeRejected) as refused:
        recipe_import(user=user, data=document(max_attempts=0))
    assert any(e.startswith("steps[0].max_attempts:") for e in refused.value.errors)


def test_the_json_schema_names_the_kind_and_its_attempts() -> None:
    step = json_schema()["$defs"]["Step"]["properties"]
    assert "intent" in step["kind"]["enum"]
    assert "max_attempts" in step
