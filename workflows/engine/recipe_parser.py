"""Check what a recipe-format-v1 document means and build its RecipeGraph.

Every error is collected as `path: message` (e.g.
`steps[2].branches[0].when.operator: unknown operator 'lessthan'; ...`) and raised together in
one RecipeInvalid. The structural schema is checked elsewhere; here wrong types are reported,
never crashed on, and unknown extra keys are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.engine.conditions import NOTHING, as_bool, as_number, choices, prepare
from workflows.engine.decision_tree import leaves, validate_tree
from workflows.engine.errors import (
    EngineError,
    RecipeInvalid,
    RegexError,
    RegexTooLarge,
    TemplateError,
)
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec
from workflows.engine.inputs import input_type_problem
from workflows.engine.regex import check_flags, compile_pattern
from workflows.engine.routing import Route, RouteExample
from workflows.engine.templating import step_number, step_reference, template_names
from workflows.engine.vocabulary import (
    ACTION_ALIASES,
    ACTIONS,
    ALL_CONDITION_TYPES,
    COMPLETE,
    CONDITION_OPERATORS,
    CONDITION_TYPE_ALIASES,
    CONTENT_TYPES,
    DEFAULT_HUMAN_OPTIONS,
    DEFAULT_MAX_RECLASSIFY,
    END,
    FORMAT,
    INPUT_TYPES,
    LENGTH_UNITS,
    LOGICAL_TYPES,
    NUMERIC_TYPES,
    REPEAT,
    REPEAT_ACTIONS,
    SPECIAL_TARGETS,
    STEP_KINDS,
    canonical_operator,
    logical_kind,
    operators_listed,
)

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
STEP_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_TYPES = (*CONDITION_OPERATORS, *CONDITION_TYPE_ALIASES)
_CONDITION_KEYS = frozenset({"type", "operator", "value", "conditions"})
_MAX_NESTING = 32
# Limits on size: YAML aliases let a small file name one list or condition many times over,
# and checking such a document node by node must not take exponential time.
MAX_STEPS = 300
MAX_BRANCHES = 100
MAX_CONDITIONS = 5000
_MAX_RECLASSIFY_LIMIT = 10


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _listed(names: Iterable[object]) -> str:
    return ", ".join(sorted(str(n) for n in names)) or "none"


@dataclass
class _StepHead:
    """What the branches of any step may refer to, read in a first pass over the steps."""

    path: str
    doc: Mapping[str, Any]
    key: str | None
    kind: str
    options: tuple[str, ...] = DEFAULT_HUMAN_OPTIONS
    routes: tuple[Route, ...] = ()


class _Parser:
    """Walk one document, collecting errors; each method reports at the path it is given."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self.errors: list[str] = []
        self.actors: dict[str, str] = {}
        self.inputs: dict[str, dict[str, Any]] = {}
        self.input_names: set[str] = set()
        self.keys: list[str] = []
        self.step_count = 0
        self.route_names: set[str] = set()
        self.conditions_seen = 0

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{path}: {message}")

    # -- the document --------------------------------------------------------------------

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
        steps = self.parse_steps(doc.get("steps"))
        if self.errors:
            raise RecipeInvalid(self.errors)
        return RecipeGraph(
            slug=slug or "",
            name=name or "",
            description=description,
            inputs=self.inputs,
            actors=self.actors,
            steps=tuple(steps),
        )

    def text(
        self,
        doc: Mapping[str, Any],
        key: str,
        path: str,
        *,
        required: bool = False,
    ) -> str | None:
        """Return the string at `doc[key]`, reporting a missing, non-string or empty value.

        An empty string counts as missing only when the field is `required`.
        """
        value = doc.get(key)
        if value is None:
            if required:
                self.error(path, "is required")
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {type(value).__name__}")
            return None
        if not value and required:
            self.error(path, "must not be empty")
            return None
        return value

    def mapping(self, value: object, path: str) -> Mapping[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.error(path, f"must be an object, got {type(value).__name__}")
            return None
        return value

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
                    f"unknown type {kind!r}; expected one of: {_listed(INPUT_TYPES)}",
                )
                continue
            required = spec.get("required", False)
            if not isinstance(required, bool):
                self.error(f"{path}.required", "must be true or false")
                required = False
            parsed: dict[str, Any] = {"type": kind, "required": required}
            if spec.get("default") is not None:
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

    def actor_alias(self, value: object, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {type(value).__name__}")
            return None
        if value not in self.actors:
            self.error(path, f"unknown actor alias '{value}'; declared: {_listed(self.actors)}")
            return None
        return value

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
        kind = step.get("kind", "llm")
        if kind not in STEP_KINDS:
            self.error(
                f"{path}.kind",
                f"unknown step kind {kind!r}; expected one of: {_listed(STEP_KINDS)}",
            )
            kind = "llm"
        head = _StepHead(path=path, doc=step, key=key, kind=kind)
        if kind == "human":
            head.options = self.human_options(step.get("options"), f"{path}.options")
        if kind == "classify":
            head.routes = self.routes(step.get("routes"), f"{path}.routes")
            self.route_names.update(r.name for r in head.routes)
        return head

    def step_body(self, head: _StepHead) -> StepSpec | None:
        doc, path, kind = head.doc, head.path, head.kind
        name = self.text(doc, "name", f"{path}.name", required=True)
        actor = self.actor_alias(doc.get("actor"), f"{path}.actor")
        if doc.get("actor") is None and kind != "decision_tree":
            article = "an" if kind == "llm" else "a"
            self.error(f"{path}.actor", f"is required for {article} {kind} step")
        prompt = self.text(doc, "prompt", f"{path}.prompt") or ""
        self.check_template(prompt, f"{path}.prompt")
        material = self.text(doc, "material", f"{path}.material") or ""
        self.check_template(material, f"{path}.material")
        timeout = doc.get("timeout_s")
        if timeout is not None and (not _is_int(timeout) or timeout < 1):
            self.error(
                f"{path}.timeout_s", f"must be a whole number of seconds >= 1, got {timeout!r}"
            )
            timeout = None
        validation = self.validation(doc.get("validation"), f"{path}.validation")
        position = self.position(doc.get("position"), f"{path}.position")
        tree: Mapping[str, Any] | None = None
        leaf_targets: dict[str, str] = {}
        if kind == "decision_tree":
            tree, leaf_targets = self.tree(doc, path)
        bypass = doc.get("bypass", False)
        if bypass is None:
            bypass = False
        if not isinstance(bypass, bool):
            self.error(f"{path}.bypass", "must be true or false")
            bypass = False
        max_reclassify = doc.get("max_reclassify")
        if max_reclassify is None:
            max_reclassify = DEFAULT_MAX_RECLASSIFY
        elif not _is_int(max_reclassify) or not 0 <= max_reclassify <= _MAX_RECLASSIFY_LIMIT:
            self.error(
                f"{path}.max_reclassify",
                f"must be a whole number from 0 to {_MAX_RECLASSIFY_LIMIT}, got {max_reclassify!r}",
            )
            max_reclassify = DEFAULT_MAX_RECLASSIFY
        branches = self.branches(doc.get("branches"), head)
        if name is None or head.key is None:
            return None
        return StepSpec(
            key=head.key,
            name=name,
            kind=kind,
            actor=actor,
            prompt=prompt,
            timeout_s=timeout,
            validation=validation,
            position=position,
            branches=tuple(sorted(branches, key=lambda b: b.priority)),
            tree=tree,
            leaf_targets=leaf_targets,
            routes=head.routes,
            bypass=bypass,
            options=head.options,
            max_reclassify=max_reclassify,
            material=material,
        )

    def check_template(self, template: str, path: str) -> None:
        try:
            names = template_names(template)
        except TemplateError as exc:
            self.error(path, exc.message)
            return
        for name in names:
            problem = self.template_name_problem(name)
            if problem:
                self.error(path, problem)

    def template_name_problem(self, name: str) -> str | None:
        if name == "feedback" or name in self.input_names:
            return None
        number = step_number(name)
        if number is not None:
            if number <= self.step_count:
                return None
            return f"unknown template name '{name}'; the recipe has {self.step_count} steps"
        key = step_reference(name)
        if key is not None:
            if key in self.keys:
                return None
            return f"unknown template name '{name}'; there is no step '{key}'"
        return f"unknown template name '{name}'; declared inputs: {_listed(self.input_names)}"

    def validation(self, value: object, path: str) -> dict[str, Any] | None:
        doc = self.mapping(value, path)
        if doc is None:
            return None
        threshold = doc.get("threshold", 0.75)
        if not _is_number(threshold) or not 0 <= threshold <= 1:
            self.error(f"{path}.threshold", f"must be a number from 0 to 1, got {threshold!r}")
            threshold = 0.75
        attempts = doc.get("max_attempts", 5)
        if not _is_int(attempts) or attempts < 1:
            self.error(f"{path}.max_attempts", f"must be a whole number >= 1, got {attempts!r}")
            attempts = 5
        judge = self.actor_alias(doc.get("judge"), f"{path}.judge")
        fallback = self.text(doc, "fallback", f"{path}.fallback") or ""
        return {
            "threshold": threshold,
            "max_attempts": attempts,
            "judge": judge,
            "fallback": fallback,
        }

    def position(self, value: object, path: str) -> dict[str, Any] | None:
        doc = self.mapping(value, path)
        if doc is None:
            return None
        for axis in ("x", "y"):
            if not _is_number(doc.get(axis)):
                self.error(f"{path}.{axis}", f"must be a number, got {doc.get(axis)!r}")
                return None
        return {"x": doc["x"], "y": doc["y"]}

    def human_options(self, value: object, path: str) -> tuple[str, ...]:
        if value is None:
            return DEFAULT_HUMAN_OPTIONS
        if not isinstance(value, list) or not value:
            self.error(path, "must be a non-empty list of option names")
            return DEFAULT_HUMAN_OPTIONS
        options: list[str] = []
        for i, option in enumerate(value):
            if not isinstance(option, str) or not option.strip() or "|" in option:
                self.error(f"{path}[{i}]", "must be a non-empty name without '|'")
            elif option.strip().lower() in options:
                self.error(f"{path}[{i}]", f"duplicate option '{option}'")
            else:
                options.append(option.strip().lower())
        return tuple(options) or DEFAULT_HUMAN_OPTIONS

    def routes(self, value: object, path: str) -> tuple[Route, ...]:
        if value is None:
            self.error(path, "is required for a classify step")
            return ()
        if not isinstance(value, list) or not value:
            self.error(path, "must be a non-empty list of routes")
            return ()
        routes: list[Route] = []
        names: set[str] = set()
        for i, doc in enumerate(value):
            route = self.route(doc, f"{path}[{i}]")
            if route is None:
                continue
            if route.name in names:
                self.error(f"{path}[{i}].name", f"duplicate route '{route.name}'")
                continue
            names.add(route.name)
            routes.append(route)
        return tuple(routes)

    def route(self, value: object, path: str) -> Route | None:
        doc = self.mapping(value, path)
        if doc is None:
            if value is None:
                self.error(path, "must be an object, got null")
            return None
        name = self.text(doc, "name", f"{path}.name", required=True)
        instructions = self.text(doc, "instructions", f"{path}.instructions") or ""
        always = doc.get("always_active", False)
        if not isinstance(always, bool):
            self.error(f"{path}.always_active", "must be true or false")
            always = False
        examples: list[RouteExample] = []
        raw = doc.get("examples") or []
        if not isinstance(raw, list):
            self.error(f"{path}.examples", "must be a list")
            raw = []
        for i, example_doc in enumerate(raw):
            example_path = f"{path}.examples[{i}]"
            example = self.mapping(example_doc, example_path)
            if example is None:
                continue
            text = self.text(example, "text", f"{example_path}.text", required=True)
            selected = example.get("selected")
            if not isinstance(selected, bool):
                self.error(f"{example_path}.selected", "must be true or false")
            reason = self.text(example, "reason", f"{example_path}.reason") or ""
            if text is not None and isinstance(selected, bool):
                examples.append(RouteExample(text, selected, reason))
        if name is None:
            return None
        return Route(name, instructions, tuple(examples), always)

    def tree(
        self, doc: Mapping[str, Any], path: str
    ) -> tuple[Mapping[str, Any] | None, dict[str, str]]:
        tree = doc.get("tree")
        if tree is None:
            self.error(f"{path}.tree", "is required for a decision_tree step")
            return None, {}
        problems = validate_tree(tree, f"{path}.tree")
        self.errors += problems
        targets: dict[str, str] = {}
        raw = self.mapping(doc.get("leaf_targets"), f"{path}.leaf_targets") or {}
        names = set(leaves(tree)) if not problems and isinstance(tree, Mapping) else None
        for leaf, target in raw.items():
            leaf_path = f"{path}.leaf_targets.{leaf}"
            if names is not None and leaf not in names:
                self.error(leaf_path, f"no leaf '{leaf}' in the tree; leaves: {_listed(names)}")
            elif not isinstance(target, str) or not (
                target in self.keys or target in (END, COMPLETE)
            ):
                self.error(
                    leaf_path, f"unknown step {target!r}; expected a step key, @end or @complete"
                )
            else:
                targets[str(leaf)] = target
        if problems or not isinstance(tree, Mapping):
            return None, targets
        return tree, targets

    # -- branches ------------------------------------------------------------------------

    def branches(self, value: object, head: _StepHead) -> list[BranchSpec]:
        path = f"{head.path}.branches"
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(path, f"must be a list, got {type(value).__name__}")
            return []
        if len(value) > MAX_BRANCHES:
            self.error(path, f"a step has at most {MAX_BRANCHES} branches, got {len(value)}")
            return []
        branches: list[BranchSpec] = []
        names: dict[str, int] = {}
        priorities: dict[int, int] = {}
        for j, doc in enumerate(value):
            branch_path = f"{path}[{j}]"
            branch = self.branch(doc, branch_path, head, j)
            name, priority = (
                (doc.get("name"), doc.get("priority")) if isinstance(doc, Mapping) else (None, None)
            )
            if isinstance(name, str) and name:
                if name in names:
                    self.error(
                        f"{branch_path}.name",
                        f"duplicate branch name '{name}' (also branches[{names[name]}])",
                    )
                else:
                    names[name] = j
            if isinstance(priority, int) and not isinstance(priority, bool):
                if priority in priorities:
                    self.error(
                        f"{branch_path}.priority",
                        f"duplicate priority {priority} (also branches[{priorities[priority]}])",
                    )
                else:
                    priorities[priority] = j
            if branch is not None:
                branches.append(branch)
        return branches

    def branch(
        self, value: object, path: str, head: _StepHead, source_index: int
    ) -> BranchSpec | None:
        doc = self.mapping(value, path)
        if doc is None:
            if value is None:
                self.error(path, "must be an object, got null")
            return None
        name = self.text(doc, "name", f"{path}.name", required=True)
        priority = self.priority(doc.get("priority"), f"{path}.priority")
        when = None
        if doc.get("when") is None:
            self.error(f"{path}.when", "is required")
        else:
            when = self.condition(doc["when"], f"{path}.when", head, 0)
        action = self.action(doc.get("action"), f"{path}.action")
        params = self.params(doc.get("params"), f"{path}.params")
        # With an unknown action the target is still checked, as a plain step reference.
        target = self.target(
            action or "CONTINUE",
            doc.get("target") or None,
            f"{path}.target",
            head,
            required=action is not None,
        )
        if action == "ENHANCE_PROMPT" and params is not None and "prompt_enhancement" not in params:
            self.error(f"{path}.params.prompt_enhancement", "is required for ENHANCE_PROMPT")
        active = doc.get("active", True)
        if not isinstance(active, bool):
            self.error(f"{path}.active", "must be true or false")
            return None
        if (
            name is None
            or priority is None
            or when is None
            or action is None
            or target is None
            or params is None
        ):
            return None
        return BranchSpec(name, priority, when, action, target, params, active, source_index)

    def priority(self, value: object, path: str) -> int | None:
        if value is None:
            self.error(path, "is required")
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            self.error(path, f"must be a whole number >= 1, got {value!r}")
            return None
        return value

    def action(self, value: object, path: str) -> str | None:
        if value is None:
            self.error(path, "is required")
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {type(value).__name__}")
            return None
        name = value.strip().upper()
        name = ACTION_ALIASES.get(name, name)
        if name not in ACTIONS:
            known = ", ".join([*ACTIONS, *ACTION_ALIASES])
            self.error(path, f"unknown action '{value}'; expected one of: {known}")
            return None
        return name

    def target(
        self, action: str, value: object, path: str, head: _StepHead, *, required: bool = True
    ) -> str | None:
        if value is not None and not isinstance(value, str):
            self.error(path, f"must be a string, got {type(value).__name__}")
            return None
        target = value or None
        if action in REPEAT_ACTIONS:
            if target in (None, REPEAT) or (target is not None and target == head.key):
                return REPEAT
            self.error(
                path, f"{action} runs this step again; the target must be @repeat, got '{target}'"
            )
            return None
        if action == "END_RECIPE":
            if target in (None, END):
                return END
            self.error(path, f"END_RECIPE stops the run; the target must be @end, got '{target}'")
            return None
        if action == "SKIP_TO_END":
            last = self.keys[-1] if self.keys else None
            if last is None:
                return None
            if target in (None, last):
                return last
            self.error(
                path,
                f"SKIP_TO_END goes to the last step '{last}'; "
                f"leave the target empty, got '{target}'",
            )
            return None
        if target is None:
            if required:
                self.error(path, "is required")
            return None
        if target in SPECIAL_TARGETS or target in self.keys:
            return target
        self.error(
            path, f"unknown step '{target}'; expected a step key or {', '.join(SPECIAL_TARGETS)}"
        )
        return None

    def params(self, value: object, path: str) -> dict[str, Any] | None:
        if value is None:
            return {}
        doc = self.mapping(value, path)
        if doc is None:
            return None
        params = dict(doc)
        retries = doc.get("max_retries")
        if retries is not None and (not _is_int(retries) or retries < 0):
            self.error(f"{path}.max_retries", f"must be a whole number >= 0, got {retries!r}")
            return None
        alternative = doc.get("alternative_actor")
        if (
            alternative is not None
            and self.actor_alias(alternative, f"{path}.alternative_actor") is None
        ):
            return None
        for key in ("retry_suffix", "prompt_enhancement"):
            if key in doc and not isinstance(doc[key], str):
                self.error(f"{path}.{key}", f"must be a string, got {type(doc[key]).__name__}")
                return None
        return params

    # -- conditions ----------------------------------------------------------------------

    def condition(self, value: object, path: str, head: _StepHead, depth: int) -> Condition | None:
        self.conditions_seen += 1
        if self.conditions_seen > MAX_CONDITIONS:
            if self.conditions_seen == MAX_CONDITIONS + 1:
                self.error(path, f"a recipe has at most {MAX_CONDITIONS} conditions")
            return None
        if depth > _MAX_NESTING:
            self.error(path, f"conditions are nested deeper than {_MAX_NESTING} levels")
            return None
        doc = self.mapping(value, path)
        if doc is None:
            if value is None:
                self.error(path, "must be an object, got null")
            return None
        kind, op = doc.get("type"), doc.get("operator")
        if kind is None:
            self.error(
                f"{path}.type", f"is required; expected one of: {', '.join(ALL_CONDITION_TYPES)}"
            )
            return None
        if not isinstance(kind, str):
            self.error(f"{path}.type", f"must be a string, got {type(kind).__name__}")
            return None
        logical = logical_kind(kind, op, _PLAIN_TYPES)
        if logical is not None:
            return self.logical(logical, doc, path, head, depth)
        canonical_type = CONDITION_TYPE_ALIASES.get(kind, kind)
        if canonical_type not in CONDITION_OPERATORS:
            self.error(
                f"{path}.type",
                f"unknown condition type '{kind}'; "
                f"expected one of: {', '.join(ALL_CONDITION_TYPES)}",
            )
            return None
        allowed = CONDITION_OPERATORS[canonical_type]
        if op is None:
            if len(allowed) != 1:
                self.error(
                    f"{path}.operator",
                    f"is required; {kind} takes: {operators_listed(canonical_type)}",
                )
                return None
            op = allowed[0]
        if not isinstance(op, str):
            self.error(f"{path}.operator", f"must be a string, got {type(op).__name__}")
            return None
        canonical_op = canonical_operator(canonical_type, op)
        if canonical_op not in allowed:
            self.error(
                f"{path}.operator",
                f"unknown operator '{op}'; {kind} takes: {operators_listed(canonical_type)}",
            )
            return None
        fields = {k: v for k, v in doc.items() if k not in _CONDITION_KEYS}
        ok, normalized = self.condition_value(
            canonical_type, canonical_op, doc.get("value"), fields, path, head
        )
        if not ok:
            return None
        cond = Condition(canonical_type, canonical_op, normalized, fields)
        try:
            compiled = prepare(cond)
        except EngineError as exc:  # checked above already; kept so bad input cannot crash
            self.error(path, str(exc))
            return None
        return Condition(canonical_type, canonical_op, normalized, fields, (), compiled)

    def logical(
        self, logical: str, doc: Mapping[str, Any], path: str, head: _StepHead, depth: int
    ) -> Condition | None:
        kind, op = doc.get("type"), doc.get("operator")
        if kind in LOGICAL_TYPES and op is not None and op != kind:
            self.error(f"{path}.operator", f"unknown operator {op!r} for {kind}; leave it out")
            return None
        operands = doc.get("conditions")
        if not isinstance(operands, list) or not operands:
            self.error(f"{path}.conditions", f"{logical} needs a non-empty list of conditions")
            return None
        if logical == "not" and len(operands) != 1:
            self.error(
                f"{path}.conditions", f"not takes exactly one condition, got {len(operands)}"
            )
            return None
        parsed = [
            self.condition(operand, f"{path}.conditions[{k}]", head, depth + 1)
            for k, operand in enumerate(operands)
        ]
        subs = [c for c in parsed if c is not None]
        if len(subs) != len(parsed):
            return None
        return Condition(logical, logical, None, {}, tuple(subs), NOTHING)

    def condition_value(
        self,
        kind: str,
        op: str,
        value: Any,
        fields: dict[str, Any],
        path: str,
        head: _StepHead,
    ) -> tuple[bool, Any]:
        """Check a condition's value and extra fields; return (ok, the normalized value)."""
        value_path = f"{path}.value"
        if kind == "pattern_match":
            return self.pattern_value(op, value, fields, path)
        if kind in NUMERIC_TYPES:
            ok = self.numeric_fields(kind, fields, path)
            # equals / not_equals may compare a field with text, a boolean or null, too.
            textual = isinstance(value, bool) or (
                (isinstance(value, str) or value is None) and as_number(value) is None
            )
            if kind == "field_compare" and op in ("equals", "not_equals") and textual:
                return ok, value
            number = as_number(value) if isinstance(value, str | int | float) else None
            if number is None:
                self.error(value_path, f"must be a number, got {value!r}")
                return False, None
            return ok, number
        if kind == "human_decision":
            names = choices(value) if isinstance(value, str | list) else frozenset()
            if not names or (
                isinstance(value, list) and not all(isinstance(v, str) for v in value)
            ):
                self.error(value_path, "must name an option, e.g. 'approve' or 'approve|revise'")
                return False, None
            if head.kind == "human":
                unknown = sorted(names - set(head.options))
                if unknown:
                    self.error(
                        value_path,
                        f"unknown option '{unknown[0]}'; "
                        f"the step's options are {', '.join(head.options)}",
                    )
                    return False, None
            return True, "|".join(sorted(names))
        if kind in ("execution_timeout", "execution_error") and op == "equals":
            flag = True if value is None else as_bool(value)
            if flag is None:
                self.error(value_path, f"must be true or false, got {value!r}")
                return False, None
            return True, flag
        if kind == "execution_error":  # contains
            if not isinstance(value, str) or not value:
                self.error(value_path, "must be the text to look for in the error")
                return False, None
            return True, value
        if kind == "content_type":
            if value not in CONTENT_TYPES:
                self.error(
                    value_path,
                    f"unknown content type {value!r}; expected one of: {', '.join(CONTENT_TYPES)}",
                )
                return False, None
            return True, value
        if kind == "route_selected":
            if not isinstance(value, str) or not value:
                self.error(value_path, "must name a route")
                return False, None
            if value not in self.route_names:
                self.error(
                    value_path, f"unknown route '{value}'; routes: {_listed(self.route_names)}"
                )
                return False, None
            return True, value
        return True, None  # default

    def pattern_value(
        self, op: str, value: Any, fields: dict[str, Any], path: str
    ) -> tuple[bool, Any]:
        flags = fields.get("flags", "")
        if flags is None:
            flags = ""
        if not isinstance(flags, str) or check_flags(flags):
            problem = (
                check_flags(flags) if isinstance(flags, str) else "must be a string of i, m, s"
            )
            self.error(f"{path}.flags", problem or "")
            return False, None
        if not isinstance(value, str) or not value:
            self.error(f"{path}.value", "must be a non-empty string")
            return False, None
        if op in ("regex_match", "regex_not_match"):
            try:
                compile_pattern(value, flags)
            except RegexTooLarge as exc:
                self.error(f"{path}.value", str(exc))
                return False, None
            except RegexError as exc:
                self.error(f"{path}.value", f"invalid regex: {exc}")
                return False, None
        return True, value

    def numeric_fields(self, kind: str, fields: dict[str, Any], path: str) -> bool:
        if kind == "length_check":
            unit = fields.get("unit")
            if unit is not None and unit not in LENGTH_UNITS:
                self.error(f"{path}.unit", f"unknown unit {unit!r}; expected chars or words")
                return False
        elif kind == "ai_evaluation":
            evaluator = fields.get("evaluator")
            if evaluator is not None and self.actor_alias(evaluator, f"{path}.evaluator") is None:
                return False
            prompt = fields.get("prompt")
            if prompt is not None and not isinstance(prompt, str):
                self.error(f"{path}.prompt", f"must be a string, got {type(prompt).__name__}")
                return False
        else:
            name = fields.get("field")
            if not isinstance(name, str) or not name.strip():
                message = "is required" if name is None else "must be a dotted field path"
                self.error(f"{path}.field", message)
                return False
        return True


def parse_document(doc: object) -> RecipeGraph:
    """Check `doc` and build its graph; raise RecipeInvalid listing every error."""
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
