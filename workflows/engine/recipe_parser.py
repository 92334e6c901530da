"""Check what a recipe-format-v1 document means and build its RecipeGraph.

Every error is collected as `path: message` (e.g.
`steps[2].branches[0].when.operator: unknown operator 'lessthan'; ...`) and raised together in
one RecipeInvalid. The structural schema is checked elsewhere; here wrong types are reported,
never crashed on, and unknown extra keys are ignored.

This module reads the document, its inputs, actors and steps; each step kind reads its own
fields (`step_kinds/`), `branch_reader.py` the branches and `conditions/reader.py` their
conditions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.branch_reader import BranchReader
from workflows.engine.budget import parse_budget
from workflows.engine.callbacks import parse_callbacks
from workflows.engine.checks import is_int, is_number, listed
from workflows.engine.conditions.base import ConditionScope
from workflows.engine.errors import RecipeInvalid
from workflows.engine.files import SPEC_FIELDS as FILE_SPEC_FIELDS
from workflows.engine.files import is_file_type, read_file_spec
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.inputs import input_type_problem
from workflows.engine.learner import parse_learning
from workflows.engine.reading import DocumentReader
from workflows.engine.schedules import parse_schedules
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import read_failure_severity, read_requires
from workflows.engine.step_kinds.llm import read_recipe_validation
from workflows.engine.step_kinds.registry import DEFAULT_KIND, KIND_NAMES, step_kind
from workflows.engine.templating import step_number
from workflows.engine.vocabulary import FORMAT, INPUT_TYPES, LEARNED
from workflows.engine.webhooks import parse_webhooks

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
STEP_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# YAML aliases let a small file name one list many times over: checking such a document
# node by node must not take exponential time.
MAX_STEPS = 1000


def parse_recipe(doc: object) -> RecipeGraph:
    """Check a recipe-format-v1 document's meaning and build its graph.

    Raise RecipeInvalid listing every error as `path: message`; never raise anything else
    for bad input.
    """
    if not isinstance(doc, Mapping):
        raise RecipeInvalid(["$: a recipe is a JSON object (a mapping)"])
    try:
        return _Parser(doc).parse()
    except RecipeInvalid:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        # Every shape is checked above; this keeps a missed one from becoming a crash.
        raise RecipeInvalid(
            [f"$: the recipe could not be read ({type(exc).__name__}: {exc})"]
        ) from None


@dataclass
class _StepHead:
    """A step as read in the first pass: what the branches of any step may refer to."""

    path: str
    doc: Mapping[str, Any]
    key: str | None
    kind: StepKind
    # The kind's fields read in the first pass (a human step's options, a classify step's
    # routes), as StepSpec keyword arguments.
    fields: dict[str, Any] = field(default_factory=dict)


class _Parser(DocumentReader):
    """Walk one document, collecting errors; each method reports at the path it is given."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        super().__init__()
        self.doc = doc
        self.branch_reader = BranchReader(self)
        self.step_kinds: dict[str, str] = {}

    def parse(self) -> RecipeGraph:
        doc = self.doc
        fmt = doc.get("format")
        if fmt is None:
            self.error("format", f"is required; use '{FORMAT}'")
        elif fmt != FORMAT:
            self.error("format", f"must be '{FORMAT}', got {fmt!r}")
        slug = self.text(doc, "slug", "slug", required=True)
        if slug is not None and not SLUG.fullmatch(slug):
            self.error("slug", f"must match ^[a-z0-9][a-z0-9_-]*$, got {slug!r}")
        name = self.text(doc, "name", "name", required=True)
        description = self.text(doc, "description", "description") or ""
        self.parse_inputs(doc.get("inputs"))
        self.parse_actors(doc.get("actors"))
        self.validation_defaults = read_recipe_validation(doc.get("validation"), self)
        steps = self.parse_steps(doc.get("steps"))
        budget = parse_budget(doc.get("budget"), self.error)
        learning = parse_learning(doc.get("learning"), self.error)
        webhooks = parse_webhooks(doc.get("webhooks"), self.error, self.input_names)
        callbacks = parse_callbacks(doc.get("callbacks"), self.error)
        schedules = parse_schedules(doc.get("schedules"), self.error, self.inputs)
        if self.errors:
            raise RecipeInvalid(self.errors)
        return RecipeGraph(
            slug=slug or "",
            name=name or "",
            description=description,
            inputs=self.inputs,
            actors=self.actors,
            steps=tuple(steps),
            budget=budget,
            learning=learning,
            webhooks=webhooks,
            callbacks=callbacks,
            schedules=schedules,
        )

    def parse_inputs(self, value: object) -> None:
        inputs = self.mapping(value, "inputs") or {}
        for name, spec_doc in inputs.items():
            path = f"inputs.{name}"
            if not isinstance(name, str) or not INPUT_NAME.fullmatch(name):
                self.error(path, "the name must be an identifier (letters, digits and _)")
                continue
            if name == "feedback" or step_number(name) is not None:
                self.error(path, f"the name '{name}' is reserved for templates")
                continue
            # Known even if its spec is wrong, so templates naming it report nothing more.
            self.input_names.add(name)
            spec = self.mapping(spec_doc, path)
            if spec is None:
                if spec_doc is None:
                    self.inputs[name] = {"type": "string", "required": False}
                continue
            kind = spec.get("type", "string")
            if kind not in INPUT_TYPES:
                self.error(
                    f"{path}.type",
                    f"unknown type {kind!r}; expected one of: {listed(INPUT_TYPES)}",
                )
                continue
            required = spec.get("required", False)
            if not isinstance(required, bool):
                self.error(f"{path}.required", "must be true or false")
                required = False
            parsed: dict[str, Any] = {"type": kind, "required": required}
            if is_file_type(kind):
                parsed.update(read_file_spec(spec, path, self, kind))
            else:
                for key in FILE_SPEC_FIELDS:
                    if key in spec:
                        self.error(f"{path}.{key}", "only a file or files input takes it")
            if not is_file_type(kind) and spec.get("default") is not None:
                problem = input_type_problem(kind, spec["default"])
                if problem:
                    self.error(f"{path}.default", problem)
                else:
                    parsed["default"] = spec["default"]
            self.inputs[name] = parsed

    def parse_actors(self, value: object) -> None:
        actors = self.mapping(value, "actors") or {}
        for alias, reference in actors.items():
            if not isinstance(reference, str) or not reference.strip():
                self.error(f"actors.{alias}", "must be a non-empty actor name")
                continue
            self.actors[str(alias)] = reference

    # -- steps ---------------------------------------------------------------------------

    def parse_steps(self, value: object) -> list[StepSpec]:
        if value is None:
            self.error("steps", "is required")
            return []
        if not isinstance(value, list):
            self.error("steps", f"must be a list, got {type(value).__name__}")
            return []
        if not value:
            self.error("steps", "a recipe needs at least one step")
            return []
        if len(value) > MAX_STEPS:
            self.error("steps", f"a recipe has at most {MAX_STEPS} steps, got {len(value)}")
            return []
        self.step_count = len(value)
        heads = [self.step_head(doc, f"steps[{i}]") for i, doc in enumerate(value)]
        seen: dict[str, int] = {}
        for i, head in enumerate(heads):
            if head is None or head.key is None:
                continue
            if head.key in seen:
                self.error(
                    f"{head.path}.key",
                    f"duplicate step key '{head.key}' (also steps[{seen[head.key]}])",
                )
            else:
                seen[head.key] = i
        self.keys = list(seen)
        # What a condition naming another step checks it against (criteria_met's intent step).
        self.step_kinds = {
            head.key: head.kind.name
            for i, head in enumerate(heads)
            if head is not None and head.key is not None and seen.get(head.key) == i
        }
        steps = []
        for head in heads:
            if head is not None:
                step = self.step_body(head)
                if step is not None:
                    steps.append(step)
        return steps

    def step_head(self, doc: object, path: str) -> _StepHead | None:
        step = self.mapping(doc, path)
        if step is None:
            if doc is None:
                self.error(path, "must be an object, got null")
            return None
        key = self.text(step, "key", f"{path}.key", required=True)
        if key is not None and not STEP_KEY.fullmatch(key):
            self.error(f"{path}.key", f"must match ^[A-Za-z0-9][A-Za-z0-9_-]*$, got {key!r}")
            key = None
        name = step.get("kind", DEFAULT_KIND.name)
        kind = step_kind(name)
        if kind is None:
            self.error(
                f"{path}.kind",
                f"unknown step kind {name!r}; expected one of: {listed(KIND_NAMES)}",
            )
            kind = DEFAULT_KIND
        return _StepHead(path, step, key, kind, kind.read_head(step, path, self))

    def step_body(self, head: _StepHead) -> StepSpec | None:
        doc, path, kind = head.doc, head.path, head.kind
        name = self.text(doc, "name", f"{path}.name", required=True)
        if doc.get("actor") == LEARNED:
            actor: str | None = LEARNED
            if kind.name != "llm":
                self.error(f"{path}.actor", f"{LEARNED} is for llm steps only")
        else:
            actor = self.actor_alias(doc.get("actor"), f"{path}.actor")
        if doc.get("actor") is None and kind.actor_kind is not None:
            self.error(f"{path}.actor", f"is required for {kind.article} {kind.name} step")
        prompt = self.text(doc, "prompt", f"{path}.prompt") or ""
        self.check_template(prompt, f"{path}.prompt")
        timeout = doc.get("timeout_s")
        if timeout is not None and (not is_int(timeout) or timeout < 1):
            self.error(
                f"{path}.timeout_s", f"must be a whole number of seconds >= 1, got {timeout!r}"
            )
            timeout = None
        position = self.position(doc.get("position"), f"{path}.position")
        failure_severity = read_failure_severity(doc, path, self)
        requires = read_requires(doc, path, self)
        if requires and kind.actor_kind != "model":
            self.error(f"{path}.requires", f"{kind.article} {kind.name} step has no model actor")
        kind_fields = {**head.fields, **kind.read_body(doc, path, self)}
        if doc.get("sources") not in (None, []) and "sources" not in kind_fields:
            self.error(f"{path}.sources", f"{kind.article} {kind.name} step searches no sources")
        for key in (
            "tools",
            "max_tool_calls",
            "max_tool_seconds",
            "tool",
            "arguments",
            "max_attempts",
            "variants",
            "candidates",
            "output_schema",
            "output_schema_attempts",
            "images",
            "set",
            "method",
            "url",
            "headers",
            "query",
            "body",
            "secret_env",
            "retries",
        ):
            if doc.get(key) not in (None, [], {}) and key not in kind_fields:
                self.error(f"{path}.{key}", f"{kind.article} {kind.name} step has no {key}")
        scope = ConditionScope(
            errors=self.errors,
            actors=self.actors,
            route_names=self.route_names,
            step_options=kind_fields.get("options"),
            step_kinds=self.step_kinds,
            step_key=head.key,
        )
        branches = self.branch_reader.branches(
            doc.get("branches"), f"{path}.branches", head.key, scope
        )
        if name is None or head.key is None:
            return None
        return StepSpec(
            key=head.key,
            name=name,
            kind=kind.name,
            actor=actor,
            prompt=prompt,
            timeout_s=timeout,
            position=position,
            failure_severity=failure_severity,
            requires=requires,
            # A stable sort: branches of equal priority stay in document order.
            branches=tuple(sorted(branches, key=lambda b: b.priority)),
            **kind_fields,
        )

    def position(self, value: object, path: str) -> dict[str, Any] | None:
        doc = self.mapping(value, path)
        if doc is None:
            return None
        for axis in ("x", "y"):
            if not is_number(doc.get(axis)):
                self.error(f"{path}.{axis}", f"must be a number, got {doc.get(axis)!r}")
                return None
        return {"x": doc["x"], "y": doc["y"]}
