"""Read a step's branches: name, priority, condition, action, target and params.

Part of the recipe parser (`recipe_parser.py`); errors are reported as `path: message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.conditions.base import ConditionScope
from workflows.engine.conditions.reader import ConditionReader
from workflows.engine.graph import BranchSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.vocabulary import (
    ACTION_ALIASES,
    ACTIONS,
    END,
    OUTCOMES,
    REPEAT,
    REPEAT_ACTIONS,
    SPECIAL_TARGETS,
)

MAX_BRANCHES = 100


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
        when = None
        if doc.get("when") is None:
            reader.error(f"{path}.when", "is required")
        else:
            when = self.conditions.read(doc["when"], f"{path}.when", scope)
        action = self.action(doc.get("action"), f"{path}.action")
        params = self.params(doc.get("params"), f"{path}.params")
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
        alternative = doc.get("alternative_actor")
        if (
            alternative is not None
            and reader.actor_alias(alternative, f"{path}.alternative_actor") is None
        ):
            return None
        for key in ("retry_suffix", "prompt_enhancement"):
            if key in doc and not isinstance(doc[key], str):
                reader.error(f"{path}.{key}", f"must be a string, got {type(doc[key]).__name__}")
                return None
        return params
