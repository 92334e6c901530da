from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.builders import branch, recipe, step
from workflows.engine import RecipeInvalid, parse_recipe
from workflows.engine.lint import lint_recipe
from workflows.engine.regex import Pattern

REFERENCE_TREE = {
    "version": "1.0",
    "tree": {
        "type": "node",
        "priority": 1,
        "condition": {"type": "check_safety", "operator": "has_unsafe_pages"},
        "if_true": {"type": "leaf", "prompt": "safety_focused"},
        "if_false": {"type": "leaf", "prompt": "base_classification"},
    },
}


def design_example() -> dict[str, Any]:
    """Return the example recipe of DESIGN §3, completed with the steps it names."""
    return recipe(
        step(
            "generate_story",
            branch(
                "story_too_short",
                1,
                {"type": "length_check", "operator": "less_than", "value": 200},
                "REQUEST_MORE_DETAIL",
                "@repeat",
                params={
                    "retry_suffix": "Please write a longer, more detailed story.",
                    "max_retries": 2,
                },
            ),
            branch(
                "inappropriate_content",
                2,
                {
                    "type": "pattern_match",
                    "operator": "regex_match",
                    "value": "(violence|inappropriate)",
                },
                "END_RECIPE",
                "@end",
            ),
            branch(
                "high_quality_story",
                3,
                {
                    "type": "ai_evaluation",
                    "operator": "greater_equal",
                    "value": 8,
                    "evaluator": "judge",
                    "prompt": "Rate story quality 1-10",
                },
                "QUALITY_APPROVED",
                "@complete",
            ),
            branch(
                "default_evaluation",
                999,
                {"type": "default"},
                "DEFAULT_CONTINUE",
                "evaluate_quality",
            ),
            prompt="Write a creative story about {topic}",
            timeout_s=300,
            validation={"threshold": 0.75, "max_attempts": 5, "judge": "judge", "fallback": "…"},
            position={"x": 80, "y": 120},
        ),
        step(
            "evaluate_quality",
            branch(
                "low_quality",
                1,
                {
                    "type": "ai_evaluation",
                    "operator": "less_than",
                    "value": 6,
                    "evaluator": "judge",
                },
                "HUMAN_REVIEW_NEEDED",
                "human_review",
            ),
            actor="judge",
            prompt="Rate this story quality 1-10 and explain why: {step1_response}",
        ),
        step(
            "human_review",
            branch(
                "approved",
                1,
                {"type": "human_decision", "operator": "user_choice", "value": "approve"},
                "QUALITY_APPROVED",
                "@complete",
            ),
            branch(
                "revise",
                2,
                {"type": "human_decision", "operator": "user_choice", "value": "revise|reject"},
                "CONTINUE",
                "revise_story",
            ),
            kind="human",
            actor="editors",
            prompt="Please review this story: {steps.generate_story.response}",
        ),
        step(
            "revise_story",
            prompt="Revise the story based on this feedback: {step3_response}\n\nOriginal: {step1_response}",
        ),
        slug="creative-writing-qc",
        name="Creative Writing with Quality Control",
        description="…",
        actors={"writer": "llama3.2:latest", "judge": "qwen3:latest", "editors": "@human:editors"},
    )


def test_it_parses_the_design_example_into_a_graph() -> None:
    graph = parse_recipe(design_example())
    assert graph.slug == "creative-writing-qc"
    assert [s.key for s in graph.steps] == [
        "generate_story",
        "evaluate_quality",
        "human_review",
        "revise_story",
    ]
    first = graph.step("generate_story")
    assert [b.name for b in first.branches] == [
        "story_too_short",
        "inappropriate_content",
        "high_quality_story",
        "default_evaluation",
    ]
    assert first.timeout_s == 300
    assert first.validation == {
        "threshold": 0.75,
        "max_attempts": 5,
        "rule_base": 0.5,
        "rule_weight": 0.3,
        "judge_weight": 0.7,
        "judge": "judge",
        "fallback": "…",
    }
    assert first.position == {"x": 80, "y": 120}
    assert isinstance(first.branches[1].when.prepared, Pattern)
    assert graph.step("evaluate_quality").branches[0].action == "HUMAN_REVIEW"
    assert graph.step("human_review").options == ("approve", "reject", "revise")
    assert graph.step("human_review").escalate_to is None
    assert graph.index("human_review") == 2
    assert graph.next_in_sequence("human_review") == graph.step("revise_story")
    assert graph.next_in_sequence("revise_story") is None
    assert graph.last_step().key == "revise_story"


