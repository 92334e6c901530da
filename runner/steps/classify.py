"""Classify steps: ask the step's actor which of the step's routes the rendered prompt takes.

A classifier with no readable answer about a route leaves the selection unknown: the step
fails with the reason, unless a branch reads `classification_failed`.

Classification may be bypassed for every classify step of the deployment (the
CLASSIFICATION_BYPASS setting) or of one run (its start option `classification: "bypass"`,
which `"ask"` overrides the setting with): the always-active routes are then selected without
asking the model, and `details["bypassed"]` says why. A step's own `bypass` selects every
route, whatever the setting says.
"""

from __future__ import annotations

import time

from django.conf import settings

from workflows import engine

from ..claims import StepOutcome
from ..model_calls import Purpose
from ..providers import ProviderError
from ..status import StepStatus
from .session import Session

KIND = "classify"
# Where the step's details keep why its classifier gave no readable answer.
FAILURE = "classification_failure"
# Where they keep why the model was not asked (a bypass from outside the step).
BYPASSED = "bypassed"


def bypass_reason(options: dict[str, object]) -> str | None:
    """Return why the run's classify steps ask no model (None: they ask it)."""
    mode = options.get("classification")
    if mode == "bypass":
        return 'the run was started with classification "bypass"'
    if mode is None and settings.CLASSIFICATION_BYPASS:
        return "the CLASSIFICATION_BYPASS setting is on"
    return None


def execute(session: Session) -> StepOutcome:
    step = session.claim.step
    alias = step.actor or ""
    prompt = session.prompt()
    skipped = None if step.bypass else bypass_reason(session.claim.options)
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
            skip_model=skipped,
        )
    except ProviderError as exc:
        return StepOutcome(
            status=StepStatus.FAILED, prompt=prompt, error=str(exc), actor_alias=alias
        )
    details: dict[str, object] = {"trace": list(result.trace), "selected": list(result.selected)}
    if skipped is not None:
        details[BYPASSED] = skipped
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
