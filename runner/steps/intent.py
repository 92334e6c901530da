"""Intent steps: ask the step's actor what the rendered request asks for, as JSON criteria.

The answer is read by the engine (`engine.analyse_intent`), asked again with the problem while
it is unreadable, up to the step's `max_attempts`; then the step fails with the reason. The
response is the intent as normalised JSON, kept parsed in `details["intent"]` for the monitor.
"""

from __future__ import annotations

import time

from workflows import engine

from ..claims import StepOutcome
from ..model_calls import Purpose
from ..providers import ProviderError, ProviderTimeoutError
from ..status import StepStatus
from .session import Session

KIND = "intent"
# Where the step's details keep the intent read, and the note of each try.
DETAILS = "intent"


def execute(session: Session) -> StepOutcome:
    step = session.claim.step
    alias = session.claim.next.get("actor") or step.actor or ""
    outcome = StepOutcome(status=StepStatus.SUCCEEDED, actor_alias=alias)
    try:
        outcome.prompt = session.prompt()
    except engine.TemplateError as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
        return outcome
    began = time.monotonic()
    try:
        outcome.actor_name = session.resolve(alias).name
        analysis = engine.analyse_intent(
            outcome.prompt,
            lambda question: session.ask(
                alias, question, purpose=Purpose.ANSWER, timeout_s=step.timeout_s
            ).text,
            max_attempts=step.max_attempts,
        )
    except ProviderError as exc:
        outcome.status = StepStatus.FAILED
        outcome.error = str(exc)
        outcome.timed_out = isinstance(exc, ProviderTimeoutError)
        if outcome.timed_out:
            outcome.status = StepStatus.TIMED_OUT
        return outcome
    finally:
        outcome.latency_ms = int((time.monotonic() - began) * 1000)
    outcome.details[DETAILS] = {
        "trace": analysis.trace,
        **(analysis.intent.as_json() if analysis.intent is not None else {}),
    }
    if analysis.intent is None:
        outcome.status = StepStatus.FAILED
        outcome.error = f"intent analysis failed: {analysis.problem}"
        return outcome
    outcome.response = analysis.intent.response()
    return outcome
