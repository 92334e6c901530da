"""The branch set of design note 000's instruction 100, imported as the note writes it: two
branches share priority 3, and a timeout passes "too short" to reach `model_timeout`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import JUDGE, WRITER, ActorFactory
from workflows import engine
from workflows.adapters import document_from_recipe
from workflows.services import recipe_import

pytestmark = pytest.mark.django_db

NOT_APPLICABLE = "not applicable: the step failed: timed out"


def note_document() -> dict[str, Any]:
    """Instruction 100's branches in the note's row order (branch ids 1, 2, 3, 4, 7, 8).

    The note's `next_step_id` 100 (its own instruction) is `@repeat`; its evaluator and
    alternative actor, named as models there, are recipe aliases here; its params are kept.
    """
    branches = [
        {
            "name": "story_too_short",
            "priority": 1,
            "when": {"type": "length_check", "operator": "less_than", "value": 200},
            "action": "REQUEST_MORE_DETAIL",
            "target": "@repeat",
            "params": {
                "min_length": 200,
                "retry_suffix": "Please write a longer, more detailed story.",
            },
        },
        {
            "name": "inappropriate_content",
            "priority": 2,
            "when": {
                "type": "pattern_match",
                "operator": "regex_match",
                "value": "(violence|inappropriate)",
            },
            "action": "END_RECIPE",
            "target": "@end",
            "params": {"pattern": "(violence|inappropriate)"},
        },
        {
            "name": "high_quality_story",
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
            "params": {"threshold": 8},
        },
        {
            "name": "default_evaluation",
            "priority": 999,
            "when": {"type": "default", "operator": "always", "value": True},
            "action": "DEFAULT_CONTINUE",
            "target": "evaluate_quality",
        },
        {
            "name": "model_timeout",
            "priority": 5,
            "when": {"type": "execution_timeout", "operator": "equals", "value": True},
            "action": "RETRY_DIFFERENT_ACTOR",
            "target": "@repeat",
            "params": {"alternative_actor": "dolphin", "max_retries": 2},
        },
        {
            "name": "enhance_prompt",
            "priority": 3,
            "when": {"type": "length_check", "operator": "less_than", "value": 150},
            "action": "ENHANCE_PROMPT",
            "target": "@repeat",
            "params": {"prompt_enhancement": "Be more specific and provide examples."},
        },
    ]
    return {
        "format": "branchline.recipe/v1",
        "slug": "creative-writing-note",
        "name": "Creative Writing with Quality Control",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": WRITER, "judge": JUDGE, "dolphin": "note-dolphin"},
        "steps": [
            {
                "key": "generate_story",
                "name": "Generate Story",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write a creative story about {topic}",
                "timeout_s": 300,
                "branches": branches,
            },
            {
                "key": "evaluate_quality",
                "name": "Evaluate Quality",
                "kind": "llm",
                "actor": "judge",
                "prompt": "Rate this story quality 1-10 and explain why: {step1_response}",
                "timeout_s": 180,
                "branches": [],
            },
        ],
    }


IN_ORDER = [
    "story_too_short",
    "inappropriate_content",
    "high_quality_story",
    "enhance_prompt",
    "model_timeout",
    "default_evaluation",
]


@pytest.fixture
def note_recipe(user: Any, actors: Any) -> Any:
    ActorFactory(name="note-dolphin")
    return recipe_import(user=user, data=note_document())


def test_it_imports_the_notes_branches_with_two_at_priority_3(note_recipe: Any) -> None:
    step = note_recipe.recipe.steps.get(key="generate_story")
    assert list(step.branches.values_list("name", flat=True)) == IN_ORDER
    assert (
        "steps[0].branches[5].priority: priority 3 also has 'high_quality_story'; equal "
        "priorities are evaluated in document order, so this branch comes after it"
    ) in note_recipe.warnings


def test_export_keeps_the_order_of_equal_priorities_and_imports_back_equal(
    note_recipe: Any, user: Any
) -> None:
    exported = document_from_recipe(note_recipe.recipe)
    branches = exported["steps"][0]["branches"]
    assert [b["name"] for b in branches] == IN_ORDER
    assert [b["priority"] for b in branches] == [1, 2, 3, 3, 5, 999]
    # Saved in the format's one spelling: the judge's `params.threshold` is its `when.value`.
    written = note_document()
    for step in written["steps"]:
        step["branches"] = [engine.canonical_branch(b) for b in step["branches"]]
    assert engine.parse_recipe(exported) == engine.parse_recipe(written)


def test_a_timeout_takes_model_timeout_past_the_branches_that_read_the_answer(
    note_recipe: Any,
) -> None:
    graph = engine.parse_recipe(document_from_recipe(note_recipe.recipe))
    state = engine.RunState.start(graph, {"topic": "owls"})

    def judge(evaluator: str, prompt: str, text: str) -> str:
        raise AssertionError("the answer of a step that timed out is not judged")

    result = engine.StepResult("generate_story", timed_out=True)
    decision = engine.decide(graph, state, result, judge=judge)

    assert (decision.kind, decision.branch) == ("retry_actor", "model_timeout")
    assert [(e.branch, e.matched, e.taken, e.reason) for e in decision.evaluations] == [
        ("story_too_short", False, False, NOT_APPLICABLE),
        ("inappropriate_content", False, False, NOT_APPLICABLE),
        ("high_quality_story", False, False, NOT_APPLICABLE),
        ("enhance_prompt", False, False, NOT_APPLICABLE),
        ("model_timeout", True, True, "step timed out"),
    ]
