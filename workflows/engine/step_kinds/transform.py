"""`transform`: compute facts from facts, inputs and earlier answers; no model is called.

`set` maps each fact name to a JMESPath expression over the run's JSON view (see
`workflows/engine/transform.py`). Its response is the JSON object of what it set; its
results are added to the facts the step saw (the previous step's stay), not put in their
place as another step's JSON answer is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY
from workflows.engine.transform import (
    FACT_NAME,
    MAX_EXPRESSIONS,
    VIEW_KEYS,
    compile_problem,
    steps_named,
)


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read `set`: fact names and their expressions, each compiled now."""
    where = f"{path}.set"
    value = doc.get("set")
    if value is None or value == {}:
        reader.error(where, "is required: an object of fact name: JMESPath expression")
        return {"set": {}}
    expressions = reader.mapping(value, where)
    if expressions is None:
        return {"set": {}}
    if len(expressions) > MAX_EXPRESSIONS:
        reader.error(where, f"at most {MAX_EXPRESSIONS} expressions, got {len(expressions)}")
        return {"set": {}}
    checked: dict[str, str] = {}
    for name, expression in expressions.items():
        at = f"{where}.{name}"
        if not isinstance(name, str) or not FACT_NAME.fullmatch(name):
            reader.error(at, "a fact's name is a letter or _, then letters, digits or _")
        elif name in VIEW_KEYS:
            reader.error(at, f"{', '.join(VIEW_KEYS)} are the view's own names; choose another")
        elif not isinstance(expression, str) or not expression.strip():
            reader.error(at, "must be a JMESPath expression (non-empty text)")
        else:
            problem = compile_problem(expression)
            unknown = sorted(steps_named(expression) - set(reader.keys)) if not problem else []
            if problem is not None:
                reader.error(at, problem)
            elif unknown:
                reader.error(at, f"there is no step '{unknown[0]}' (steps.KEY reads its answer)")
            else:
                checked[name] = expression
    return {"set": checked}


STEP_KIND = StepKind(
    name="transform",
    label="Transform (compute facts)",
    help=(
        "Computes facts with JMESPath expressions over the run's facts (at the root), "
        "inputs and earlier answers (steps.KEY, as JSON when they are JSON), with no model "
        "call. Its response is the JSON of what it set; the results are added to the facts."
    ),
    fields=(
        FieldSpec(
            "set",
            "Set",
            "text",
            required=True,
            help='JSON: an object of fact name: expression ("total": "sum(items[].price)").',
        ),
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
    merges_facts=True,
)