def test_it_reads_a_human_steps_escalation() -> None:
    doc = design_example()
    doc["steps"][2]["escalate_to"] = "editors"
    assert parse_recipe(doc).step("human_review").escalate_to == "editors"
    doc["steps"][2]["escalate_to"] = ""  # no escalation
    assert parse_recipe(doc).step("human_review").escalate_to is None


def test_a_human_decision_after_a_step_without_options_may_name_any_option() -> None:
    doc = design_example()
    doc["steps"][0]["branches"][0]["when"] = {"type": "human_decision", "value": "accept"}
    when = parse_recipe(doc).step("generate_story").branches[0].when
    assert (when.type, when.value) == ("human_decision", "accept")


def test_it_sorts_branches_by_priority_and_canonicalises_aliases() -> None:
    graph = parse_recipe(
        recipe(
            step(
                "a",
                branch(
                    "late",
                    20,
                    {
                        "type": "check_count",
                        "field": "n",
                        "operator": "greater_than_or_equal",
                        "value": "2",
                    },
                ),
                branch("retry", 10, {"type": "default"}, "retry_different_actor", "a"),
            )
        )
    )
    late, retry = graph.steps[0].branches[1], graph.steps[0].branches[0]
    assert (retry.name, retry.action, retry.target) == (
        "retry",
        "RETRY_WITH_DIFFERENT_ACTOR",
        "@repeat",
    )
    assert (late.when.type, late.when.operator, late.when.value) == (
        "field_compare",
        "greater_equal",
        2,
    )
    assert late.when.fields == {"field": "n"}


def test_it_accepts_both_forms_of_logical_conditions() -> None:
    operands = [{"type": "length_check", "operator": "less_than", "value": 5}]
    graph = parse_recipe(
        recipe(
            step(
                "a",
                branch("one", 1, {"type": "or", "conditions": operands}),
                branch("two", 2, {"type": "check_short", "operator": "or", "conditions": operands}),
            )
        )
    )
    one, two = graph.steps[0].branches
    assert one.when == two.when
    assert one.when.type == "or" and len(one.when.conditions) == 1


def test_it_reads_a_decision_tree_step_and_a_classify_step() -> None:
    graph = parse_recipe(
        recipe(
            step(
                "route",
                kind="decision_tree",
                actor=None,
                prompt="",
                tree=REFERENCE_TREE,
                leaf_targets={"safety_focused": "@end", "base_classification": "classify"},
            ),
            step(
                "classify",
                kind="classify",
                routes=[
                    {
                        "name": "billing",
                        "instructions": "Questions about invoices",
                        "examples": [{"text": "Where is my invoice?", "selected": True}],
                    },
                    {"name": "respond", "always_active": True},
                ],
                bypass=False,
                max_reclassify=1,
            ),
        )
    )
    tree_step, classify_step = graph.steps
    assert tree_step.tree == REFERENCE_TREE
    assert tree_step.leaf_targets == {"safety_focused": "@end", "base_classification": "classify"}
    assert [r.name for r in classify_step.routes] == ["billing", "respond"]
    assert classify_step.routes[0].examples[0].selected is True
    assert classify_step.routes[1].always_active is True
    assert classify_step.max_reclassify == 1


