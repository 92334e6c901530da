"""The branching engine: pure Python (stdlib, RE2, JMESPath, jsonschema), with no Django import.

It parses recipes (format v1) into graphs (`recipe_parser`), evaluates branch conditions
(`conditions/`, one module per condition type), renders templates, walks decision trees,
classifies against routes (`classification`), runs the validation loop (`self_check`) and
decides where a run goes after each step (`next_step`), a failed step included; it reads a
step's data sources and numbers their hits as citations (`sources`), and a step's tools and
the calls it made to them (`tools`); it evaluates transform steps' JMESPath (`transform`) and
checks structured answers against their JSON Schema (`output_schema`). Step kinds are
in `step_kinds/`; `catalog()` publishes both registries for the editor. The runner and the
recipe apps translate its errors at their edge.
"""

from __future__ import annotations

from workflows.engine.actions import DecisionKind
from workflows.engine.actor_choice import Learning, first_choice, learns
from workflows.engine.answers import strict_json
from workflows.engine.branch_reader import canonical_branch
from workflows.engine.budget import Budget, Spend, as_cost, format_cost
from workflows.engine.budget import check as check_budget
from workflows.engine.callbacks import CALLBACK_EVENT_TYPES, Callback
from workflows.engine.capabilities import CAPABILITIES, Capabilities, parse_capabilities
from workflows.engine.capabilities import missing as missing_capabilities
from workflows.engine.capability_check import capability_errors
from workflows.engine.catalog import catalog
from workflows.engine.classification import (
    Classification,
    Route,
    RouteExample,
    classifier_prompt,
    classify,
    parse_classifier_answer,
)
from workflows.engine.conditions import EvalContext, Judge, evaluate_condition
from workflows.engine.conditions.logical import SEVERAL_OPERANDS
from workflows.engine.conditions.reader import CONDITION_KEYS
from workflows.engine.conditions.registry import combinator
from workflows.engine.conditions.summary import condition_summary, value_text
from workflows.engine.content_type import detect_content_type
from workflows.engine.decision_tree import TreeOutcome, evaluate_tree, validate_tree
from workflows.engine.decisions import Decision, Evaluation, StepResult
from workflows.engine.errors import (
    AnswerUnreadable,
    EngineError,
    InputError,
    RecipeInvalid,
    RegexError,
    RegexTooLarge,
    TemplateError,
)
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec
from workflows.engine.http_request import SCRIPT_PREFIX as HTTP_SCRIPT_PREFIX
from workflows.engine.http_request import read_script_http
from workflows.engine.http_request import script_key as http_script_key
from workflows.engine.inputs import resolve_inputs
from workflows.engine.intent import Intent, IntentAnalysis, analyse_intent, read_intent
from workflows.engine.learner import SUFFIX_MARK as SUFFIX_MARK
from workflows.engine.learner import (
    Choice,
    LearnerSettings,
    Observation,
    format_strategies,
    seeded,
    suffix_variant,
)
from workflows.engine.lint import lint_errors, lint_notes, lint_recipe
from workflows.engine.next_step import decide
from workflows.engine.outcomes import attempt_outcome, branch_outcome
from workflows.engine.recipe_parser import parse_recipe
from workflows.engine.regex import compile_pattern
from workflows.engine.schedules import Due as ScheduleDue
from workflows.engine.schedules import Missed as ScheduleMissed
from workflows.engine.schedules import ScheduleSpec
from workflows.engine.schedules import describe as describe_cron
from workflows.engine.schedules import due_ticks as due_schedule_ticks
from workflows.engine.schedules import next_times as next_schedule_times
from workflows.engine.scoring import evaluation_prompt, parse_score
from workflows.engine.self_check import (
    JudgeScores,
    Scoring,
    ValidationAttempt,
    ValidationOutcome,
    ValidationSummary,
    confidence,
    judge_prompt,
    parse_judge_answer,
    rule_score,
    run_validation_loop,
)
from workflows.engine.sources import (
    Citation,
    SourceSpec,
    cited_numbers,
    format_sources,
    numbered,
    read_script_hits,
)
from workflows.engine.state import RunState
from workflows.engine.step_kinds.registry import DEFAULT_KIND as DEFAULT_STEP_KIND
from workflows.engine.step_kinds.registry import KINDS as STEP_KINDS
from workflows.engine.step_kinds.registry import step_kind
from workflows.engine.templating import SOURCES_NAME, render, template_names
from workflows.engine.tools import function_name as tool_function_name
from workflows.engine.tools import read_script_tool, tool_name_problem
from workflows.engine.tools import scripted_failure as tool_script_failure
from workflows.engine.vocabulary import LEARNED as LEARNED

__all__ = [
    "CALLBACK_EVENT_TYPES",
    "CAPABILITIES",
    "CONDITION_KEYS",
    "DEFAULT_STEP_KIND",
    "HTTP_SCRIPT_PREFIX",
    "SEVERAL_OPERANDS",
    "SOURCES_NAME",
    "STEP_KINDS",
    "AnswerUnreadable",
    "BranchSpec",
    "Budget",
    "Callback",
    "Capabilities",
    "Choice",
    "Citation",
    "Classification",
    "Condition",
    "Decision",
    "DecisionKind",
    "EngineError",
    "EvalContext",
    "Evaluation",
    "InputError",
    "Intent",
    "IntentAnalysis",
    "Judge",
    "JudgeScores",
    "LearnerSettings",
    "Learning",
    "Observation",
    "RecipeGraph",
    "RecipeInvalid",
    "RegexError",
    "RegexTooLarge",
    "Route",
    "RouteExample",
    "RunState",
    "ScheduleDue",
    "ScheduleMissed",
    "ScheduleSpec",
    "Scoring",
    "SourceSpec",
    "Spend",
    "StepResult",
    "StepSpec",
    "TemplateError",
    "TreeOutcome",
    "ValidationAttempt",
    "ValidationOutcome",
    "ValidationSummary",
    "analyse_intent",
    "as_cost",
    "attempt_outcome",
    "branch_outcome",
    "canonical_branch",
    "capability_errors",
    "catalog",
    "check_budget",
    "cited_numbers",
    "classifier_prompt",
    "classify",
    "combinator",
    "compile_pattern",
    "condition_summary",
    "confidence",
    "decide",
    "describe_cron",
    "detect_content_type",
    "due_schedule_ticks",
    "evaluate_condition",
    "evaluate_tree",
    "evaluation_prompt",
    "first_choice",
    "format_cost",
    "format_sources",
    "format_strategies",
    "http_script_key",
    "judge_prompt",
    "learns",
    "lint_errors",
    "lint_notes",
    "lint_recipe",
    "missing_capabilities",
    "next_schedule_times",
    "numbered",
    "parse_capabilities",
    "parse_classifier_answer",
    "parse_judge_answer",
    "parse_recipe",
    "parse_score",
    "read_intent",
    "read_script_hits",
    "read_script_http",
    "read_script_tool",
    "render",
    "resolve_inputs",
    "rule_score",
    "run_validation_loop",
    "seeded",
    "step_kind",
    "strict_json",
    "suffix_variant",
    "template_names",
    "tool_function_name",
    "tool_name_problem",
    "tool_script_failure",
    "validate_tree",
    "value_text",
]
