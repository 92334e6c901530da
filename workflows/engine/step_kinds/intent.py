"""`intent`: a model turns the request into its intent, output type and success criteria
(and, when it gives them, the expected format and quality requirements).

Its response is the intent as normalised JSON (`{steps.KEY.response}` shows it); the
`criteria_met` condition of a later step has a judge check that step's answer against the
criteria (see `workflows/engine/intent.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.field_spec import FieldSpec
from workflows.engine.intent import DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS_LIMIT, MAX_CRITERIA
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import REQUIRES, TIMEOUT, actor, prompt


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read `max_attempts`: how many answers the model may give before the step fails."""
    attempts = doc.get("max_attempts")
    if attempts is None:
        attempts = DEFAULT_MAX_ATTEMPTS
    elif not is_int(attempts) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
        reader.error(
            f"{path}.max_attempts",
            f"must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT}, got {attempts!r}",
        )
        attempts = DEFAULT_MAX_ATTEMPTS
    return {"max_attempts": attempts}


STEP_KIND = StepKind(
    name="intent",
    label="Intent (request → success criteria)",
    help=(
        "A model reads the request and answers its intent, the type of output expected and "
        f"1 to {MAX_CRITERIA} success criteria, with the expected format and quality "
        "requirements when it gives them, as JSON; an unreadable answer is asked for "
        "again. Its response is that JSON; criteria_met branches of later steps check an "
        "answer against the criteria."
    ),
    fields=(
        actor("The model alias that analyses the request."),
        prompt("Request", 'The request to analyse, e.g. "{request}".'),
        TIMEOUT,
        REQUIRES,
        FieldSpec(
            "max_attempts",
            "Attempts",
            "integer",
            default=DEFAULT_MAX_ATTEMPTS,
            help=(
                f"How many answers the model may give (1 to {MAX_ATTEMPTS_LIMIT}) before an "
                "unreadable one fails the step."
            ),
        ),
    ),
    read_body=read_body,
    article="an",
)
