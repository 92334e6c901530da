"""`classify`: a model selects the routes that fit the input, from few-shot examples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.classification import Route, RouteExample
from workflows.engine.field_spec import FieldSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import (
    FAILURE_SEVERITY,
    REQUIRES,
    TIMEOUT,
    actor,
    prompt,
)
from workflows.engine.vocabulary import DEFAULT_MAX_RECLASSIFY

MAX_RECLASSIFY_LIMIT = 10


def read_head(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the routes, which route_selected branches of any step may name."""
    path = f"{path}.routes"
    value = doc.get("routes")
    if value is None:
        reader.error(path, "is required for a classify step")
        return {"routes": ()}
    if not isinstance(value, list) or not value:
        reader.error(path, "must be a non-empty list of routes")
        return {"routes": ()}
    routes: list[Route] = []
    names: set[str] = set()
    for i, route_doc in enumerate(value):
        route = _route(route_doc, f"{path}[{i}]", reader)
        if route is None:
            continue
        if route.name in names:
            reader.error(f"{path}[{i}].name", f"duplicate route '{route.name}'")
            continue
        names.add(route.name)
        routes.append(route)
    reader.route_names.update(names)
    return {"routes": tuple(routes)}


def _route(value: object, path: str, reader: DocumentReader) -> Route | None:
    doc = reader.mapping(value, path)
    if doc is None:
        if value is None:
            reader.error(path, "must be an object, got null")
        return None
    name = reader.text(doc, "name", f"{path}.name", required=True)
    instructions = reader.text(doc, "instructions", f"{path}.instructions") or ""
    always = doc.get("always_active", False)
    if not isinstance(always, bool):
        reader.error(f"{path}.always_active", "must be true or false")
        always = False
    examples: list[RouteExample] = []
    raw = doc.get("examples") or []
    if not isinstance(raw, list):
        reader.error(f"{path}.examples", "must be a list")
        raw = []
    for i, example_doc in enumerate(raw):
        example_path = f"{path}.examples[{i}]"
        example = reader.mapping(example_doc, example_path)
        if example is None:
            continue
        text = reader.text(example, "text", f"{example_path}.text", required=True)
        selected = example.get("selected")
        if not isinstance(selected, bool):
            reader.error(f"{example_path}.selected", "must be true or false")
        reason = reader.text(example, "reason", f"{example_path}.reason") or ""
        if text is not None and isinstance(selected, bool):
            examples.append(RouteExample(text, selected, reason))
    if name is None:
        return None
    return Route(name, instructions, tuple(examples), always)


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read `bypass` and `max_reclassify`."""
    bypass = doc.get("bypass", False)
    if bypass is None:
        bypass = False
    if not isinstance(bypass, bool):
        reader.error(f"{path}.bypass", "must be true or false")
        bypass = False
    max_reclassify = doc.get("max_reclassify")
    if max_reclassify is None:
        max_reclassify = DEFAULT_MAX_RECLASSIFY
    elif not is_int(max_reclassify) or not 0 <= max_reclassify <= MAX_RECLASSIFY_LIMIT:
        reader.error(
            f"{path}.max_reclassify",
            f"must be a whole number from 0 to {MAX_RECLASSIFY_LIMIT}, got {max_reclassify!r}",
        )
        max_reclassify = DEFAULT_MAX_RECLASSIFY
    return {"bypass": bypass, "max_reclassify": max_reclassify}


STEP_KIND = StepKind(
    name="classify",
    label="Classify",
    help="A model selects the routes that fit the input; route_selected branches read them.",
    fields=(
        actor("The model alias that classifies."),
        prompt("Input to classify"),
        TIMEOUT,
        REQUIRES,
        FAILURE_SEVERITY,
        FieldSpec(
            "routes",
            "Routes",
            "text",
            required=True,
            help="JSON: a list of {name, instructions, examples, always_active}.",
        ),
        FieldSpec("bypass", "Select every route (bypass)", "boolean", default=False),
        FieldSpec(
            "max_reclassify",
            "Reclassify attempts",
            "integer",
            default=DEFAULT_MAX_RECLASSIFY,
            help=f"How often an unreadable answer is asked again (0 to {MAX_RECLASSIFY_LIMIT}).",
        ),
    ),
    read_head=read_head,
    read_body=read_body,
)
