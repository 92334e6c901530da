"""Read a step's branches: name, priority, condition, action, target and params.

Part of the recipe parser (`recipe_parser.py`); errors are reported as `path: message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.conditions.base import ConditionScope
from workflows.engine.conditions.reader import ConditionReader
from workflows.engine.conditions.registry import condition_type
from workflows.engine.conditions.values import as_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import BranchSpec, Condition
from workflows.engine.reading import DocumentReader
from workflows.engine.retry_delays import delay_problems
from workflows.engine.vocabulary import (
    ACTION_ALIASES,
    ACTIONS,
    END,
    OUTCOMES,
    REPEAT,
    REPEAT_ACTIONS,
    SPECIAL_TARGETS,
    repeats_step,
)

MAX_BRANCHES = 100
MAX_ALTERNATIVES = 20


def given_in_params(
    when: object, params: Mapping[str, Any]
) -> dict[str, tuple[str, FieldSpec | None]]:
    """Return the params keys that give fields of the condition `when`'s type, each with the
    field's name and spec (a type's `params`; empty when `when` names no such type)."""
    if not isinstance(when, Mapping) or not isinstance(when.get("type"), str):
        return {}
    kind = condition_type(when["type"])
    if kind is None:
        return {}
    return {
        key: (name, kind.field(name))
        for key, name in kind.params.items()
        if params.get(key) is not None
    }


def canonical_branch(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return a valid branch document spelled one way, the format's: the fields its
    condition's type reads from its params moved into `when`, and each condition field
    under its own name, not an alias (`evaluator`, not `evaluator_actor`)."""
    branch = dict(doc)
    params = dict(branch.get("params") or {})
    when = branch.get("when")
    given = given_in_params(when, params)
    if given and isinstance(when, Mapping):
        when = dict(when)
        for key, (name, spec) in given.items():
            if not any(when.get(k) is not None for k in _spellings(name, spec)):
                when[name] = params[key]
            del params[key]
        if "params" in branch:
            branch["params"] = params
    branch["when"] = _canonical_condition(when)
    return branch


def _canonical_condition(when: object) -> object:
    """Return a condition document with each field under its own name (aliases renamed)."""
    if not isinstance(when, Mapping):
        return when
    canonical = dict(when)
    if isinstance(canonical.get("conditions"), list):
        canonical["conditions"] = [_canonical_condition(c) for c in canonical["conditions"]]
    kind = condition_type(canonical["type"]) if isinstance(canonical.get("type"), str) else None
    for spec in kind.fields if kind else ():
        for alias in spec.aliases:
            if alias in canonical:
                value = canonical.pop(alias)
                if canonical.get(spec.name) is None:
                    canonical[spec.name] = value
    return canonical


def _spellings(name: str, spec: FieldSpec | None) -> tuple[str, ...]:
    """Return the keys a condition may give field `name` under: its name, then its aliases."""
    return (name, *spec.aliases) if spec else (name,)


def _same(a: object, b: object) -> bool:
    """Tell whether two values of one field agree (`8` and `"8"` are one threshold)."""
    if a == b:
        return True
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in (a, b)):
        return False
    number_a, number_b = as_number(a), as_number(b)
    return number_a is not None and number_a == number_b


