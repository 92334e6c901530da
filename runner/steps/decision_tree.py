"""Decision-tree steps: find the tree's facts with the step's detectors, then walk the tree.

The detectors read the step's text (one page), or with `detect.document` the pages of a file
input's stored documents; a document also gives the facts `pages` and `image_count`.

The PII and keyword detectors are the engine's (pure); the safety detector asks the step's
`detect.safety.judge` of each page whether it is unsafe, through the session like any other
judge (the call holds no database connection). An unreadable answer, or a failed call, fails
the detector: its fact is left out, with the reason, and the tree takes its fallback. A call
the run's budget refuses fails the step instead, as it fails any other.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.detectors import (
    FAILURES,
    DetectSpec,
    detect_facts,
    document_facts,
    document_pages,
    merge_detected,
    read_safety_answer,
    safety_prompt,
)
from workflows.engine.step_kinds.decision_tree import walk

from ..claims import StepOutcome
from ..model_calls import BudgetExceeded, Purpose
from ..providers import ProviderError
from ..status import StepStatus
from .session import Session

KIND = "decision_tree"
# Where the step's details keep the facts its detectors found (the engine lays them over
# the run's facts; a fork's replay reads them from here).
DETECTED = "detected"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    step = claim.step
    facts = claim.state.facts
    detected: dict[str, Any] | None = None
    if step.detect is not None:
        try:
            detected = _detect(session, step.detect)
        except BudgetExceeded as exc:
            # Not the judge's failure: the run may not spend more (a budget branch reads it).
            return StepOutcome(status=StepStatus.FAILED, error=str(exc))
        facts = merge_detected(facts, detected)
    result = walk(step, facts)
    details: dict[str, Any] = {"trace": list(result.trace)}
    if detected is not None:
        details[DETECTED] = detected
    return StepOutcome(
        status=StepStatus.SUCCEEDED,
        response=result.leaf,
        leaf=result.leaf,
        details=details,
    )


def _detect(session: Session, spec: DetectSpec) -> dict[str, Any]:
    """Return the facts the step's detectors find in its document or text, and why any of them
    failed."""
    state = session.claim.state
    facts: dict[str, Any] = {}
    if spec.document:
        pages = document_pages(session.documents(spec.document))
        facts.update(document_facts(state.inputs.get(spec.document)))
    elif spec.source:
        pages = [session.render(spec.source)]
    else:
        pages = [state.last_answer(session.answers)]
    facts.update(detect_facts(spec, pages))
    failures: dict[str, str] = {}
    if spec.safety_judge is not None:
        unsafe, failure = _unsafe_pages(session, spec.safety_judge, pages)
        if failure is None:
            facts["unsafe_pages"] = unsafe
        else:
            failures["unsafe_pages"] = failure
    facts[FAILURES] = failures
    return facts


def _unsafe_pages(session: Session, judge: str, pages: list[str]) -> tuple[list[int], str | None]:
    """Ask the judge of each page whether it is unsafe; return the unsafe pages, or why the
    judge gave no verdict (its call failed, or its answer said neither)."""
    unsafe: list[int] = []
    for number, page in enumerate(pages, start=1):
        if not page.strip():
            continue  # nothing to judge: an empty page is safe
        try:
            answer = session.ask(judge, safety_prompt(page), purpose=Purpose.JUDGE).text
        except BudgetExceeded:
            raise
        except ProviderError as exc:
            return [], f"the safety judge '{judge}' failed on page {number}: {exc}"
        verdict = read_safety_answer(answer)
        if verdict is None:
            # Not quoted: a judge that echoes the page would put what it holds (PII) here.
            return [], (
                f"the safety judge '{judge}' gave no verdict on page {number}: its answer "
                f"({len(answer)} characters) said neither SAFE nor UNSAFE"
            )
        if verdict:
            unsafe.append(number)
    return unsafe, None
