"""Classify steps: ask the step's actor which of the step's routes the rendered prompt takes.

A classifier with no readable answer about a route leaves the selection unknown: the step
fails with the reason, unless a branch reads `classification_failed`.
"""

from __future__ import annotations

import time

from workflows import engine

from ..claims import StepOutcome
from ..model_calls import Purpose
from ..providers import ProviderError
from ..status import StepStatus
from .session import Session

KIND = "classify"
# Where the step's details keep why its classifier gave no readable answer.
FAILURE = "classification_failure"


def execute(session: Session) -> StepOutcome:
    step = session.claim.step
    alias = step.actor or ""
    prompt = session.prompt()
    began = time.monotonic()
    try:
        result = engine.classify(
            prompt,
            step.routes,
            lambda question: session.ask(
                alias, question, purpose=Purpose.CLASSIFICATION, timeout_s=step.timeout_s
            ).text,
            bypass=step.bypass,
            max_reclassify=step.max_reclassify,
            # A later step's failure sent back here (RECLASSIFICATION): the classifier is told.
            feedback=session.claim.next.get("feedback"),
        )
    except ProviderError as exc:
        return StepOutcome(
            status=StepStatus.FAILED, prompt=prompt, error=str(exc), actor_alias=alias
        )
    details: dict[str, object] = {"trace": list(result.trace), "selected": list(result.selected)}
    outcome = StepOutcome(
        status=StepStatus.SUCCEEDED,
        prompt=prompt,
        response=", ".join(result.selected),
        route_selection=tuple(result.selected),
        actor_alias=alias,
        latency_ms=int((time.monotonic() - began) * 1000),
        details=details,
    )
    failure = result.failure
    if failure is not None:
        details[FAILURE] = failure
        # The selection is unknown: the step fails, and only a branch taken that reads the
        # failure (or an error branch) takes the run on, never the default branch.
        outcome.status = StepStatus.FAILED
        outcome.error = f"classification failed: {failure}"
    return outcome
