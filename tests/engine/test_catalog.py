"""The catalog the editor, lint and docs read, and the one Python renderer of summaries."""

from __future__ import annotations

import json

import pytest

from workflows.engine import catalog, condition_summary

FIELD_KINDS = {
    "text",
    "regex",
    "number",
    "integer",
    "boolean",
    "choice",
    "actor",
    "path",
    "step",
    "list",
    "template",
}

# The table both renderers are held to: the Python one here, the editor's JavaScript one in
# the browser tests.
SUMMARIES = [
    ({"type": "length_check", "operator": "less_than", "value": 200}, "len < 200"),
    (
        {"type": "length_check", "operator": "greater_than_or_equal", "value": 3, "unit": "words"},
        "len ≥ 3 words",
    ),
    ({"type": "length_check", "operator": "less_equal", "value": 5, "unit": "chars"}, "len ≤ 5"),
    (
        {"type": "pattern_match", "operator": "regex_match", "value": "(error|failed)"},
        "/(error|failed)/",
    ),
    ({"type": "pattern_match", "operator": "regex_match", "value": "x", "flags": "i"}, "/x/i"),
    ({"type": "pattern_match", "operator": "regex_not_match", "value": "x"}, "not /x/"),
    ({"type": "pattern_match", "operator": "contains", "value": "yes"}, 'has "yes"'),
    ({"type": "pattern_match", "operator": "not_contains", "value": "sorry"}, 'lacks "sorry"'),
    ({"type": "pattern_match", "operator": "equals", "value": "ok"}, '= "ok"'),
    (
        {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"},
        "judge ≥ 8",
    ),
    ({"type": "ai_evaluation", "operator": "less_than", "value": 6.0}, "judge < 6"),
    (
        {"type": "ai_evaluation", "operator": "not_equals", "value": 7.5, "evaluator": "critic"},
        "critic ≠ 7.5",
    ),
    # The reference seeds' spelling of the evaluator.
    (
        {"type": "ai_evaluation", "operator": "less_than", "value": 6, "evaluator_actor": "critic"},
        "critic < 6",
    ),
    ({"type": "human_decision", "operator": "user_choice", "value": "approve"}, "human: approve"),
    ({"type": "human_decision", "value": ["approve", "revise"]}, "human: approve|revise"),
    ({"type": "execution_timeout", "operator": "equals", "value": True}, "timeout"),
    ({"type": "execution_timeout", "operator": "equals", "value": False}, "no timeout"),
    ({"type": "execution_timeout"}, "timeout"),
    ({"type": "execution_error", "operator": "equals", "value": True}, "error"),
    ({"type": "execution_error", "operator": "equals", "value": "false"}, "no error"),
    ({"type": "execution_error", "operator": "contains", "value": "429"}, 'error has "429"'),
    # The true/false display map is not applied to the text `contains` looks for.
    ({"type": "execution_error", "operator": "contains", "value": "true"}, 'error has "true"'),
    ({"type": "execution_error", "operator": "contains", "value": "false"}, 'error has "false"'),
    ({"type": "execution_error", "operator": "contains"}, 'error has ""'),
    ({"type": "error_severity", "operator": "equals", "value": "CRITICAL"}, "severity CRITICAL"),
    (
        {"type": "error_severity", "operator": "in", "value": ["RETRIABLE", "REPLANNING"]},
        "severity ∈ RETRIABLE|REPLANNING",
    ),
    (
        {"type": "field_compare", "operator": "greater_than", "field": "image_count", "value": 3},
        "image_count > 3",
    ),
    ({"type": "field_compare", "operator": "equals", "value": "x"}, "? = x"),
    ({"type": "check_count", "operator": "equals", "field": "n", "value": 0}, "n = 0"),
    ({"type": "content_type", "operator": "is", "value": "code"}, "is code"),
    ({"type": "content_type", "operator": "is_not", "value": "json"}, "is not json"),
    ({"type": "route_selected", "operator": "includes", "value": "billing"}, "route: billing"),
    ({"type": "retrieval", "operator": "greater_equal", "value": 1}, "hits ≥ 1"),
    ({"type": "retrieval", "operator": "less_than", "value": 1, "measure": "hits"}, "hits < 1"),
    (
        {"type": "retrieval", "operator": "greater_equal", "value": 0.5, "measure": "top_score"},
        "top score ≥ 0.5",
    ),
    ({"type": "cites_source", "operator": "cites"}, "cites a source"),
    ({"type": "cites_source", "operator": "cites_none"}, "cites no source"),
    ({"type": "classification_failed"}, "unclassified"),
    ({"type": "classification_failed", "operator": "equals", "value": False}, "classified"),
    ({"type": "confidence", "operator": "less_than", "value": 0.7}, "confidence < 0.7"),
    ({"type": "validation_passed", "operator": "equals", "value": True}, "validated"),
    ({"type": "validation_passed", "value": False}, "not validated"),
    ({"type": "schema_valid"}, "schema valid"),
    ({"type": "schema_valid", "value": False}, "schema invalid"),
    ({"type": "fallback_used"}, "fallback"),
    ({"type": "fallback_used", "value": "false"}, "no fallback"),
    ({"type": "attempts", "operator": "greater_equal", "value": 3}, "attempts ≥ 3"),
    ({"type": "http_status", "operator": "is", "value": "2xx"}, "HTTP = 2xx"),
    ({"type": "http_status", "operator": "is_not", "value": 404}, "HTTP ≠ 404"),
    ({"type": "default"}, "default"),
    ({"type": "not", "conditions": [{"type": "default"}]}, "not (default)"),
    ({"type": "not", "conditions": []}, "not ()"),
    (
        {
            "type": "and",
            "conditions": [
                {"type": "length_check", "operator": "less_than", "value": 9},
                {"type": "or", "conditions": [{"type": "default"}, {"type": "default"}]},
            ],
        },
        "len < 9 and (default or default)",
    ),
    (
        {"type": "check_images", "operator": "or", "conditions": [{"type": "default"}]},
        "default",
    ),
    ({"type": "length_check", "operator": "and"}, "len and "),
    ({"type": "no_such_type"}, "no_such_type"),
]


@pytest.mark.parametrize(("when", "summary"), SUMMARIES)
def test_it_summarises_every_condition_type(when: dict, summary: str) -> None:
    assert condition_summary(when) == summary


def test_it_shortens_long_summaries() -> None:
    summary = condition_summary(
        {"type": "pattern_match", "operator": "contains", "value": "x" * 90}
    )
    assert len(summary) == 40
    assert summary.endswith("…")


@pytest.mark.parametrize(
    "garbage",
    [None, "text", 3, [], {"type": 5}, {}, {"type": []}, {"type": "and", "conditions": 5}],
)
def test_it_never_fails_on_a_condition_that_is_not_one(garbage: object) -> None:
    assert isinstance(condition_summary(garbage), str)


def test_the_catalog_is_json() -> None:
    published = catalog()
    assert json.loads(json.dumps(published)) == published


def test_it_lists_every_condition_type_with_its_operators_fields_and_summary() -> None:
    conditions = {c["type"]: c for c in catalog()["conditions"]}
    assert list(conditions) == [
        "pattern_match",
        "length_check",
        "ai_evaluation",
        "human_decision",
        "execution_timeout",
        "execution_error",
        "error_severity",
        "field_compare",
        "content_type",
        "route_selected",
        "classification_failed",
        "retrieval",
        "cites_source",
        "tool_called",
        "tool_error",
        "tool_result",
        "http_status",
        "budget",
        "confidence",
        "validation_passed",
        "schema_valid",
        "fallback_used",
        "attempts",
        "criteria_met",
        "format_matches",
        "default",
    ]
    assert conditions["field_compare"]["aliases"] == ["check_count"]
    assert conditions["length_check"]["operator_aliases"] == {
        "greater_than_or_equal": "greater_equal",
        "less_than_or_equal": "less_equal",
    }
    unit = next(f for f in conditions["length_check"]["fields"] if f["name"] == "unit")
    assert unit == {
        "name": "unit",
        "label": "Unit",
        "kind": "choice",
        "required": False,
        "choices": ["chars", "words"],
        "default": "chars",
        "help": "",
        "display": {"chars": "", "words": " words"},
        "aliases": [],
    }
    for condition in conditions.values():
        assert condition["label"] and condition["help"]
        assert condition["operators"], condition["type"]
        assert "*" in condition["summary"], condition["type"]
        for operator in condition["operators"]:
            assert set(operator) == {"name", "label", "symbol"}
        for field in condition["fields"]:
            assert field["kind"] in FIELD_KINDS, (condition["type"], field["name"])


def test_it_lists_the_combinators_step_kinds_and_actions() -> None:
    published = catalog()
    assert published["logical"] == ["and", "or", "not"]
    assert [s["kind"] for s in published["steps"]] == [
        "llm",
        "human",
        "decision_tree",
        "classify",
        "retrieve",
        "tool",
        "intent",
        "transform",
        "http",
    ]
    for kind in published["steps"]:
        assert kind["label"] and kind["help"]
        assert all(f["kind"] in FIELD_KINDS for f in kind["fields"])
    actions = {a["name"]: a for a in published["actions"]}
    assert actions["ENHANCE_PROMPT"]["repeats"] is True
    assert actions["CONTINUE"] == {
        "name": "CONTINUE",
        "label": "Continue",
        "repeats": False,
        "counts_as": "neutral",
    }
    assert published["action_aliases"]["RETRY_DIFFERENT_ACTOR"] == "RETRY_WITH_DIFFERENT_ACTOR"


def test_each_condition_type_says_how_its_branch_reads_on_the_canvas() -> None:
    words = {spec["type"]: spec["words"] for spec in catalog()["conditions"]}

    assert words["default"] == "otherwise"
    assert words["human_decision"] == "{value}"
    assert words["ai_evaluation"] == "if {summary}"


def test_it_publishes_the_bands_of_branch_priorities() -> None:
    bands = {b["name"]: b for b in catalog()["priority_bands"]}

    assert bands["flow"] == {"name": "flow", "label": "Flow control", "low": 51, "high": 100}
    assert bands["defaults"]["high"] is None
