from __future__ import annotations

from typing import Any

import pytest

from workflows.engine import EngineError, evaluate_tree, validate_tree

# The example tree of the reference notes on configurable decision trees, verbatim.
REFERENCE_TREE: dict[str, Any] = {
    "version": "1.0",
    "description": "Default decision tree for prompt selection",
    "tree": {
        "type": "node",
        "priority": 1,
        "condition": {"type": "check_safety", "operator": "has_unsafe_pages"},
        "if_true": {"type": "leaf", "prompt": "safety_focused"},
        "if_false": {
            "type": "node",
            "priority": 2,
            "condition": {
                "type": "check_pii",
                "operator": "has_high_risk_pii",
                "pii_types": [
                    "SSN",
                    "CREDIT_CARD",
                    "CREDIT_CARD_NUMBER",
                    "US_BANK_ACCOUNT",
                    "US_ROUTING_NUMBER",
                    "BANK_ACCOUNT",
                ],
                "exclude_types": ["DRIVER_LICENSE", "DRIVER"],
            },
            "if_true": {"type": "leaf", "prompt": "pii_focused"},
            "if_false": {
                "type": "node",
                "priority": 3,
                "condition": {
                    "type": "check_images_and_keywords",
                    "operator": "and",
                    "conditions": [
                        {
                            "type": "check_count",
                            "field": "image_count",
                            "operator": "greater_than",
                            "value": 0,
                        },
                        {"type": "check_keywords", "operator": "has_keywords"},
                    ],
                },
                "if_true": {"type": "leaf", "prompt": "image_focused"},
                "if_false": {"type": "leaf", "prompt": "base_classification"},
            },
        },
    },
}


@pytest.mark.parametrize(
    ("facts", "leaf", "trace"),
    [
        (
            {
                "unsafe_pages": [3, 7],
                "pii": [{"type": "SSN"}],
                "image_count": 2,
                "keywords": ["gun"],
            },
            "safety_focused",
            ["node 1: 2 unsafe pages -> if_true", "leaf safety_focused"],
        ),
        (
            {
                "unsafe_pages": 0,
                "pii": [{"type": "DRIVER_LICENSE"}, {"type": "SSN"}],
                "image_count": 2,
            },
            "pii_focused",
            [
                "node 1: 0 unsafe pages -> if_false",
                "node 2: high-risk PII SSN -> if_true",
                "leaf pii_focused",
            ],
        ),
        (
            {
                "unsafe_pages": [],
                "pii": ["DRIVER_LICENSE", "EMAIL"],
                "image_count": 3,
                "keywords": ["weapon"],
            },
            "image_focused",
            [
                "node 1: 0 unsafe pages -> if_false",
                "node 2: no high-risk PII (found: DRIVER_LICENSE, EMAIL) -> if_false",
                "node 3: and: [field image_count 3 > 0; keywords weapon] -> if_true",
                "leaf image_focused",
            ],
        ),
        (
            {"unsafe_pages": [], "pii": [], "image_count": 0, "keywords": ["weapon"]},
            "base_classification",
            [
                "node 1: 0 unsafe pages -> if_false",
                "node 2: no high-risk PII (found: none) -> if_false",
                "node 3: and: [field image_count 0 not > 0] -> if_false",
                "leaf base_classification",
            ],
        ),
    ],
)
def test_it_walks_the_reference_tree_to_the_leaf_each_document_calls_for(
    facts: dict[str, Any], leaf: str, trace: list[str]
) -> None:
    outcome = evaluate_tree(REFERENCE_TREE, facts)
    assert (outcome.leaf, outcome.trace) == (leaf, trace)


def test_it_reaches_the_base_leaf_for_a_document_with_no_facts() -> None:
    outcome = evaluate_tree(REFERENCE_TREE, {})
    assert outcome.leaf == "base_classification"
    assert outcome.trace[0] == "node 1: unsafe_pages missing -> if_false"


def test_it_accepts_a_bare_node_as_the_tree() -> None:
    assert evaluate_tree(REFERENCE_TREE["tree"], {"unsafe_pages": 1}).leaf == "safety_focused"


def _node(condition: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "node",
        "condition": condition,
        "if_true": {"type": "leaf", "prompt": "yes"},
        "if_false": {"type": "leaf", "prompt": "no"},
    }


