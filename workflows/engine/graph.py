"""Hold a parsed recipe as frozen data: its steps, their branches and conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.budget import Budget
from workflows.engine.callbacks import Callback
from workflows.engine.capabilities import NONE as NO_CAPABILITIES
from workflows.engine.capabilities import Capabilities, missing
from workflows.engine.classification import Route
from workflows.engine.detectors import DetectSpec
from workflows.engine.http_request import DEFAULT_METHOD, DEFAULT_RETRIES
from workflows.engine.images import NEEDS as IMAGES_NEED
from workflows.engine.images import ImageSpec
from workflows.engine.intent import DEFAULT_MAX_ATTEMPTS as DEFAULT_INTENT_ATTEMPTS
from workflows.engine.learner import DEFAULT_SETTINGS, LearnerSettings
from workflows.engine.output_schema import DEFAULT_ATTEMPTS as DEFAULT_SCHEMA_ATTEMPTS
from workflows.engine.schedules import ScheduleSpec
from workflows.engine.sources import SourceSpec
from workflows.engine.tools import DEFAULT_MAX_TOOL_CALLS, DEFAULT_MAX_TOOL_SECONDS
from workflows.engine.vocabulary import DEFAULT_HUMAN_OPTIONS, DEFAULT_MAX_RECLASSIFY
from workflows.engine.webhooks import WebhookSpec


@dataclass(frozen=True, slots=True)
class Condition:
    """A branch condition: canonical type and operator, a value and the type's extra fields.

    `fields` holds the other keys of the document (`unit`, `flags`, `evaluator`, `prompt`,
    `field`); `conditions` the operands of `and` / `or` / `not`. `prepared` carries what the
    parser prepared once (a compiled regex, a split option list) so evaluation allocates little;
    a hand-built condition leaves it None and is prepared on each evaluation instead.
    """

    type: str
    operator: str = ""
    value: Any = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    prepared: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class BranchSpec:
    """An edge out of a step; `action` is canonical (aliases resolved at parse)."""

    name: str
    priority: int
    when: Condition
    action: str
    target: str
    params: Mapping[str, Any] = field(default_factory=dict)
    active: bool = True
    # The branch's position in the document, for warnings that point at it (branches are
    # kept sorted by priority, so the tuple index may differ).
    source_index: int | None = field(default=None, compare=False, repr=False)
    # What taking the branch says of the attempt (None: the default, see `outcomes.py`).
    counts_as: str | None = None

    @property
    def max_retries(self) -> int | None:
        """Return the explicit retry bound of this branch, or None when the default applies."""
        value = self.params.get("max_retries")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Variant:
    """Another prompt an llm step may ask with, named for the learner's figures."""

    name: str
    prompt: str


