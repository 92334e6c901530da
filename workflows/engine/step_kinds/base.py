"""What a step kind is: its label, the fields of its steps and what the engine knows of it.

Each module of this package defines one `StepKind`; `registry.py` lists them. The runner
executes each kind; parsing, the catalog and the docs read the kind from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from workflows.engine.actions import Move
from workflows.engine.decisions import Evaluation, StepResult
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.reading import DocumentReader
from workflows.engine.state import RunState

# read(step document, its path, the recipe's reader) -> StepSpec fields of the kind; each
# problem is reported through the reader, and the field then keeps its default.
ReadStep = Callable[[Mapping[str, Any], str, DocumentReader], dict[str, Any]]
# next_move(graph, step, state, result) -> the move a kind chooses itself (None: its branches
# decide) and the evaluation that logs it.
NextMove = Callable[[RecipeGraph, StepSpec, RunState, StepResult], tuple[Move | None, Evaluation]]
# What a step's `actor` alias must name: a model, or a reviewer group (`@human:GROUP`).
ActorKind = Literal["model", "reviewers"]


def read_nothing(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read no field: the kind has none of its own at this pass."""
    return {}


@dataclass(frozen=True, slots=True)
class StepKind:
    """One step kind of the recipe format (`kind` of a step document).

    `read_head` reads, in a first pass over the steps, what any step's branches may refer
    to (a human step's options, a classify step's routes); `read_body` the kind's other
    fields, once every step key is known. `actor_kind`: what the actor a step of the kind
    must name is (None: it names none); `overlays_facts`: its response, when a JSON object,
    overlays the run's facts; `merges_facts`: onto the facts the step saw, not the inputs
    (a transform adds facts, where an answer's JSON replaces the previous one's). `article`
    goes before the name in messages ("an llm step"). `next_move`, when set, chooses where
    the run goes before the step's branches are asked (a decision tree's leaf).
    """

    name: str
    label: str
    help: str
    fields: tuple[FieldSpec, ...]
    read_head: ReadStep = read_nothing
    read_body: ReadStep = read_nothing
    actor_kind: ActorKind | None = "model"
    overlays_facts: bool = True
    merges_facts: bool = False
    article: str = "a"
    next_move: NextMove | None = None

    def as_json(self) -> dict[str, Any]:
        """Return the kind as the catalog publishes it."""
        return {
            "kind": self.name,
            "label": self.label,
            "help": self.help,
            "fields": [f.as_json() for f in self.fields],
        }
