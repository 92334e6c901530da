"""`retrieve`: search knowledge bases; no model is called, the hits are the step's response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY, read_sources, sources


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the sources, at least one; a search without a query needs an input to search for."""
    specs = read_sources(doc, path, reader, required=True)
    if not reader.input_names:
        for i, spec in enumerate(specs):
            if not spec.query:
                reader.error(
                    f"{path}.sources[{i}].query",
                    "is required: the recipe has no input whose value it could search for",
                )
    return {"sources": specs}


STEP_KIND = StepKind(
    name="retrieve",
    label="Retrieve (search sources)",
    help=(
        "Searches knowledge bases, with no model call; its response is the hits, numbered "
        "[1], [2]… for the steps after it to cite. It leaves the run's facts as they were."
    ),
    fields=(
        sources(
            "A search without a query searches for the value of the recipe's first input.",
            required=True,
        ),
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
    overlays_facts=False,
)