@dataclass(frozen=True, slots=True)
class StepSpec:
    """A node of the recipe graph; `branches` are sorted by ascending priority."""

    key: str
    name: str
    kind: str = "llm"
    actor: str | None = None
    prompt: str = ""
    timeout_s: int | None = None
    validation: Mapping[str, Any] | None = None
    position: Mapping[str, Any] | None = None
    branches: tuple[BranchSpec, ...] = ()
    tree: Mapping[str, Any] | None = None
    leaf_targets: Mapping[str, str] = field(default_factory=dict)
    # decision_tree: the detectors that find its facts in a text (None: it reads the facts
    # as they are), and why its tree did not load (it then takes its fallback; lint refuses it)
    detect: DetectSpec | None = None
    tree_problems: tuple[str, ...] = ()
    routes: tuple[Route, ...] = ()
    bypass: bool = False
    options: tuple[str, ...] = DEFAULT_HUMAN_OPTIONS
    max_reclassify: int = DEFAULT_MAX_RECLASSIFY
    # human: what reviewers read beside the question (a template; default: the previous answer)
    material: str = ""
    # human: the reviewer-group alias that gets the task, once, when it is overdue
    escalate_to: str | None = None
    # llm and retrieve: the knowledge bases searched before the call (retrieve: instead of one)
    sources: tuple[SourceSpec, ...] = ()
    # llm: the tools (SERVER.TOOL) its model may call, and the loop's bounds
    tools: tuple[str, ...] = ()
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_tool_seconds: int = DEFAULT_MAX_TOOL_SECONDS
    # tool: the one it calls, and each argument's template
    tool: str = ""
    arguments: Mapping[str, str] = field(default_factory=dict)
    # intent: how many answers its model may give in all before an unreadable one fails it
    max_attempts: int = DEFAULT_INTENT_ATTEMPTS
    # http: the request's templates (a JSON body's strings are templates too), the env vars
    # its templates may read as {secrets.NAME}, and how often 429/5xx is retried
    method: str = DEFAULT_METHOD
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    secret_env: tuple[str, ...] = ()
    retries: int = DEFAULT_RETRIES
    # any kind: the severity of the step's failures (None: CRITICAL; see `severity.py`)
    failure_severity: str | None = None
    # any kind with a model actor: what the actor must be able to do (`capabilities.py`)
    requires: Capabilities = NO_CAPABILITIES
    # llm: other prompts the learner may choose, and the actors an `@learned` step (or a
    # retry with another actor) chooses among (empty: every model alias of the recipe)
    variants: tuple[Variant, ...] = ()
    candidates: tuple[str, ...] = ()
    # llm: the JSON Schema its answer must meet (None: any answer), and how many answers
    # the model may give before one that does not meet it fails the step (`output_schema.py`)
    output_schema: Mapping[str, Any] | None = None
    output_schema_attempts: int = DEFAULT_SCHEMA_ATTEMPTS
    # llm: the file inputs its model is shown as images (`images.py`)
    images: tuple[ImageSpec, ...] = ()
    # transform: each fact it sets, by name, and the JMESPath expression computing it
    set: Mapping[str, str] = field(default_factory=dict)
    active_branches: tuple[BranchSpec, ...] = field(
        init=False, repr=False, compare=False, default=()
    )

    def __post_init__(self) -> None:
        # Evaluation walks only active branches, after every step: filter them once.
        active = tuple(b for b in self.branches if b.active)
        object.__setattr__(self, "active_branches", active)

    @property
    def needs(self) -> Capabilities:
        """What the step's actor must be able to do: its `requires`, and vision if it shows
        the model images."""
        if not self.images or IMAGES_NEED.names <= self.requires.names:
            return self.requires
        return Capabilities(self.requires.names | IMAGES_NEED.names, self.requires.context)

    def lacking(self, offered: Capabilities | None) -> list[str]:
        """What an actor that offers `offered` (None: not declared) lacks of the step's needs.

        Not declared meets every need but the images': a model that cannot see fails every
        run, so an actor shows images only when it declares vision.
        """
        if offered is None and self.images:
            return missing(IMAGES_NEED, NO_CAPABILITIES)
        return missing(self.needs, offered)


@dataclass(frozen=True, slots=True)
class RecipeGraph:
    """A whole recipe: inputs schema, actor aliases, the steps in sequence order, the
    budget of each run (None: no limits), how its steps learn (`learner.py`), when its runs
    start by themselves (`schedules.py`), the inbound webhooks that start them (`webhooks.py`)
    and whom its runs tell of their events (`callbacks.py`)."""

    slug: str
    name: str
    description: str = ""
    inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    actors: Mapping[str, str] = field(default_factory=dict)
    steps: tuple[StepSpec, ...] = ()
    budget: Budget | None = None
    learning: LearnerSettings = DEFAULT_SETTINGS
    webhooks: tuple[WebhookSpec, ...] = ()
    callbacks: tuple[Callback, ...] = ()
    schedules: tuple[ScheduleSpec, ...] = ()
    _positions: Mapping[str, int] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        positions = {step.key: i for i, step in enumerate(self.steps)}
        object.__setattr__(self, "_positions", positions)

    def step(self, key: str) -> StepSpec:
        """Return the step called `key`; raise KeyError if there is none."""
        return self.steps[self._positions[key]]

    def has_step(self, key: str) -> bool:
        """Tell whether a step is called `key`."""
        return key in self._positions

    def index(self, key: str) -> int:
        """Return the 0-based sequence position of step `key`; raise KeyError if unknown."""
        return self._positions[key]

    def next_in_sequence(self, key: str) -> StepSpec | None:
        """Return the step after `key` in sequence order, or None after the last one."""
        position = self._positions[key] + 1
        return self.steps[position] if position < len(self.steps) else None

    def first_step(self) -> StepSpec:
        """Return the step a run starts with."""
        return self.steps[0]

    def last_step(self) -> StepSpec:
        """Return the last step in sequence order (the target of SKIP_TO_END)."""
        return self.steps[-1]
