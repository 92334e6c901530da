"""A step whose answer is given: recorded with that answer instead of being executed.

A fork may give the step it starts at another answer (`runner.reruns`): the run's `next`
carries it (`ANSWER`), and the step is recorded with it, nobody asked, its prompt rendered
for the record; its branches are then evaluated on it as on any answer. The answer of an llm
step is any text; a human step's is one of its options, `option: comment` with a comment; a
classify step's names its routes, separated by commas. Other kinds produce no answer to give.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflows import engine

from ..claims import StepOutcome
from ..status import StepStatus
from .session import Session

# The key of a run's `next` that gives its next step an answer.
ANSWER = "answer"
# The kinds whose answer can be given, and what their answer is.
ANSWERS = {
    "llm": "any text",
    "human": "one of the step's options, or `option: comment`",
    "classify": "the names of routes of the step, separated by commas",
}


class AnswerRefused(ValueError):
    """The answer does not fit the step (its message says why)."""


@dataclass(frozen=True, slots=True)
class Given:
    """A given answer as the step records it: its response, a human step's decision, a
    classify step's routes."""

    response: str
    decision: str = ""
    routes: tuple[str, ...] | None = None


def read(step: engine.StepSpec, text: str) -> Given:
    """Return `text` as the answer of `step`; raise AnswerRefused if it cannot be one."""
    if step.kind not in ANSWERS:
        raise AnswerRefused(
            f"a {step.kind} step produces no answer to give (only {', '.join(ANSWERS)} steps do)"
        )
    if step.kind == "human":
        option, _, comment = text.partition(":")
        if option.strip() not in step.options:
            raise AnswerRefused(
                f"{option.strip()!r} is not an option of step '{step.key}': choose one of "
                f"{', '.join(step.options)} (`option: comment` adds a comment)"
            )
        return Given(response=comment.strip(), decision=option.strip())
    if step.kind == "classify":
        names = [name.strip() for name in text.split(",") if name.strip()]
        routes = [route.name for route in step.routes]
        unknown = [name for name in names if name not in routes]
        if unknown or not names:
            raise AnswerRefused(
                f"{', '.join(map(repr, unknown)) or 'no route'}: name routes of step "
                f"'{step.key}' ({', '.join(routes)}), separated by commas"
            )
        selected = tuple(name for name in routes if name in names)  # in route order
        return Given(response=", ".join(selected), routes=selected)
    return Given(response=text)


def execute(session: Session) -> StepOutcome:
    """Record the claimed step with the answer its run's `next` gives it."""
    claim = session.claim
    step = claim.step
    alias = claim.next.get("actor") or step.actor or ""
    try:
        given = read(step, str(claim.next[ANSWER]))
    except AnswerRefused as exc:  # checked when it was given; the step may have changed since
        return StepOutcome(status=StepStatus.FAILED, error=str(exc), actor_alias=alias)
    decided = step.kind == "human"
    return StepOutcome(
        status=StepStatus.DECIDED if decided else StepStatus.SUCCEEDED,
        prompt=session.prompt(),
        response=given.response,
        decision=given.decision,
        actor_alias=alias,
        # Who would have answered, for the record (an alias the recipe declares).
        actor_name=session.resolve(alias).name if alias in claim.graph.actors else "",
        route_selection=given.routes,
        details={"answer_given": True},
    )
