"""Helpers for import tests: mutations of the minimal document, and how errors are checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from workflows.models import Branch, Recipe, RecipeActor, Step
from workflows.services import recipe_import
from workflows.validators import RecipeRejected

Mutation = Callable[[dict[str, Any]], None]


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (Recipe, Step, Branch, RecipeActor)}


def rejection(user: Any, data: Any, **kwargs: Any) -> list[str]:
    """Import `data` and return the errors it is rejected with (failing if it is accepted)."""
    with pytest.raises(RecipeRejected) as caught:
        recipe_import(user=user, data=data, **kwargs)
    assert caught.value.errors, "a rejection lists its errors"
    return caught.value.errors


def assert_reported(errors: list[str], expected: str) -> None:
    """Check that `expected` is among `errors`: exactly, or matching where it has a '*'."""
    if "*" in expected[:-1]:
        head, _, tail = expected.partition("*")
        assert any(e.startswith(head) and e.endswith(tail) for e in errors), (expected, errors)
    elif expected.endswith("*"):
        prefix = expected[:-1]
        assert any(e.startswith(prefix) for e in errors), f"no error starts {prefix!r}: {errors}"
    else:
        assert expected in errors, f"{expected!r} not in {errors}"


def branch(**fields: Any) -> dict[str, Any]:
    """Return a valid branch of the `write` step, with `fields` replacing its keys."""
    return {
        "name": "too_short",
        "priority": 1,
        "when": {"type": "length_check", "operator": "less_than", "value": 200},
        "action": "CONTINUE",
        "target": "@complete",
        **fields,
    }


def with_branches(*branches: dict[str, Any]) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"][0]["branches"] = list(branches)

    return mutate


def with_step(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"][0].update(fields)

    return mutate


def with_doc(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc.update(fields)

    return mutate


def without(*path: str | int) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


def added_step(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"].append({"key": "second", "name": "Second", "prompt": "", **fields})

    return mutate


def tree_step(tree: Any, **fields: Any) -> Mutation:
    return added_step(kind="decision_tree", tree=tree, **fields)


def leaf(name: str) -> dict[str, Any]:
    return {"type": "leaf", "prompt": name}


def pattern(value: str, **fields: Any) -> dict[str, Any]:
    return {"type": "pattern_match", "operator": "regex_match", "value": value, **fields}