class BranchReader:
    """Read the branches of every step of one recipe, through the recipe's reader."""

    def __init__(self, reader: DocumentReader) -> None:
        self.reader = reader
        self.conditions = ConditionReader()

    def branches(
        self, value: object, path: str, step_key: str | None, scope: ConditionScope
    ) -> list[BranchSpec]:
        """Return the valid branches of a step (unsorted); `scope` is the step's."""
        reader = self.reader
        if value is None:
            return []
        if not isinstance(value, list):
            reader.error(path, f"must be a list, got {type(value).__name__}")
            return []
        if len(value) > MAX_BRANCHES:
            reader.error(path, f"a step has at most {MAX_BRANCHES} branches, got {len(value)}")
            return []
        branches: list[BranchSpec] = []
        names: dict[str, int] = {}
        for j, doc in enumerate(value):
            branch_path = f"{path}[{j}]"
            branch = self.branch(doc, branch_path, step_key, scope, j)
            # Equal priorities are allowed: they keep their order in the document (lint notes it).
            name = doc.get("name") if isinstance(doc, Mapping) else None
            if isinstance(name, str) and name:
                if name in names:
                    reader.error(
                        f"{branch_path}.name",
                        f"duplicate branch name '{name}' (also branches[{names[name]}])",
                    )
                else:
                    names[name] = j
            if branch is not None:
                branches.append(branch)
        return branches

    def branch(
        self,
        value: object,
        path: str,
        step_key: str | None,
        scope: ConditionScope,
        source_index: int,
    ) -> BranchSpec | None:
        """Return one branch, or None after reporting why it is not valid."""
        reader = self.reader
        doc = reader.mapping(value, path)
        if doc is None:
            if value is None:
                reader.error(path, "must be an object, got null")
            return None
        name = reader.text(doc, "name", f"{path}.name", required=True)
        priority = self.priority(doc.get("priority"), f"{path}.priority")
        params = self.params(doc.get("params"), f"{path}.params")
        when = None
        if doc.get("when") is None:
            reader.error(f"{path}.when", "is required")
        else:
            when = self.condition(doc["when"], params or {}, path, scope)
        action = self.action(doc.get("action"), f"{path}.action")
        # With an unknown action the target is still checked, as a plain step reference.
        target = self.target(
            action or "CONTINUE",
            doc.get("target") or None,
            f"{path}.target",
            step_key,
            required=action is not None,
        )
        if action == "ENHANCE_PROMPT" and params is not None and "prompt_enhancement" not in params:
            reader.error(f"{path}.params.prompt_enhancement", "is required for ENHANCE_PROMPT")
        if action is not None and target is not None and params is not None:
            repeats = repeats_step(action, target)
            for name, problem in delay_problems(params, repeats=repeats):
                reader.error(f"{path}.params.{name}", problem)
                params = None
        active = doc.get("active", True)
        if not isinstance(active, bool):
            reader.error(f"{path}.active", "must be true or false")
            return None
        counts_as = doc.get("counts_as")
        if counts_as is not None and counts_as not in OUTCOMES:
            reader.error(
                f"{path}.counts_as", f"must be one of {', '.join(OUTCOMES)}, got {counts_as!r}"
            )
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
        return BranchSpec(
            name, priority, when, action, target, params, active, source_index, counts_as
        )

    def condition(
        self, value: object, params: Mapping[str, Any], path: str, scope: ConditionScope
    ) -> Condition | None:
        """Read the branch's condition, with the fields its type reads from the branch's
        params (`ConditionType.params`: the seeds' `evaluator_actor`, `eval_prompt` and
        `threshold`); one given in both places must agree. A problem with a field given in
        the params is reported there."""
        when_path, params_path = f"{path}.when", f"{path}.params"
        given = given_in_params(value, params)
        if not given or not isinstance(value, Mapping):
            return self.conditions.read(value, when_path, scope)
        merged = dict(value)
        ok = True
        for key, (name, spec) in given.items():
            own = next((k for k in _spellings(name, spec) if merged.get(k) is not None), None)
            if own is None:
                merged[name] = params[key]
            elif not _same(merged[own], params[key]):
                scope.error(
                    f"{params_path}.{key}",
                    f"is {params[key]!r}, but when.{own} says {merged[own]!r}; give one of them",
                )
                ok = False
        before = len(scope.errors)
        condition = self.conditions.read(merged, when_path, scope)
        # A field taken from the params is reported where the author wrote it.
        for i in range(before, len(scope.errors)):
            for key, (name, _) in given.items():
                prefix = f"{when_path}.{name}:"
                if scope.errors[i].startswith(prefix):
                    scope.errors[i] = f"{params_path}.{key}:" + scope.errors[i][len(prefix) :]
        return condition if ok else None

    def priority(self, value: object, path: str) -> int | None:
        """Return a priority (a whole number >= 1), or None after reporting it."""
        if value is None:
            self.reader.error(path, "is required")
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            self.reader.error(path, f"must be a whole number >= 1, got {value!r}")
            return None
        return value

    def action(self, value: object, path: str) -> str | None:
        """Return the canonical action (aliases resolved, any case), or None."""
        if value is None:
            self.reader.error(path, "is required")
            return None
        if not isinstance(value, str):
            self.reader.error(path, f"must be a string, got {type(value).__name__}")
            return None
        name = value.strip().upper()
        name = ACTION_ALIASES.get(name, name)
        if name not in ACTIONS:
            known = ", ".join([*ACTIONS, *ACTION_ALIASES])
            self.reader.error(path, f"unknown action '{value}'; expected one of: {known}")
            return None
        return name

    def target(
        self,
        action: str,
        value: object,
        path: str,
        step_key: str | None,
        *,
        required: bool = True,
    ) -> str | None:
        """Return the target the action goes to, or None after reporting it."""
        reader = self.reader
        if value is not None and not isinstance(value, str):
            reader.error(path, f"must be a string, got {type(value).__name__}")
            return None
        target = value or None
        if action in REPEAT_ACTIONS:
            if target in (None, REPEAT) or (target is not None and target == step_key):
                return REPEAT
            reader.error(
                path, f"{action} runs this step again; the target must be @repeat, got '{target}'"
            )
            return None
        if action == "END_RECIPE":
            if target in (None, END):
                return END
            reader.error(path, f"END_RECIPE stops the run; the target must be @end, got '{target}'")
            return None
        if action == "SKIP_TO_END":
            last = reader.keys[-1] if reader.keys else None
            if last is None:
                return None
            if target in (None, last):
                return last
            reader.error(
                path,
                f"SKIP_TO_END goes to the last step '{last}'; "
                f"leave the target empty, got '{target}'",
            )
            return None
        if target is None:
            if required:
                reader.error(path, "is required")
            return None
        if target in SPECIAL_TARGETS or target in reader.keys:
            return target
        reader.error(
            path, f"unknown step '{target}'; expected a step key or {', '.join(SPECIAL_TARGETS)}"
        )
        return None

    def params(self, value: object, path: str) -> dict[str, Any] | None:
        """Return the params (retry bound, alternative actor, texts), or None if one is bad."""
        reader = self.reader
        if value is None:
            return {}
        doc = reader.mapping(value, path)
        if doc is None:
            return None
        params = dict(doc)
        retries = doc.get("max_retries")
        if retries is not None and (not is_int(retries) or retries < 0):
            reader.error(f"{path}.max_retries", f"must be a whole number >= 0, got {retries!r}")
            return None
        if not self.alternatives(doc.get("alternative_actor"), f"{path}.alternative_actor"):
            return None
        for key in ("retry_suffix", "prompt_enhancement"):
            if key in doc and not isinstance(doc[key], str):
                reader.error(f"{path}.{key}", f"must be a string, got {type(doc[key]).__name__}")
                return None
        return params

    def alternatives(self, value: object, path: str) -> bool:
        """Check `params.alternative_actor`: an actor alias, or a non-empty list of them
        (tried in order by the retries); tell whether it is valid (absent is)."""
        if value is None:
            return True
        if not isinstance(value, list):
            return self.reader.actor_alias(value, path) is not None
        if not value or len(value) > MAX_ALTERNATIVES:
            self.reader.error(
                path, f"must list 1 to {MAX_ALTERNATIVES} actor aliases, got {len(value)}"
            )
            return False
        problems = [self.reader.actor_alias(a, f"{path}[{i}]") is None for i, a in enumerate(value)]
        return not any(problems)
