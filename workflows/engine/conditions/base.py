"""What a condition type is: its operators, fields, summary and behaviour, as one value.

Each module of this package defines one `ConditionType`; `registry.py` lists them, and
parsing, evaluation, lint, the editor's catalog and the docs all read them from there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from workflows.engine.conditions.context import EvalContext
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import BranchSpec, Condition, StepSpec

# What `prepare` returns for conditions that need nothing prepared (None means "not yet").
NOTHING: tuple[()] = ()


@dataclass(frozen=True, slots=True)
class ConditionScope:
    """What a condition's checks may refer to in its recipe and step; collects their errors."""

    errors: list[str]
    actors: Mapping[str, str]
    route_names: Collection[str]
    # The options the step offers reviewers (a human step's); None when it offers none.
    step_options: tuple[str, ...] | None
    # Every step's kind by key, in sequence order, and the key of the step whose branches
    # are read (a condition naming another step checks it exists, of the kind, earlier).
    step_kinds: Mapping[str, str] = field(default_factory=dict)
    step_key: str | None = None

    def error(self, path: str, message: str) -> None:
        """Report `message` at `path`."""
        self.errors.append(f"{path}: {message}")


# check(operator, value, other fields, path, scope) -> (ok, the normalized value); it
# reports each problem through `scope.error` at `path` or below it (`path.value`, ...).
Check = Callable[[str, Any, Mapping[str, Any], str, ConditionScope], tuple[bool, Any]]
# prepare(condition) -> what evaluation needs computed once (a compiled regex, a number).
Prepare = Callable[[Condition], object]
# evaluate(condition, prepared, context) -> (holds, the reason it holds or not).
Evaluate = Callable[[Condition, Any, EvalContext], tuple[bool, str]]


class ConditionUse(NamedTuple):
    """A condition of one type in a step's branches: where it is and in which branch."""

    condition: Condition
    path: str  # as `steps[0].branches[1].when.conditions[0]`
    branch: BranchSpec


# lint(step, the step's conditions of the type (maybe none), the step's path) -> warnings,
# each as `path: message`, about what is valid but probably not meant.
Lint = Callable[[StepSpec, Sequence[ConditionUse], str], list[str]]


def prepare_nothing(condition: Condition) -> object:
    """Prepare a condition that needs nothing prepared."""
    return NOTHING


@dataclass(frozen=True, slots=True)
class Operator:
    """An operator of a condition type: its name, how menus and summaries show it."""

    name: str
    label: str
    symbol: str

    def as_json(self) -> dict[str, str]:
        """Return the operator as the catalog publishes it."""
        return {"name": self.name, "label": self.label, "symbol": self.symbol}


@dataclass(frozen=True, slots=True)
class ConditionType:
    """One condition type of the recipe format: what it looks like and what it does.

    `summary` maps an operator name (or "*" for any other) to the template of the short label
    the canvas draws: `{name}` is the document's value of field `name` (through the field's
    `display`), `{name!raw}` that value as written, `{symbol}` the operator's symbol. `check` reads a document's value and fields
    at parse time, `prepare` computes what evaluation needs once, `evaluate` tells whether the
    condition holds for a step result, and why. `lint`, when set, warns about a parsed
    step's uses of the type (it is called for every step). `asks_about_failure`: the
    condition reads whether the step failed, so its branch may handle a failed step.
    `asks_about_budget`: the condition reads the run's budget, so its branch may handle a
    step the budget stopped (and no other failure); `asks_about_classification` likewise, a
    classify step whose classifier gave no readable answer. `params` maps keys of a branch's
    `params` to fields of the type: a branch whose condition is of the type may give those
    fields there (the seeds' metadata does), read as if its condition gave them. `reads_answer`: the condition
    reads the step's answer (its text, a judge's score of it, how its validation ended), so
    it is not applicable on a failed step: false, with the failure as its reason.
    `words`: how a branch of the type reads on the canvas before "→ target", a template
    filled like `summary`'s with `{summary}` the condition's summary ("if judge < 7").
    """

    name: str
    label: str
    help: str
    operators: tuple[Operator, ...]
    fields: tuple[FieldSpec, ...]
    summary: Mapping[str, str]
    check: Check
    evaluate: Evaluate
    prepare: Prepare = prepare_nothing
    lint: Lint | None = None
    asks_about_failure: bool = False
    asks_about_budget: bool = False
    asks_about_classification: bool = False
    reads_answer: bool = False
    aliases: tuple[str, ...] = ()
    operator_aliases: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    words: str = "if {summary}"

    @property
    def operator_names(self) -> tuple[str, ...]:
        """Return the canonical operator names, in menu order."""
        return tuple(op.name for op in self.operators)

    def canonical_operator(self, name: str) -> str:
        """Return the canonical spelling of operator `name` (aliases resolved)."""
        return self.operator_aliases.get(name, name)

    def operator(self, name: str) -> Operator | None:
        """Return the operator called `name` (aliases resolved), or None."""
        canonical = self.canonical_operator(name)
        return next((op for op in self.operators if op.name == canonical), None)

    def operators_listed(self) -> str:
        """List the operators (aliases last) the type accepts, for error messages."""
        return ", ".join([*self.operator_names, *self.operator_aliases])

    def field(self, name: str) -> FieldSpec | None:
        """Return the spec of field `name`, or None."""
        return next((f for f in self.fields if f.name == name), None)

    def as_json(self) -> dict[str, Any]:
        """Return the type as the catalog publishes it."""
        return {
            "type": self.name,
            "aliases": list(self.aliases),
            "label": self.label,
            "help": self.help,
            "operators": [op.as_json() for op in self.operators],
            "operator_aliases": dict(self.operator_aliases),
            "fields": [f.as_json() for f in self.fields],
            "summary": dict(self.summary),
            "words": self.words,
        }
