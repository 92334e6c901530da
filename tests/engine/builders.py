"""Build small recipe documents for the engine tests."""

from __future__ import annotations

from typing import Any

from workflows.engine import Condition, RecipeGraph, parse_recipe

ACTORS = {
    "writer": "llama3.2:latest",
    "judge": "qwen3:latest",
    "critic": "mistral:latest",
    "editors": "@human:editors",
}


def recipe(*steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Return a valid recipe document holding `steps` (fields override the defaults)."""
    doc: dict[str, Any] = {
        "format": "branchline.recipe/v1",
        "slug": "test-recipe",
        "name": "Test recipe",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": dict(ACTORS),
        "steps": list(steps),
    }
    doc.update(fields)
    return doc


def step(key: str, *branches: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Return an llm step run by `writer` (fields override the defaults)."""
    doc: dict[str, Any] = {
        "key": key,
        "name": key.replace("_", " ").title(),
        "actor": "writer",
        "prompt": "Write the next part.",
        "branches": list(branches),
    }
    doc.update(fields)
    return doc


def branch(
    name: str,
    priority: int,
    when: dict[str, Any] | None = None,
    action: str = "CONTINUE",
    target: str | None = "@complete",
    **fields: Any,
) -> dict[str, Any]:
    """Return a branch; `when` defaults to the default condition."""
    doc: dict[str, Any] = {
        "name": name,
        "priority": priority,
        "when": when if when is not None else {"type": "default"},
        "action": action,
    }
    if target is not None:
        doc["target"] = target
    doc.update(fields)
    return doc


def graph(*steps: dict[str, Any], **fields: Any) -> RecipeGraph:
    """Parse a recipe holding `steps`."""
    return parse_recipe(recipe(*steps, **fields))


def condition(when: dict[str, Any], *, kind: str = "llm") -> Condition:
    """Parse `when` as the condition of a one-branch step and return it, prepared."""
    extra: dict[str, Any] = {}
    if kind == "human":
        extra = {"kind": "human", "actor": "editors"}
    routes = step(
        "triage",
        kind="classify",
        routes=[{"name": "billing"}, {"name": "respond", "always_active": True}],
    )
    parsed = graph(step("s", branch("b", 1, when), **extra), routes)
    return parsed.steps[0].branches[0].when