def _bad(mutate: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    doc = design_example()
    mutate(doc)
    return doc


def _first(doc: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = doc["steps"][0]
    return first


def _when(doc: dict[str, Any], i: int = 0) -> dict[str, Any]:
    when: dict[str, Any] = _first(doc)["branches"][i]["when"]
    return when


def _set(obj: dict[str, Any], /, **values: Any) -> None:
    obj.update(values)


P = "steps[0].branches[0]"
BAD_DOCUMENTS: list[tuple[str, Callable[[dict[str, Any]], object], list[str]]] = [
    ("no format", lambda d: d.pop("format"), ["format: is required; use 'branchline.recipe/v1'"]),
    (
        "wrong format",
        lambda d: _set(d, format="v2"),
        ["format: must be 'branchline.recipe/v1', got 'v2'"],
    ),
    (
        "bad slug",
        lambda d: _set(d, slug="Bad Slug"),
        ["slug: must match ^[a-z0-9][a-z0-9_-]*$, got 'Bad Slug'"],
    ),
    ("slug not text", lambda d: _set(d, slug=5), ["slug: must be a string, got int"]),
    ("no name", lambda d: d.pop("name"), ["name: is required"]),
    ("no steps", lambda d: _set(d, steps=[]), ["steps: a recipe needs at least one step"]),
    ("steps not a list", lambda d: _set(d, steps={}), ["steps: must be a list, got dict"]),
    (
        "duplicate step keys",
        lambda d: d["steps"].append(step("generate_story")),
        ["steps[4].key: duplicate step key 'generate_story' (also steps[0])"],
    ),
    (
        "bad step key",
        lambda d: _set(_first(d), key="a b"),
        [
            "steps[0].key: must match ^[A-Za-z0-9][A-Za-z0-9_-]*$, got 'a b'",
            "steps[2].prompt: unknown template name 'steps.generate_story.response'; there is no step 'generate_story'",
        ],
    ),
    (
        "unknown kind",
        lambda d: _set(_first(d), kind="robot"),
        [
            "steps[0].kind: unknown step kind 'robot'; expected one of: classify, decision_tree, http, human, intent, llm, "
            "retrieve, tool, transform",
        ],
    ),
    (
        "duplicate branch names",
        lambda d: _set(_first(d)["branches"][1], name="story_too_short"),
        ["steps[0].branches[1].name: duplicate branch name 'story_too_short' (also branches[0])"],
    ),
    (
        "priority zero",
        lambda d: _set(_first(d)["branches"][0], priority=0),
        [f"{P}.priority: must be a whole number >= 1, got 0"],
    ),
    (
        "priority text",
        lambda d: _set(_first(d)["branches"][0], priority="1"),
        [f"{P}.priority: must be a whole number >= 1, got '1'"],
    ),
    (
        "no priority",
        lambda d: _first(d)["branches"][0].pop("priority"),
        [f"{P}.priority: is required"],
    ),
    (
        "unknown operator",
        lambda d: _set(_when(d), operator="lessthan"),
        [
            f"{P}.when.operator: unknown operator 'lessthan'; length_check takes: less_than, "
            "less_equal, greater_than, greater_equal, equals, not_equals, greater_than_or_equal, "
            "less_than_or_equal"
        ],
    ),
    (
        "missing operator",
        lambda d: _when(d).pop("operator"),
        [
            f"{P}.when.operator: is required; length_check takes: less_than, less_equal, "
            "greater_than, greater_equal, equals, not_equals, greater_than_or_equal, less_than_or_equal"
        ],
    ),
    (
        "unknown condition type",
        lambda d: _set(_when(d), type="vibes"),
        [
            f"{P}.when.type: unknown condition type 'vibes'; expected one of: ai_evaluation, and, "
            "attempts, budget, check_count, cites_source, classification_failed, confidence, "
            "content_type, criteria_met, default, error_severity, execution_error, execution_timeout, "
            "fallback_used, "
            "field_compare, format_matches, http_status, human_decision, length_check, not, or, "
            "pattern_match, retrieval, "
            "route_selected, schema_valid, tool_called, tool_error, tool_result, validation_passed"
        ],
    ),
    (
        "confidence above 1",
        lambda d: _set(_when(d), type="confidence", operator="less_than", value=70),
        [f"{P}.when.value: must be a confidence from 0 to 1, got 70"],
    ),
    (
        "confidence not a number",
        lambda d: _set(_when(d), type="confidence", operator="less_than", value="high"),
        [f"{P}.when.value: must be a number, got 'high'"],
    ),
    (
        "attempts not whole",
        lambda d: _set(_when(d), type="attempts", operator="greater_equal", value=2.5),
        [f"{P}.when.value: must be a whole number of attempts, got 2.5"],
    ),
    (
        "attempts below zero",
        lambda d: _set(_when(d), type="attempts", operator="greater_equal", value=-1),
        [f"{P}.when.value: must be a whole number of attempts, got -1"],
    ),
    (
        "fallback_used not a flag",
        lambda d: _set(_when(d), type="fallback_used", operator="equals", value="maybe"),
        [f"{P}.when.value: must be true or false, got 'maybe'"],
    ),
    (
        "validation_passed not a flag",
        lambda d: _set(_when(d), type="validation_passed", operator="equals", value=3),
        [f"{P}.when.value: must be true or false, got 3"],
    ),
    (
        "classification_failed not a flag",
        lambda d: _set(_when(d), type="classification_failed", operator="equals", value="x"),
        [f"{P}.when.value: must be true or false, got 'x'"],
    ),
    ("no when", lambda d: _first(d)["branches"][0].pop("when"), [f"{P}.when: is required"]),
    (
        "when not an object",
        lambda d: _set(_first(d)["branches"][0], when="always"),
        [f"{P}.when: must be an object, got str"],
    ),
    (
        "value not a number",
        lambda d: _set(_when(d), value="long"),
        [f"{P}.when.value: must be a number, got 'long'"],
    ),
    (
        "value a boolean",
        lambda d: _set(_when(d), value=True),
        [f"{P}.when.value: must be a number, got True"],
    ),
    (
        "unknown unit",
        lambda d: _set(_when(d), unit="lines"),
        [f"{P}.when.unit: unknown unit 'lines'; expected chars or words"],
    ),
    (
        "backreference",
        lambda d: _set(_when(d, 1), value=r"(a)\1"),
        [
            "steps[0].branches[1].when.value: invalid regex: backreferences and lookaround are not "
            "supported (invalid escape sequence: \\1)"
        ],
    ),
    (
        "lookahead",
        lambda d: _set(_when(d, 1), value="error(?!s)"),
        [
            "steps[0].branches[1].when.value: invalid regex: backreferences and lookaround are not "
            "supported (invalid perl operator: (?!)"
        ],
    ),
    (
        "regex that does not compile",
        lambda d: _set(_when(d, 1), value="(unclosed"),
        ["steps[0].branches[1].when.value: invalid regex: missing ): (unclosed"],
    ),
    (
        "regex too long",
        lambda d: _set(_when(d, 1), value="a" * 100_000),
        ["steps[0].branches[1].when.value: pattern is 100000 characters, at most 2000"],
    ),
    (
        "regex too large once compiled",
        lambda d: _set(_when(d, 1), value="(.*a){999}"),
        [
            "steps[0].branches[1].when.value: pattern is too large once compiled (10993 RE2 "
            "instructions, at most 2500); counted repetitions such as {0,500} multiply it: "
            "prefer * or +"
        ],
    ),
    (
        "unknown regex flag",
        lambda d: _set(_when(d, 1), flags="ix"),
        ["steps[0].branches[1].when.flags: unknown regex flag 'x'; use i, m or s"],
    ),
    (
        "empty pattern",
        lambda d: _set(_when(d, 1), value=""),
        ["steps[0].branches[1].when.value: must be a non-empty string"],
    ),
    (
        "unknown evaluator",
        lambda d: _set(_when(d, 2), evaluator="oracle"),
        [
            "steps[0].branches[2].when.evaluator: unknown actor alias 'oracle'; declared: editors, judge, writer"
        ],
    ),
    (
        "unknown step actor",
        lambda d: _set(_first(d), actor="poet"),
        ["steps[0].actor: unknown actor alias 'poet'; declared: editors, judge, writer"],
    ),
    (
        "missing step actor",
        lambda d: _first(d).pop("actor"),
        ["steps[0].actor: is required for an llm step"],
    ),
    (
        "unknown validation judge",
        lambda d: _set(_first(d)["validation"], judge="oracle"),
        [
            "steps[0].validation.judge: unknown actor alias 'oracle'; declared: editors, judge, writer"
        ],
    ),
    (
        "threshold out of range",
        lambda d: _set(_first(d)["validation"], threshold=75),
        ["steps[0].validation.threshold: must be a number from 0 to 1, got 75"],
    ),
    (
        "unknown alternative actor",
        lambda d: _set(
            _first(d)["branches"][0],
            action="RETRY_WITH_DIFFERENT_ACTOR",
            params={"alternative_actor": "poet"},
        ),
        [
            f"{P}.params.alternative_actor: unknown actor alias 'poet'; declared: editors, judge, writer"
        ],
    ),
    (
        "negative max_retries",
        lambda d: _set(_first(d)["branches"][0], params={"max_retries": -1}),
        [f"{P}.params.max_retries: must be a whole number >= 0, got -1"],
    ),
    (
        "unknown action",
        lambda d: _set(_first(d)["branches"][0], action="EXPLODE", target="nowhere"),
        [
            f"{P}.action: unknown action 'EXPLODE'; expected one of: CONTINUE, DEFAULT_CONTINUE, "
            "ERROR_HANDLER, REQUEST_MORE_DETAIL, ENHANCE_PROMPT, RETRY_WITH_DIFFERENT_ACTOR, "
            "HUMAN_REVIEW, QUALITY_APPROVED, SKIP_TO_END, END_RECIPE, RETRY_DIFFERENT_ACTOR, "
            "HUMAN_REVIEW_NEEDED",
            f"{P}.target: unknown step 'nowhere'; expected a step key or @repeat, @end, @complete",
        ],
    ),
    (
        "unknown target",
        lambda d: _set(_first(d)["branches"][3], target="evaluate"),
        [
            "steps[0].branches[3].target: unknown step 'evaluate'; expected a step key or @repeat, @end, @complete"
        ],
    ),
    (
        "missing target",
        lambda d: _first(d)["branches"][3].pop("target"),
        ["steps[0].branches[3].target: is required"],
    ),
    (
        "repeat action with another target",
        lambda d: _set(_first(d)["branches"][0], target="evaluate_quality"),
        [
            f"{P}.target: REQUEST_MORE_DETAIL runs this step again; the target must be @repeat, got 'evaluate_quality'"
        ],
    ),
    (
        "END_RECIPE with a step target",
        lambda d: _set(_first(d)["branches"][1], target="evaluate_quality"),
        [
            "steps[0].branches[1].target: END_RECIPE stops the run; the target must be @end, got 'evaluate_quality'"
        ],
    ),
    (
        "SKIP_TO_END with another target",
        lambda d: _set(_first(d)["branches"][1], action="SKIP_TO_END", target="human_review"),
        [
            "steps[0].branches[1].target: SKIP_TO_END goes to the last step 'revise_story'; leave "
            "the target empty, got 'human_review'"
        ],
    ),
    (
        "ENHANCE_PROMPT without its enhancement",
        lambda d: _set(_first(d)["branches"][0], action="ENHANCE_PROMPT", params={}),
        [f"{P}.params.prompt_enhancement: is required for ENHANCE_PROMPT"],
    ),
    (
        "unknown input in a template",
        lambda d: _set(_first(d), prompt="Write about {topc}"),
        ["steps[0].prompt: unknown template name 'topc'; declared inputs: topic"],
    ),
    (
        "step number past the last step",
        lambda d: _set(d["steps"][3], prompt="{step5_response}"),
        ["steps[3].prompt: unknown template name 'step5_response'; the recipe has 4 steps"],
    ),
    (
        "unknown step in a template",
        lambda d: _set(d["steps"][3], prompt="{steps.draft.response}"),
        ["steps[3].prompt: unknown template name 'steps.draft.response'; there is no step 'draft'"],
    ),
    (
        "unknown step in a human step's material",
        lambda d: _set(d["steps"][2], material="{steps.draft.response}"),
        [
            "steps[2].material: unknown template name 'steps.draft.response'; "
            "there is no step 'draft'"
        ],
    ),
    (
        "escalation to an alias the recipe lacks",
        lambda d: _set(d["steps"][2], escalate_to="leads"),
        ["steps[2].escalate_to: unknown actor alias 'leads'; declared: editors, judge, writer"],
    ),
    (
        "attribute access in a template",
        lambda d: _set(_first(d), prompt="{topic.__class__}"),
        ["steps[0].prompt: attribute access in {topic.__class__} is not allowed"],
    ),
    (
        "and without conditions",
        lambda d: _set(_first(d)["branches"][0], when={"type": "and", "conditions": []}),
        [f"{P}.when.conditions: and needs a non-empty list of conditions"],
    ),
    (
        "not with two conditions",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "not", "conditions": [{"type": "default"}, {"type": "default"}]},
        ),
        [f"{P}.when.conditions: not takes exactly one condition, got 2"],
    ),
    (
        "an error inside a logical condition",
        lambda d: _set(
            _first(d)["branches"][0],
            when={
                "type": "anything",
                "operator": "or",
                "conditions": [
                    {"type": "default"},
                    {"type": "length_check", "operator": "lt", "value": 1},
                ],
            },
        ),
        [
            f"{P}.when.conditions[1].operator: unknown operator 'lt'; length_check takes: less_than, "
            "less_equal, greater_than, greater_equal, equals, not_equals, greater_than_or_equal, "
            "less_than_or_equal"
        ],
    ),
    (
        "unknown human option",
        lambda d: _set(d["steps"][2]["branches"][0]["when"], value="accept"),
        [
            "steps[2].branches[0].when.value: unknown option 'accept'; the step's options are approve, reject, revise"
        ],
    ),
    (
        "unknown content type",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "content_type", "operator": "is", "value": "poem"},
        ),
        [
            f"{P}.when.value: unknown content type 'poem'; expected one of: code, numbers, json, list, prose"
        ],
    ),
    (
        "unknown route",
        lambda d: _set(
            _first(d)["branches"][0], when={"type": "route_selected", "value": "billing"}
        ),
        [f"{P}.when.value: unknown route 'billing'; routes: none"],
    ),
    (
        "retrieval with an unknown measure",
        lambda d: _set(
            _first(d)["branches"][0],
            when={
                "type": "retrieval",
                "operator": "less_than",
                "value": 1,
                "measure": "hits_count",
            },
        ),
        [f"{P}.when.measure: unknown measure 'hits_count'; expected hits or top_score"],
    ),
    (
        "retrieval top score above 1",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "retrieval", "operator": "less_than", "value": 5, "measure": "top_score"},
        ),
        [f"{P}.when.value: a top score is from 0 to 1, got 5"],
    ),
    (
        "retrieval with a negative number of hits",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "retrieval", "operator": "greater_equal", "value": -1},
        ),
        [f"{P}.when.value: a number of hits is at least 0, got -1"],
    ),
    (
        "retrieval without a value",
        lambda d: _set(
            _first(d)["branches"][0], when={"type": "retrieval", "operator": "greater_equal"}
        ),
        [f"{P}.when.value: must be a number, got None"],
    ),
    (
        "cites_source with an unknown operator",
        lambda d: _set(
            _first(d)["branches"][0], when={"type": "cites_source", "operator": "quotes"}
        ),
        [f"{P}.when.operator: unknown operator 'quotes'; cites_source takes: cites, cites_none"],
    ),
    (
        "cites_source without an operator",
        lambda d: _set(_first(d)["branches"][0], when={"type": "cites_source"}),
        [f"{P}.when.operator: is required; cites_source takes: cites, cites_none"],
    ),
    (
        "field_compare without a field",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "field_compare", "operator": "greater_than", "value": 1},
        ),
        [f"{P}.when.field: is required"],
    ),
    (
        "execution_timeout with a non-boolean",
        lambda d: _set(
            _first(d)["branches"][0],
            when={"type": "execution_timeout", "operator": "equals", "value": "maybe"},
        ),
        [f"{P}.when.value: must be true or false, got 'maybe'"],
    ),
    (
        "timeout not a number",
        lambda d: _set(_first(d), timeout_s="soon"),
        ["steps[0].timeout_s: must be a whole number of seconds >= 1, got 'soon'"],
    ),
    (
        "input with an unknown type",
        lambda d: _set(d, inputs={"topic": {"type": "str"}}),
        [
            "inputs.topic.type: unknown type 'str'; expected one of: array, boolean, file, files, integer, number, object, string"
        ],
    ),
    (
        "input default of the wrong type",
        lambda d: d["inputs"].update(count={"type": "integer", "default": "three"}),
        ["inputs.count.default: must be an integer, got 'three'"],
    ),
    (
        "reserved input name",
        lambda d: d["inputs"].update(feedback={"type": "string"}),
        ["inputs.feedback: the name 'feedback' is reserved for templates"],
    ),
    (
        "actor not a name",
        lambda d: d["actors"].update(judge=""),
        [
            "actors.judge: must be a non-empty actor name",
            "steps[0].branches[2].when.evaluator: unknown actor alias 'judge'; declared: editors, writer",
            "steps[0].validation.judge: unknown actor alias 'judge'; declared: editors, writer",
            "steps[1].actor: unknown actor alias 'judge'; declared: editors, writer",
            "steps[1].branches[0].when.evaluator: unknown actor alias 'judge'; declared: editors, writer",
        ],
    ),
    (
        "branch not an object",
        lambda d: _first(d)["branches"].append("oops"),
        ["steps[0].branches[4]: must be an object, got str"],
    ),
    ("step null", lambda d: d["steps"].append(None), ["steps[4]: must be an object, got null"]),
]


