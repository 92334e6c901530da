"""`and`, `or`, `not`: conditions that combine others, `{"type": "and", "conditions": [...]}`.

The reference designs also write `{"type": "check_both", "operator": "and", ...}`: a type
name that is no condition type, with a logical operator. Both forms are accepted. Branch
conditions and decision-tree conditions combine alike, so both read this module.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from workflows.engine.errors import EngineError

LOGICAL_TYPES: tuple[str, ...] = ("and", "or", "not")
# The combinators that take any number of operands (`not` takes one).
SEVERAL_OPERANDS: tuple[str, ...] = ("and", "or")
HELP = (
    "The combination of its conditions (`not` takes one); "
    '`{"type": "…", "operator": "and", "conditions": [...]}` is accepted too.'
)

Operand = TypeVar("Operand")
Given = TypeVar("Given")


def logical_kind(
    condition_type: object, operator: object, plain_types: Collection[str]
) -> str | None:
    """Return `and`/`or`/`not` when a condition document combines others, else None.

    `plain_types` are the type names that are not combinators, whatever their operator.
    """
    if isinstance(condition_type, str) and condition_type in LOGICAL_TYPES:
        return condition_type
    if (
        isinstance(operator, str)
        and operator in LOGICAL_TYPES
        and not (isinstance(condition_type, str) and condition_type in plain_types)
    ):
        return operator
    return None


def operands_problem(logical: str, operands: object) -> str | None:
    """Return what is wrong with a combination's `conditions`, or None."""
    if not isinstance(operands, list) or not operands:
        return f"{logical} needs a non-empty list of conditions"
    if logical not in SEVERAL_OPERANDS and len(operands) != 1:
        return f"{logical} takes exactly one condition, got {len(operands)}"
    return None


def combine(
    logical: str,
    operands: Sequence[Operand],
    evaluate: Callable[[Operand, Given], tuple[bool | None, str]],
    given: Given,
) -> tuple[bool | None, str]:
    """Evaluate a combination, `evaluate(operand, given)` for each operand; say why it holds.

    `and` stops at the first false operand, `or` at the first true one: later operands are
    not asked (a judge among them costs a model call). An operand may be not applicable
    (None: it reads the answer of a step that failed); the logic is then three-valued
    (Kleene's): `not` of it is not applicable too, `and` is false if another operand is,
    else not applicable; `or` is true if another operand is, else not applicable.
    """
    if logical == "not":
        if len(operands) != 1:
            raise EngineError(f"not takes exactly one condition, got {len(operands)}")
        result, reason = evaluate(operands[0], given)
        return None if result is None else not result, f"not: [{reason}]"
    reasons: list[str] = []
    decisive = logical == "or"  # the operand value that decides the whole
    undecided = False  # an operand was not applicable
    for operand in operands:
        result, reason = evaluate(operand, given)
        reasons.append(reason)
        if result is None:
            undecided = True
        elif result == decisive:
            return decisive, f"{logical}: [{'; '.join(reasons)}]"
    return None if undecided else not decisive, f"{logical}: [{'; '.join(reasons)}]"


def summarize(logical: str, parts: list[str], *, nested: bool) -> str:
    """Return the short label of a combination from its operands' labels.

    `not (a)`; `a and b`, in parentheses when it is itself an operand.
    """
    if logical == "not":
        return f"not ({parts[0] if parts else ''})"
    inner = f" {logical} ".join(parts)
    return f"({inner})" if nested else inner
