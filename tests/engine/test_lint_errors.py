"""`lint_errors`: what parses but may not be saved, as `path: message`.

A validation loop that can end below its threshold needs a fallback: without one, the run
went on with an empty answer as if it had been validated.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import graph, step
from workflows.engine import lint_errors, lint_recipe

MISSING = (
    "steps[1].validation.fallback: required: the loop can end below its threshold {t}, "
    "and the answer would then be empty"
)


@pytest.mark.parametrize(
    ("validation", "errors"),
    [
        ({"threshold": 0.75, "judge": "judge"}, [MISSING.format(t="0.75")]),
        ({}, [MISSING.format(t="0.75")]),  # the default threshold
        ({"threshold": 0.5, "fallback": ""}, [MISSING.format(t="0.5")]),
        ({"threshold": 1, "fallback": "  \n"}, [MISSING.format(t="1")]),
        ({"threshold": 0.75, "fallback": "I am not sure."}, []),
        # A threshold of 0 is always reached: the fallback is never used.
        ({"threshold": 0}, []),
        (None, []),
    ],
)
def test_a_loop_that_can_end_below_its_threshold_needs_a_fallback(
    validation: dict[str, Any] | None, errors: list[str]
) -> None:
    fields = {} if validation is None else {"validation": validation}
    g = graph(step("plan"), step("answer", **fields))
    assert lint_errors(g) == errors


def test_the_error_is_not_a_warning_too() -> None:
    g = graph(step("answer", validation={"threshold": 0.75}))
    assert lint_errors(g) and not lint_recipe(g)
