"""Retrieve steps: search the step's knowledge bases; no actor is asked.

The response is the hits as numbered citations (`[1] Title › heading`, then the text), which
the steps after it show with `{sources}` and cite as `[n]`; the prompt lists what was searched.
"""

from __future__ import annotations

import time

from workflows import engine

from ..claims import StepOutcome
from ..status import StepStatus
from .session import Session
from .sources import Retrieval, SourcesFailed, retrieve

KIND = "retrieve"


def execute(session: Session) -> StepOutcome:
    retrieval = Retrieval()
    outcome = StepOutcome(status=StepStatus.SUCCEEDED)
    began = time.monotonic()
    try:
        retrieve(session, _first_input(session), retrieval)
    except SourcesFailed as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
    else:
        outcome.hits = retrieval.hits
        outcome.response = engine.format_sources(retrieval.hits)
    outcome.latency_ms = int((time.monotonic() - began) * 1000)
    outcome.prompt = "\n".join(f"{s['knowledge_base']}: {s['query']}" for s in retrieval.searches)
    outcome.details["retrieval"] = retrieval.as_json()
    return outcome


def _first_input(session: Session) -> str:
    """Return what a search without a query looks for: the value of the recipe's first input."""
    names = list(session.claim.graph.inputs)
    # The name is an identifier: `{name}` renders its value as any template does.
    return session.render(f"{{{names[0]}}}") if names else ""