@pytest.mark.parametrize(
    ("mutate", "errors"),
    [pytest.param(m, e, id=name) for name, m, e in BAD_DOCUMENTS],
)
def test_it_rejects_a_bad_document_with_each_error_at_its_path(
    mutate: Callable[[dict[str, Any]], object], errors: list[str]
) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(_bad(mutate))
    assert sorted(raised.value.errors) == sorted(errors)


def test_it_lists_every_error_not_just_the_first() -> None:
    def break_many(doc: dict[str, Any]) -> None:
        doc["format"] = "v0"
        _set(_when(doc), operator="lessthan")
        _first(doc)["branches"][3]["target"] = "nowhere"
        doc["steps"][3]["prompt"] = "{missing}"

    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(_bad(break_many))
    paths = [e.split(": ", 1)[0] for e in raised.value.errors]
    assert paths == [
        "format",
        f"{P}.when.operator",
        "steps[0].branches[3].target",
        "steps[3].prompt",
    ]


def test_it_reports_an_invalid_decision_tree_with_its_path() -> None:
    tree = copy.deepcopy(REFERENCE_TREE)
    tree["tree"]["if_false"] = {
        "type": "node",
        "condition": {"type": "check_mood"},
        "if_true": {"type": "leaf"},
    }
    doc = recipe(
        step("route", kind="decision_tree", actor=None, tree=tree, leaf_targets={"nope": "route"})
    )
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(doc)
    assert raised.value.errors == [
        "steps[0].tree.tree.if_false.if_false: is required",
        "steps[0].tree.tree.if_false.condition.type: unknown condition type 'check_mood'; expected "
        "one of: check_safety, check_pii, check_keywords, check_count, and, or, not",
        "steps[0].tree.tree.if_false.if_true.prompt: is required",
    ]


