"""Bad input to the editor's panels is a 400 or a form error, never a 500: hand-made
requests, documents that are not recipes, and generated documents and form fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows.models import Recipe

from .conftest import draft, htmx_post

pytestmark = pytest.mark.django_db


NOT_A_DOCUMENT = [
    {"document": "{not json"},
    {"document": "[1, 2]"},
    {"document": '{"steps": "no"}'},
    {"document": '{"steps": [1]}'},
    {},
]
BAD_PLACES = [
    {"document": '{"steps": [{"key": "a"}]}', "step": "7"},
    {"document": '{"steps": [{"key": "a"}]}', "step": "-1"},
    {"document": '{"steps": [{"key": "a"}]}', "step": "x"},
]
BAD_BRANCHES = [
    {"document": '{"steps": [{"key": "a", "branches": "x"}]}', "step": "0", "branch": "0"},
    {"document": '{"steps": [{"key": "a", "branches": []}]}', "step": "0", "branch": "0"},
    {"document": '{"steps": [{"key": "a", "branches": [1]}]}', "step": "0", "branch": "0"},
]
DOCUMENT_PANELS = [
    "recipe-check",
    "recipe-step-panel",
    "recipe-branch-panel",
    "recipe-settings-panel",
]


def logged_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


class TestBadInput:
    @pytest.mark.parametrize("name", DOCUMENT_PANELS)
    @pytest.mark.parametrize("data", NOT_A_DOCUMENT)
    def test_a_document_that_is_not_one_gets_a_400(
        self, story: Recipe, author: Any, name: str, data: dict
    ) -> None:
        response = logged_in(author).post(reverse(name, args=[story.slug]), {"apply": "1", **data})
        assert response.status_code == 400
        assert b"Reload the page" in response.content

    @pytest.mark.parametrize("name", ["recipe-step-panel", "recipe-branch-panel"])
    @pytest.mark.parametrize("data", BAD_PLACES)
    def test_a_step_that_is_not_there_gets_a_400(
        self, story: Recipe, author: Any, name: str, data: dict
    ) -> None:
        response = logged_in(author).post(reverse(name, args=[story.slug]), {"apply": "1", **data})
        assert response.status_code == 400

    @pytest.mark.parametrize("data", BAD_BRANCHES)
    def test_a_branch_that_is_not_there_gets_a_400(
        self, story: Recipe, author: Any, data: dict
    ) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        assert logged_in(author).post(url, {"apply": "1", **data}).status_code == 400

    @pytest.mark.parametrize(
        "step",
        [
            {
                "key": 5,
                "name": ["x"],
                "kind": "robot",
                "actor": 3,
                "prompt": None,
                "validation": "yes",
                "tree": 1,
                "routes": {"a": 1},
                "options": "approve",
            },
            {},
        ],
    )
    def test_a_step_full_of_wrong_types_opens_and_applies_without_a_500(
        self, story: Recipe, author: Any, step: dict
    ) -> None:
        client = logged_in(author)
        url = reverse("recipe-step-panel", args=[story.slug])
        doc = json.dumps({"steps": [step]})
        assert client.post(url, {"document": doc, "step": "0"}).status_code == 200
        applied = client.post(
            url,
            {
                "document": doc,
                "step": "0",
                "apply": "1",
                "key": "a",
                "name": "A",
                "kind": "llm",
                "sequence": "1",
            },
        )
        assert applied.status_code == 200

    def test_a_branch_full_of_wrong_types_opens_and_applies_without_a_500(
        self, story: Recipe, author: Any
    ) -> None:
        client = logged_in(author)
        url = reverse("recipe-branch-panel", args=[story.slug])
        doc = json.dumps(
            {
                "steps": [
                    {
                        "key": "a",
                        "branches": [
                            {"name": 1, "priority": "high", "when": [1], "action": 5, "params": "x"}
                        ],
                    }
                ]
            }
        )
        assert client.post(url, {"document": doc, "step": "0", "branch": "0"}).status_code == 200
        applied = client.post(
            url,
            {
                "document": doc,
                "step": "0",
                "branch": "0",
                "apply": "1",
                "c-type": "and",
                "c-count": "999999",
                "name": "b",
                "priority": "1",
                "action": "CONTINUE",
            },
        )
        assert applied.status_code == 200

    def test_a_check_of_a_document_full_of_wrong_types_lists_errors(
        self, story: Recipe, web: Client
    ) -> None:
        doc = {
            "name": 5,
            "inputs": [],
            "actors": "x",
            "steps": [{"key": 3, "kind": "robot", "branches": [{"when": [], "priority": "high"}]}],
        }
        response = htmx_post(web, reverse("recipe-check", args=[story.slug]), doc)
        assert response.status_code == 200
        assert len(response.context["errors"]) >= 4

    def test_get_is_not_allowed_on_panels(self, story: Recipe, web: Client) -> None:
        assert web.get(reverse("recipe-step-panel", args=[story.slug])).status_code == 405


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "name",
        "key",
        "kind",
        "actor",
        "prompt",
        "branches",
        "when",
        "type",
        "operator",
        "value",
        "conditions",
        "priority",
        "action",
        "target",
        "params",
        "tree",
        "routes",
        "validation",
    ]
)
STEPISH = st.recursive(
    JSON,
    lambda inner: st.dictionaries(KEYS, inner, max_size=6) | st.lists(inner, max_size=3),
    max_leaves=20,
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEPISH, min_size=1, max_size=3), inputs=JSON, actors=JSON)
def test_no_document_makes_a_panel_fail(
    story: Recipe, author: Any, steps: list, inputs: Any, actors: Any
) -> None:
    client = logged_in(author)
    doc = json.dumps({"steps": steps, "inputs": inputs, "actors": actors, "name": "x"})
    for name, extra in (
        ("recipe-check", {}),
        ("recipe-step-panel", {"step": "0"}),
        (
            "recipe-step-panel",
            {"step": "0", "apply": "1", "key": "a", "name": "A", "kind": "llm", "sequence": "1"},
        ),
        (
            "recipe-step-panel",
            {"step": "0", "apply": "1", "key": "a", "kind": "llm", "prompt": "{x} {{ {y.z}"},
        ),
        ("recipe-branch-panel", {"step": "0", "branch": "0"}),
        ("recipe-branch-panel", {"step": "0", "branch": "0", "apply": "1", "name": "b"}),
        ("recipe-settings-panel", {}),
        ("recipe-settings-panel", {"apply": "1", "recipe-name": "x"}),
    ):
        response = client.post(reverse(name, args=[story.slug]), {"document": doc, **extra})
        assert response.status_code in (200, 400), (name, response.status_code)


FIELD_NAMES = st.sampled_from(
    [
        "name",
        "priority",
        "active",
        "action",
        "target",
        "retry_suffix",
        "max_retries",
        "alternative_actor",
        "other_params",
        "c-type",
        "c-prev_type",
        "c-operator",
        "c-value",
        "c-flags",
        "c-unit",
        "c-evaluator",
        "c-field",
        "c-extra",
        "c-count",
        "c.0-type",
        "c.0-prev_type",
        "c.0-count",
        "c.0.0-type",
        "c.0-value",
        "c.1-type",
        "_op",
        "key",
        "kind",
        "actor",
        "prompt",
        "sequence",
        "timeout_s",
        "validation_enabled",
        "threshold",
        "judge",
        "tree",
        "routes",
        "leaf_targets",
        "options",
    ]
)
FIELD_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "and",
            "or",
            "not",
            "length_check",
            "pattern_match",
            "default",
            "5",
            "-1",
            "999999",
            "add:c",
            "remove:c.0",
            "refresh",
            "[]",
            "{}",
            '{"a": 1}',
            "+x",
            "REQUEST_MORE_DETAIL",
            "@repeat",
            "review",
            "true",
            "(a",
        ]
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(fields=st.dictionaries(FIELD_NAMES, FIELD_VALUES, max_size=14))
def test_no_form_input_makes_a_panel_fail(story: Recipe, author: Any, fields: dict) -> None:
    client = logged_in(author)
    doc = json.dumps(draft(story))
    for name, place in (
        ("recipe-step-panel", {"step": "0"}),
        ("recipe-branch-panel", {"step": "0", "branch": "2"}),
    ):
        response = client.post(
            reverse(name, args=[story.slug]), {"document": doc, "apply": "1", **place, **fields}
        )
        assert response.status_code == 200, (name, fields)
