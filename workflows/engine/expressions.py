"""JMESPath expressions written by recipe authors, compiled and evaluated within bounds.

Transform steps (`transform.py`, in the worker) and webhook inputs (`webhooks.py`, in the
web request) both evaluate expressions through this module. JMESPath itself has no bound:
`[@, @]` doubles its input and a pipe of such lists (`[@,@] | [@,@] | ...`) or nested
`to_string([...])` calls double it again at each level, so a few hundred characters would
describe more data than any machine holds. Here every value an evaluation builds (a list, an
object or a string that was not in the input) is sized as it is built, as JSON characters:

- one value larger than both `MAX_VALUE_CHARS` and the input is refused;
- an evaluation that builds more than `WORK_FACTOR` times that in all, counting one more
  for each node of the expression it evaluates (a filter visits its condition once per
  element), is refused, which bounds its time as well.

Both raise `ExpressionLimit`, a JMESPath error, so callers report it as they report a
function given the wrong type. An expression nested deeper than `MAX_NESTING` is refused
when it is compiled.
"""

from __future__ import annotations

import functools
from typing import Any

import jmespath  # type: ignore[import-untyped]
from jmespath.exceptions import JMESPathError, ParseError  # type: ignore[import-untyped]
from jmespath.visitor import Options, TreeInterpreter  # type: ignore[import-untyped]

MAX_VALUE_CHARS = 200_000
WORK_FACTOR = 10
MAX_NESTING = 40
# What `true`, `false`, `null` or a float count: at most the digits of a float's repr.
_SCALAR_CHARS = 24


class ExpressionLimit(JMESPathError):  # type: ignore[misc]
    """An evaluation that would build too large a value or do too much work."""


class NestingError(ParseError):  # type: ignore[misc]
    """An expression nested too deeply to be evaluated within bounds."""

    def __init__(self, message: str) -> None:
        JMESPathError.__init__(self, message)
        self.lex_position = None
        self.message = message

    def __str__(self) -> str:
        return self.message


@functools.lru_cache(maxsize=1024)
def compile(expression: str) -> Any:
    """Return `expression` parsed (jmespath's ParsedResult); raise a JMESPathError when it
    does not parse or nests more than `MAX_NESTING` levels."""
    try:
        parsed = jmespath.compile(expression)
    except RecursionError:
        raise _too_deep() from None
    if _depth(parsed.parsed) > MAX_NESTING:
        raise _too_deep()
    return parsed


def search(compiled: Any, data: object) -> Any:
    """Evaluate a compiled expression over `data` within the bounds; raise ExpressionLimit
    past them (or a JMESPathError the expression's own evaluation raises)."""
    interpreter = _BoundedInterpreter()
    try:
        interpreter.start(data)
        return interpreter.visit(compiled.parsed, data)
    except RecursionError:
        raise ExpressionLimit("the data is nested too deeply to evaluate") from None


def _too_deep() -> NestingError:
    return NestingError(f"the expression nests more than {MAX_NESTING} levels deep")


def _depth(root: dict[str, Any]) -> int:
    """Return the depth of a syntax tree (without recursion: the tree may be deep)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in node.get("children") or () if isinstance(c, dict))
    return deepest


class _BoundedInterpreter(TreeInterpreter):  # type: ignore[misc]
    """JMESPath's interpreter, sizing each value it builds (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(Options())
        # id -> (value, JSON characters): each list, object or string seen, kept alive so
        # that its id is not reused while this evaluation runs.
        self._sizes: dict[int, tuple[object, int]] = {}
        self._limit = MAX_VALUE_CHARS
        self._work = 0
        self._work_limit = WORK_FACTOR * MAX_VALUE_CHARS

    def start(self, data: object) -> None:
        """Size the input: its values are not built by the expression."""
        self._limit = max(MAX_VALUE_CHARS, self._size(data))
        self._work_limit = WORK_FACTOR * self._limit

    def visit(self, node: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        self._charge(1)
        result = super().visit(node, *args, **kwargs)
        if isinstance(result, list | dict | str) and id(result) not in self._sizes:
            size = self._size(result)
            if size > self._limit:
                raise ExpressionLimit(
                    f"the expression builds a value of more than {self._limit} characters of JSON"
                )
            self._charge(size)
        return result

    def _charge(self, units: int) -> None:
        self._work += units
        if self._work > self._work_limit:
            raise ExpressionLimit(
                f"the expression does too much work (more than {self._work_limit} steps and "
                "characters built)"
            )

    def _size(self, value: object) -> int:
        """Return the JSON characters `value` holds, counting a value it holds N times N
        times; values already sized count what they were found to be."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value.bit_length() * 10 // 33 + 2  # its digits (an input may hold long ones)
        if not isinstance(value, list | dict | str):
            return _SCALAR_CHARS
        known = self._sizes.get(id(value))
        if known is not None:
            return known[1]
        if isinstance(value, str):
            size = len(value) + 2
        elif isinstance(value, list):
            size = 2 + sum(self._size(item) + 1 for item in value)
        else:
            size = 2 + sum(len(str(k)) + 4 + self._size(v) for k, v in value.items())
        self._sizes[id(value)] = (value, size)
        return size