def test_it_checks_leaf_targets_against_the_tree_and_the_steps() -> None:
    doc = recipe(
        step(
            "route",
            kind="decision_tree",
            actor=None,
            tree=REFERENCE_TREE,
            leaf_targets={"nope": "route", "safety_focused": "nowhere"},
        )
    )
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(doc)
    assert raised.value.errors == [
        "steps[0].leaf_targets.nope: no leaf 'nope' in the tree; leaves: base_classification, safety_focused",
        "steps[0].leaf_targets.safety_focused: unknown step 'nowhere'; expected a step key, @end or @complete",
    ]


def test_it_checks_conditions_shared_by_yaml_aliases_in_bounded_time() -> None:
    # A YAML alias can name one condition twice at every level: 2**30 conditions in all.
    when: dict[str, Any] = {"type": "default"}
    for _ in range(30):
        when = {"type": "or", "conditions": [when, when]}
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("a", branch("b", 1, when))))
    [error] = raised.value.errors
    assert error.startswith("steps[0].branches[0].when.conditions[0].conditions[0]")
    assert error.endswith(": a recipe has at most 5000 conditions")


def test_it_refuses_conditions_nested_too_deep() -> None:
    when: dict[str, Any] = {"type": "default"}
    for _ in range(40):
        when = {"type": "not", "conditions": [when]}
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("a", branch("b", 1, when))))
    assert raised.value.errors == [
        "steps[0].branches[0].when"
        + ".conditions[0]" * 33
        + ": conditions are nested deeper than 32 levels"
    ]


