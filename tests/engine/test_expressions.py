"""Recipe authors' JMESPath evaluated within bounds: an expression that doubles its data at
each level is refused quickly, however it nests; ordinary expressions are evaluated as
JMESPath evaluates them."""

from __future__ import annotations

import time
from typing import Any

import jmespath
import pytest
from jmespath.exceptions import JMESPathError

from workflows.engine import expressions
from workflows.engine.expressions import MAX_NESTING, ExpressionLimit

# Each level doubles the value: 22 levels are 12.5 MB, 30 levels are 2**30 times the input.
PIPED_BOMB = " | ".join(["to_string([@, @])"] * 30)
JOINED_BOMB = " | ".join(["join('', [@, @])"] * 30)
LISTED_BOMB = "|".join(["[@,@]"] * 30) + "|to_string(@)"
FLATTENED_BOMB = "|".join(["[@,@]"] * 20) + "|" + "[]" * 19


def search(expression: str, data: object) -> Any:
    return expressions.search(expressions.compile(expression), data)


@pytest.mark.parametrize("bomb", [PIPED_BOMB, JOINED_BOMB, LISTED_BOMB, FLATTENED_BOMB])
def test_a_value_doubled_at_each_level_is_refused_quickly(bomb: str) -> None:
    started = time.monotonic()

    with pytest.raises(ExpressionLimit, match="builds a value of more than 200000 characters"):
        search(bomb, "payload")

    assert time.monotonic() - started < 1


def test_a_long_number_counts_its_digits() -> None:
    grow = "|".join(["[@,@]"] * 12) + "|to_string(@)"  # 4,096 times the number

    assert len(search(grow, 12345)) == 4096 * 5 + 4095 * 3  # the digits, each list's "[,]"
    with pytest.raises(ExpressionLimit, match="builds a value of more than 200000 characters"):
        search(grow, int("9" * 4000))


def test_a_value_larger_than_the_input_is_what_is_refused() -> None:
    text = "x" * 300_000

    assert search("a", {"a": text}) == text
    assert search("to_string(a)", {"a": [text]}) == f'["{text}"]'
    with pytest.raises(ExpressionLimit, match="more than 300009 characters"):
        search("[a, a]", {"a": text})


def test_too_deep_a_nesting_is_refused_when_compiled() -> None:
    # 70 levels fit in an expression's length; the parser itself fails past some hundreds.
    for expression in [" | ".join(["to_string([@, @])"] * 70), "[" * 600 + "@" + "]" * 600]:
        with pytest.raises(JMESPathError) as refused:
            expressions.compile(expression)
        assert str(refused.value) == f"the expression nests more than {MAX_NESTING} levels deep"


def test_an_evaluation_doing_too_much_work_is_refused() -> None:
    # Each element is turned into 100 kB: every value is small enough, their sum is not.
    grow = "|".join(["[@,@]"] * 14) + "|to_string(@)"
    with pytest.raises(ExpressionLimit, match="does too much work"):
        search(f"[*].length({grow})", list(range(100)))


@pytest.mark.parametrize(
    ("expression", "data"),
    [
        ("items[?price > `2`].name | sort(@) | join(', ', @)", None),
        ("{total: sum(items[].price), names: items[*].name, first: items[0]}", None),
        ("sort_by(items, &price)[-1].name", None),
        ("merge({a: `1`}, {b: to_string(items[0])})", None),
        ("map(&to_array(name), items) | [] | reverse(@)", None),
        ("values(@)[*][*].price | [] | max(@)", None),
        ("length(to_string(@))", None),
    ],
)
def test_ordinary_expressions_give_what_jmespath_gives(expression: str, data: object) -> None:
    data = {"items": [{"name": n, "price": p} for n, p in [("a", 3), ("b", 1), ("c", 5)]]}

    assert search(expression, data) == jmespath.search(expression, data)


def test_a_large_input_is_evaluated_in_full() -> None:
    items = [{"n": i, "name": f"item {i}"} for i in range(20_000)]

    found = search("sort_by(items[?n >= `10`], &name)[*].{id: n} | length(@)", {"items": items})

    assert found == 19_990
