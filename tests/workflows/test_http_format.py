"""An http step and an http_status branch go through import, export and the JSON Schema."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.adapters import document_from_recipe
from workflows.recipe_format import json_schema
from workflows.services import recipe_import
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def document(**fields: Any) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": "http-format",
        "name": "HTTP format",
        "description": "",
        "inputs": {"item": {"type": "string", "required": True}},
        "actors": {},
        "steps": [
            {
                "key": "create",
                "name": "Create",
                "kind": "http",
                "prompt": "",
                "timeout_s": 20,
                "method": "POST",
                "url": "https://api.example.com/items",
                "headers": {"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API_TOKEN}"},
                "query": {"dry": "false"},
                "body": {"name": "{item}", "tags": ["new"]},
                "secret_env": ["BRANCHLINE_SECRET_API_TOKEN"],
                "retries": 3,
                "branches": [
                    {
                        "name": "conflict",
                        "priority": 1,
                        "when": {"type": "http_status", "operator": "is", "value": 409},
                        "action": "ERROR_HANDLER",
                        "target": "@end",
                    }
                ],
                **fields,
            }
        ],
    }


def test_it_exports_the_http_step_and_its_status_branch_as_imported(user: Any) -> None:
    recipe = recipe_import(user=user, data=document()).recipe
    assert document_from_recipe(recipe) == document()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"url": "file:///etc/passwd"}, "steps[0].url: must begin with http:// or https://"),
        (
            {"secret_env": []},
            "steps[0].headers.Authorization: {secrets.BRANCHLINE_SECRET_API_TOKEN}: add BRANCHLINE_SECRET_API_TOKEN",
        ),
        ({"retries": 99}, "steps[0].retries:"),
    ],
)
def test_the_import_refuses_a_bad_request(user: Any, fields: dict[str, Any], error: str) -> None:
    with pytest.raises(RecipeRejected) as refused:
        recipe_import(user=user, data=document(**fields))
    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors


def test_the_json_schema_names_the_kind_and_its_fields() -> None:
    step = json_schema()["$defs"]["Step"]["properties"]
    assert "http" in step["kind"]["enum"]
    assert {"method", "url", "headers", "query", "body", "secret_env", "retries"} <= set(step)
