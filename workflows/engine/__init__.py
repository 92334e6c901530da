"""The branching engine: pure Python (stdlib and RE2), with no Django import.

It parses recipes (format v1) into graphs, evaluates branch conditions, renders templates,
walks decision trees, classifies against routes, runs the validation loop and decides where a
run goes after each step. The runner and the recipe apps translate its errors at their edge.
"""

from __future__ import annotations

from workflows.engine.actions import DecisionKind
from workflows.engine.actor_choice import ActorStats, choose_actor
from workflows.engine.conditions import EvalContext, Judge, evaluate_condition
from workflows.engine.content_type import detect_content_type
from workflows.engine.decision_tree import TreeOutcome, evaluate_tree, validate_tree
from workflows.engine.errors import (
    AnswerUnreadable,
    EngineError,
    InputError,
    RecipeInvalid,
    RegexError,
    RegexTooLarge,
    TemplateError,
)
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec, parse_recipe
from workflows.engine.inputs import resolve_inputs
from workflows.engine.lint import lint_recipe
from workflows.engine.regex import compile_pattern
from workflows.engine.router import Decision, Evaluation, StepResult, decide
from workflows.engine.routing import (
    Classification,
    Route,
    RouteExample,
    classifier_prompt,
    classify,
    parse_classifier_answer,
)
from workflows.engine.scoring import evaluation_prompt, parse_score
from workflows.engine.state import RunState
from workflows.engine.templating import render, template_names
from workflows.engine.validation import (
    JudgeScores,
    ValidationAttempt,
    ValidationOutcome,
    confidence,
    judge_prompt,
    parse_judge_answer,
    rule_score,
    run_validation_loop,
)

__all__ = [
    "ActorStats",
    "AnswerUnreadable",
    "BranchSpec",
    "Classification",
    "Condition",
    "Decision",
    "DecisionKind",
    "EngineError",
    "EvalContext",
    "Evaluation",
    "InputError",
    "Judge",
    "JudgeScores",
    "RecipeGraph",
    "RecipeInvalid",
    "RegexError",
    "RegexTooLarge",
    "Route",
    "RouteExample",
    "RunState",
    "StepResult",
    "StepSpec",
    "TemplateError",
    "TreeOutcome",
    "ValidationAttempt",
    "ValidationOutcome",
    "choose_actor",
    "classifier_prompt",
    "classify",
    "compile_pattern",
    "confidence",
    "decide",
    "detect_content_type",
    "evaluate_condition",
    "evaluate_tree",
    "evaluation_prompt",
    "judge_prompt",
    "lint_recipe",
    "parse_classifier_answer",
    "parse_judge_answer",
    "parse_recipe",
    "parse_score",
    "render",
    "resolve_inputs",
    "rule_score",
    "run_validation_loop",
    "template_names",
    "validate_tree",
]
