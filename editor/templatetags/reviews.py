"""Template helpers of the reviewers' inbox: the open-task count in the navigation, the
decisions' labels and where a comment goes."""

from __future__ import annotations

from typing import Any

from django import template

from runner.selectors import tasks_for_reviewer
from workflows.engine.step_kinds.human import COMMENT_REACHES

register = template.Library()

DECISION_LABELS = {"approve": "Approve", "reject": "Reject", "revise": "Revise"}


@register.simple_tag(takes_context=True)
def open_task_count(context: dict[str, Any]) -> int:
    """Return how many open tasks the user's reviewer groups have (0 without a user)."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return 0
    if "open_task_count" in context:  # the inbox page counted them already
        return int(context["open_task_count"])
    return tasks_for_reviewer(request.user).count()


@register.simple_tag
def comment_reaches() -> str:
    """Return where a reviewer's comment goes, for the decision form."""
    return COMMENT_REACHES


@register.filter
def decision_label(option: str) -> str:
    """Return the button label of a decision option."""
    return DECISION_LABELS.get(option, option.replace("_", " ").capitalize())
