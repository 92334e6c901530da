from __future__ import annotations

import copy
from typing import Any

import pytest

from workflows.engine import EngineError, evaluate_tree, validate_tree
from workflows.engine.decision_tree import priority_problems

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


# -- the fallback leaf ---------------------------------------------------------------------

WITH_FALLBACK: dict[str, Any] = {**REFERENCE_TREE, "fallback": "needs_review"}


@pytest.mark.parametrize(
    ("facts", "why"),
    [
        ({}, "node 1: unsafe_pages missing -> fallback"),
        (
            {"unsafe_pages": "many"},
            "node 1: unsafe_pages is not a list or a count: 'many' -> fallback",
        ),
        ({"unsafe_pages": []}, "node 2: pii missing -> fallback"),
        (
            {"pii": [], "detect_failures": {"unsafe_pages": "the judge gave no verdict"}},
            "node 1: unsafe_pages not detected: the judge gave no verdict -> fallback",
        ),
        ({"unsafe_pages": [], "pii": []}, "node 3: field image_count missing -> fallback"),
        ({"unsafe_pages": [], "pii": [], "image_count": 2}, "node 3: keywords missing -> fallback"),
    ],
)
def test_a_tree_takes_its_fallback_when_a_fact_is_missing_and_says_why(
    facts: dict[str, Any], why: str
) -> None:
    outcome = evaluate_tree(WITH_FALLBACK, facts)

    assert outcome.leaf == "needs_review" and outcome.fell_back
    assert outcome.trace[-2] == why
    assert outcome.trace[-1] == "leaf needs_review"


def test_a_tree_with_a_fallback_walks_as_before_when_every_fact_is_there() -> None:
    facts = {"unsafe_pages": [], "pii": [], "image_count": 1, "keywords": [{"word": "x"}]}

    outcome = evaluate_tree(WITH_FALLBACK, facts)

    assert outcome.leaf == "image_focused" and not outcome.fell_back


def test_without_a_fallback_a_missing_fact_is_false_as_before() -> None:
    outcome = evaluate_tree(REFERENCE_TREE, {})

    assert outcome.leaf == "base_classification"
    assert outcome.trace[0] == "node 1: unsafe_pages missing -> if_false"


def test_it_refuses_a_fallback_that_is_not_a_leaf_name() -> None:
    assert validate_tree({**REFERENCE_TREE, "fallback": 3}, "steps[0].tree") == [
        "steps[0].tree.fallback: must be a leaf name (a non-empty string)"
    ]


def test_it_reads_the_keyword_detectors_findings() -> None:
    full_width = "\uff33\uff25\uff23\uff32\uff25\uff34"  # SECRET in full-width letters
    condition = {"type": "check_keywords", "keywords": [full_width]}
    tree = {
        "type": "node",
        "condition": condition,
        "if_true": {"type": "leaf", "prompt": "yes"},
        "if_false": {"type": "leaf", "prompt": "no"},
    }
    found = [{"word": "Secret", "page": 1, "count": 2}, {"word": "secret", "page": 2, "count": 1}]

    outcome = evaluate_tree(tree, {"keywords": found})

    assert outcome.leaf == "yes" and outcome.trace[0] == "node: keywords Secret, secret -> if_true"


# -- priorities ----------------------------------------------------------------------------


def test_it_accepts_priorities_that_follow_the_order_the_tree_is_evaluated_in() -> None:
    assert priority_problems(REFERENCE_TREE, "tree") == []


def test_it_refuses_a_priority_that_says_a_node_comes_before_its_parent() -> None:
    tree = copy.deepcopy(REFERENCE_TREE)
    tree["tree"]["if_false"]["priority"] = 1  # the root's is 1 too
    tree["tree"]["if_false"]["if_false"]["priority"] = 0

    assert priority_problems(tree, "steps[0].tree") == [
        "steps[0].tree.tree.if_false.priority: 1 is evaluated after priority 1 above it: "
        "a node is evaluated after its parents, so its priority must be greater",
        "steps[0].tree.tree.if_false.if_false.priority: 0 is evaluated after priority 1 above "
        "it: a node is evaluated after its parents, so its priority must be greater",
    ]