@pytest.mark.parametrize(
    ("condition", "facts", "leaf"),
    [
        (
            {"type": "or", "conditions": [{"type": "check_keywords"}, {"type": "check_safety"}]},
            {"keywords": ["x"]},
            "yes",
        ),
        (
            {"type": "check_either", "operator": "or", "conditions": [{"type": "check_keywords"}]},
            {"keywords": []},
            "no",
        ),
        ({"type": "not", "conditions": [{"type": "check_keywords"}]}, {"keywords": []}, "yes"),
        (
            {"type": "check_neither", "operator": "not", "conditions": [{"type": "check_safety"}]},
            {"unsafe_pages": 2},
            "no",
        ),
        ({"type": "check_pii", "operator": "has_high_risk_pii"}, {"pii": ["email"]}, "yes"),
        ({"type": "check_pii", "pii_types": ["ssn"]}, {"pii": [{"type": "Ssn"}]}, "yes"),
        (
            {"type": "check_pii", "pii_types": ["SSN"], "exclude_types": ["SSN"]},
            {"pii": ["SSN"]},
            "no",
        ),
        (
            {"type": "check_keywords", "operator": "has_keywords", "keywords": ["bomb"]},
            {"keywords": ["Bomb", "cake"]},
            "yes",
        ),
        ({"type": "check_keywords", "keywords": ["bomb"]}, {"keywords": ["cake"]}, "no"),
        ({"type": "check_keywords"}, {"keywords": 2}, "yes"),
        (
            {
                "type": "check_count",
                "field": "doc.pages",
                "operator": "less_than_or_equal",
                "value": 10,
            },
            {"doc": {"pages": 10}},
            "yes",
        ),
        (
            {"type": "check_count", "field": "images", "operator": "greater_than", "value": 1},
            {"images": ["a", "b"]},
            "yes",
        ),
        (
            {"type": "check_count", "field": "images", "operator": "greater_than", "value": 1},
            {},
            "no",
        ),
    ],
)
def test_it_evaluates_every_tree_condition(
    condition: dict[str, Any], facts: dict[str, Any], leaf: str
) -> None:
    assert evaluate_tree(_node(condition), facts).leaf == leaf


@pytest.mark.parametrize(
    ("tree", "errors"),
    [
        ([], ["t: must be an object"]),
        ({"version": "1.0"}, ["t.tree: is required"]),
        (
            {"tree": {"type": "branch"}},
            ["t.tree.type: unknown node type 'branch'; expected node or leaf"],
        ),
        ({"type": "leaf", "prompt": ""}, ["t.prompt: must be a non-empty string"]),
        (
            {"type": "node", "priority": "1", "condition": {"type": "check_safety"}},
            ["t.priority: must be an integer", "t.if_true: is required", "t.if_false: is required"],
        ),
        (_node({"operator": "and"}), ["t.condition.type: is required"]),
        (
            _node({"type": "check_safety", "operator": "is_unsafe"}),
            [
                "t.condition.operator: unknown operator 'is_unsafe'; check_safety takes has_unsafe_pages"
            ],
        ),
        (
            _node({"type": "check_pii", "pii_types": "SSN"}),
            ["t.condition.pii_types: must be a list of strings"],
        ),
        (
            _node({"type": "and", "conditions": []}),
            ["t.condition.conditions: and needs a non-empty list of conditions"],
        ),
        (
            _node({"type": "not", "conditions": [{"type": "check_safety"}, {"type": "check_pii"}]}),
            ["t.condition.conditions: not takes exactly one condition, got 2"],
        ),
        (
            _node({"type": "check_count", "operator": "more", "value": "1"}),
            [
                "t.condition.field: is required",
                "t.condition.operator: unknown operator 'more'; expected one of: less_than, less_equal, "
                "greater_than, greater_equal, equals, not_equals, greater_than_or_equal, less_than_or_equal",
                "t.condition.value: must be a number, got '1'",
            ],
        ),
        (
            _node({"type": "or", "conditions": [{"type": "check_mood"}]}),
            [
                "t.condition.conditions[0].type: unknown condition type 'check_mood'; expected one of: "
                "check_safety, check_pii, check_keywords, check_count, and, or, not"
            ],
        ),
    ],
)
def test_it_reports_every_error_of_an_invalid_tree_with_its_path(
    tree: object, errors: list[str]
) -> None:
    assert validate_tree(tree, "t") == errors


def test_it_accepts_the_reference_tree() -> None:
    assert validate_tree(REFERENCE_TREE, "t") == []


def test_it_refuses_a_tree_deeper_than_the_limit() -> None:
    tree: dict[str, Any] = {"type": "leaf", "prompt": "end"}
    for _ in range(100):
        tree = {
            "type": "node",
            "condition": {"type": "check_safety"},
            "if_true": tree,
            "if_false": {"type": "leaf", "prompt": "out"},
        }
    assert validate_tree(tree, "t") == [
        "t" + ".if_true" * 65 + ": the tree is deeper than 64 levels"
    ]


def test_it_checks_a_tree_whose_subtrees_are_shared_in_bounded_time() -> None:
    # YAML aliases can make every node's two branches the same object: 2**40 paths.
    tree: dict[str, Any] = {"type": "leaf", "prompt": "end"}
    for _ in range(40):
        tree = {
            "type": "node",
            "condition": {"type": "check_safety"},
            "if_true": tree,
            "if_false": tree,
        }
    errors = validate_tree(tree, "t")
    assert len(errors) == 1
    assert errors[0].endswith(": the tree has more than 2000 nodes and conditions")


def test_it_refuses_to_walk_an_invalid_tree() -> None:
    with pytest.raises(EngineError, match=r"tree\.tree: is required"):
        evaluate_tree({"version": "1.0"}, {})
