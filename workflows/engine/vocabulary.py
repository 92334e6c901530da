"""Name the actions, special targets and defaults of recipe format v1.

Parsing, evaluation and lint all read these tables, so a new name is added in one place.
Condition types and step kinds are registries of their own (`conditions/registry.py`,
`step_kinds/registry.py`); this module imports neither, so both may import it.
"""

from __future__ import annotations

# Each action with the label menus show for it.
ACTION_LABELS: dict[str, str] = {
    "CONTINUE": "Continue",
    "DEFAULT_CONTINUE": "Continue (default)",
    "ERROR_HANDLER": "Handle the error",
    "REQUEST_MORE_DETAIL": "Ask for more detail",
    "ENHANCE_PROMPT": "Enhance the prompt",
    "RETRY_WITH_DIFFERENT_ACTOR": "Retry with another actor",
    "HUMAN_REVIEW": "Human review",
    "QUALITY_APPROVED": "Approve",
    "SKIP_TO_END": "Skip to the last step",
    "END_RECIPE": "End the run",
}
ACTIONS: tuple[str, ...] = tuple(ACTION_LABELS)
ACTION_ALIASES: dict[str, str] = {
    "RETRY_DIFFERENT_ACTOR": "RETRY_WITH_DIFFERENT_ACTOR",
    "HUMAN_REVIEW_NEEDED": "HUMAN_REVIEW",
}
# What taking a branch says of the step's attempt (`counts_as`), for the actor statistics;
# a branch that says nothing counts as its action's default, else as neutral.
OUTCOMES: tuple[str, ...] = ("success", "failure", "neutral")
ACTION_OUTCOMES: dict[str, str] = {
    "REQUEST_MORE_DETAIL": "failure",
    "RETRY_WITH_DIFFERENT_ACTOR": "failure",
    "ERROR_HANDLER": "failure",
    "QUALITY_APPROVED": "success",
}
# Actions that always run the same step again, whatever target names.
REPEAT_ACTIONS = frozenset({"REQUEST_MORE_DETAIL", "ENHANCE_PROMPT", "RETRY_WITH_DIFFERENT_ACTOR"})
# The `params` an action reads: the suffix a repeat appends to its prompt, the actor a retry
# asks; `max_retries` besides bounds every branch that runs its step again (`repeats_step`).
SUFFIX_PARAMS: dict[str, str] = {
    "REQUEST_MORE_DETAIL": "retry_suffix",
    "ENHANCE_PROMPT": "prompt_enhancement",
}
ACTION_PARAMS: dict[str, tuple[str, ...]] = {
    **{action: (param,) for action, param in SUFFIX_PARAMS.items()},
    "RETRY_WITH_DIFFERENT_ACTOR": ("alternative_actor",),
}
MAX_RETRIES_PARAM = "max_retries"

# An actor reference of a recipe that names a group of reviewers; and a step's actor that
# the learner chooses, among the step's candidates (`actor_choice.py`).
HUMAN_ACTOR_PREFIX = "@human:"
LEARNED = "@learned"

REPEAT = "@repeat"
END = "@end"
COMPLETE = "@complete"
SPECIAL_TARGETS: tuple[str, ...] = (REPEAT, END, COMPLETE)


def repeats_step(action: str, target: str) -> bool:
    """Tell whether a branch with `action` (canonical) and `target` runs its step again."""
    return target == REPEAT or action in REPEAT_ACTIONS


DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_STEPS = 100
DEFAULT_MAX_RECLASSIFY = 2
DEFAULT_HUMAN_OPTIONS: tuple[str, ...] = ("approve", "reject", "revise")
# One uploaded file, several (`files.py`).
FILE_INPUT_TYPES: tuple[str, ...] = ("file", "files")
INPUT_TYPES: tuple[str, ...] = (
    "string",
    "number",
    "integer",
    "boolean",
    "object",
    "array",
    *FILE_INPUT_TYPES,
)
FORMAT = "branchline.recipe/v1"