def test_it_reads_and_lints_a_recipe_of_a_thousand_steps() -> None:
    keys = [f"s{i}" for i in range(1000)]
    steps = [
        step(key, branch("on", 1, target=keys[i + 1] if i + 1 < 1000 else "@complete"))
        for i, key in enumerate(keys)
    ]
    graph = parse_recipe(recipe(*steps))
    assert len(graph.steps) == 1000
    assert lint_recipe(graph) == []


def test_it_refuses_a_recipe_with_too_many_steps() -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(*[step(f"s{i}") for i in range(1001)]))
    assert raised.value.errors == ["steps: a recipe has at most 1000 steps, got 1001"]


@pytest.mark.parametrize("doc", [None, [], "recipe", 3])
def test_it_refuses_a_document_that_is_not_an_object(doc: object) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(doc)
    assert raised.value.errors == ["$: a recipe is a JSON object (a mapping)"]


def test_it_ignores_unknown_extra_keys() -> None:
    doc = design_example()
    doc["x-editor"] = {"zoom": 2}
    _first(doc)["colour"] = "red"
    _first(doc)["branches"][0]["note"] = "why"
    assert parse_recipe(doc).slug == "creative-writing-qc"


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 1000)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_it_never_raises_anything_but_recipe_invalid_for_a_mangled_document(
    data: st.DataObject,
) -> None:
    doc = json.loads(json.dumps(design_example()))
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    replacement = data.draw(JSON_VALUES)
    holder: Any = doc
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = replacement
    try:
        parse_recipe(doc)
    except RecipeInvalid as exc:
        assert exc.errors and all(": " in e for e in exc.errors)
