"""Transform steps: compute facts from the run's facts, inputs and answers with JMESPath.

A `transform` step's `set` maps fact names to JMESPath expressions (jmespath.org). Each is
compiled when the recipe is read (`compile_problem`) and evaluated over one JSON view of the
run (`run_view`):

    {**facts, "facts": facts, "inputs": inputs, "steps": {KEY: answer, ...}}

The facts are at the root, so `items[0].name` reads the fact `items`; `facts.NAME` reads a
fact whatever its name (one called `facts`, `inputs` or `steps` is hidden at the root by the
view's own keys). `steps.KEY` is step KEY's latest answer: its JSON when the answer is JSON
(bare or in one fenced block, or an object followed by commentary), else its text. Every
expression of a step reads the view as the step found it (a stored document keeps no key
order): a result another expression needs is set by an earlier transform step.

JMESPath runs no code: it only selects and reshapes the data (and its functions, such as
`sum`, `length` or `join`, compute over it). Results must be JSON that every database can
store: a NaN or an Infinity (`sum` of huge numbers) fails the step, naming the expression.
Evaluation is bounded (`expressions.py`): an expression that would build too large a value or
do too much work fails the step the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jmespath.exceptions import JMESPathError  # type: ignore[import-untyped]
from jmespath.functions import Functions  # type: ignore[import-untyped]

from workflows.engine import expressions as bounded
from workflows.engine.answers import json_object, strict_json, unfence
from workflows.engine.errors import EngineError

# A fact's name: what `field_compare`'s paths and templates can name.
FACT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_EXPRESSIONS = 50
MAX_EXPRESSION_CHARS = 2000
# The JSON of what one step sets (its response): beyond it, the step fails.
MAX_RESULT_CHARS = 200_000
# The view's own keys, at its root beside the facts.
VIEW_KEYS = ("facts", "inputs", "steps")
_FUNCTIONS = frozenset(Functions.FUNCTION_TABLE)


class TransformError(EngineError):
    """An expression that failed at run time; `path` names it (`steps[2].set.total`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _compiled(expression: str) -> Any:
    return bounded.compile(expression)


def compile_problem(expression: str) -> str | None:
    """Return why `expression` is no JMESPath expression this step can run, or None."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        return f"an expression has at most {MAX_EXPRESSION_CHARS} characters"
    try:
        parsed = _compiled(expression)
    except JMESPathError as exc:
        return _message(exc)
    unknown = sorted(set(_function_names(parsed.parsed)) - _FUNCTIONS)
    if unknown:
        return f"unknown function {', '.join(f'{name}()' for name in unknown)}"
    return None


_STEPS = {"type": "field", "children": [], "value": "steps"}
# Nodes whose first child is evaluated where the node is, the others on its result.
_CHAINS = frozenset(
    {"subexpression", "index_expression", "projection", "value_projection", "filter_projection",
     "pipe"}
)  # fmt: skip


def steps_named(expression: str) -> set[str]:
    """Return the step keys a compiled expression reads as `steps.KEY`."""
    names: set[str] = set()
    _reads_steps(_compiled(expression).parsed, names)
    return names


def steps_read(expressions: Mapping[str, str]) -> frozenset[str] | None:
    """Return the keys of the steps whose answers the expressions read, as `steps.KEY`;
    None when one may read any step's (`keys(steps)`, `steps.*`)."""
    names: set[str] = set()
    reads_any = [_reads_steps(_compiled(e).parsed, names) for e in expressions.values()]
    return None if any(reads_any) else frozenset(names)


def _reads_steps(node: object, names: set[str], at_root: bool = True) -> bool:
    """Add the keys `node` reads as `steps.KEY` of the view to `names`; tell whether it
    reads the view's `steps` any other way. `at_root`: `node` is evaluated on the view (not
    on a value found in it, as `items[].steps` is)."""
    if not isinstance(node, dict) or not at_root:
        return False
    children = node.get("children") or []
    kind = node.get("type")
    if kind in _CHAINS and children:
        first, rest = children[0], children[1:]
        key = rest[0] if rest else {}
        if kind == "subexpression" and first == _STEPS and key.get("type") == "field":
            names.add(str(key.get("value")))
            return False
        return _reads_steps(first, names)
    if kind == "expref":  # `&weight`: evaluated on each item a function is given
        return False
    if node == _STEPS:
        return True
    return any([_reads_steps(child, names) for child in children])


def _message(exc: JMESPathError) -> str:
    """Return JMESPath's message on one line: its first, with the column it points at."""
    first = str(exc).splitlines()[0].removesuffix(":").removesuffix(", for expression")
    column = getattr(exc, "lex_position", None)
    if isinstance(column, int) and "column" not in first:
        first = f"{first} (at column {column})"
    return first


def _function_names(node: object) -> Iterator[str]:
    """Yield the name of every function an expression's syntax tree calls."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "function_expression":
        yield str(node.get("value"))
    for child in node.get("children") or ():
        yield from _function_names(child)


def answer_value(answer: str) -> Any:
    """Return an answer as the view shows it: its JSON when it is JSON, else its text."""
    body, _ = unfence(answer.strip())
    try:
        return strict_json(body)
    except (ValueError, RecursionError):
        pass
    found = json_object(answer)
    return answer if found is None else found


def run_view(
    facts: Mapping[str, Any], inputs: Mapping[str, Any], answers: Mapping[str, str]
) -> dict[str, Any]:
    """Return the JSON view the expressions read (see the module's docstring)."""
    return {
        **facts,
        "facts": dict(facts),
        "inputs": dict(inputs),
        "steps": {key: answer_value(text) for key, text in answers.items()},
    }


def evaluate(expressions: Mapping[str, str], view: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Evaluate each expression over `view`; return the results by name.

    Raise TransformError naming `path.set.NAME` for an expression that fails, or whose
    result is not JSON every database can store.
    """
    results: dict[str, Any] = {}
    for name, expression in expressions.items():
        where = f"{path}.set.{name}"
        try:
            value = bounded.search(_compiled(expression), view)
        except JMESPathError as exc:
            raise TransformError(where, _message(exc)) from None
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise TransformError(
                where, "the result holds NaN or Infinity, which JSON has not"
            ) from None
        results[name] = value
    size = len(json.dumps(results, ensure_ascii=False))
    if size > MAX_RESULT_CHARS:
        raise TransformError(
            f"{path}.set", f"the results are {size} characters of JSON, at most {MAX_RESULT_CHARS}"
        )
    return results
