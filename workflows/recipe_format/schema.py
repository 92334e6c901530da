"""The structure of recipe format v1, as pydantic models.

These check shapes and types and publish the JSON Schema; what the fields *mean* (operators,
targets, regexes, templates, decision trees) is checked by `workflows.engine.parse_recipe`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from workflows.engine.budget import (
    MAX_CALLS_LIMIT,
    MAX_COST_LIMIT,
    MAX_SECONDS_LIMIT,
    MAX_TOKENS_LIMIT,
    MIN_COST_LIMIT,
)
from workflows.engine.callbacks import CALLBACK_EVENT_TYPES, MAX_CALLBACKS, MAX_URL_CHARS
from workflows.engine.http_request import (
    MAX_HEADERS,
    MAX_QUERY,
    MAX_RETRIES,
    MAX_SECRET_ENV,
)
from workflows.engine.images import MAX_IMAGE_ITEMS
from workflows.engine.intent import MAX_ATTEMPTS_LIMIT as MAX_INTENT_ATTEMPTS
from workflows.engine.learner import (
    DEFAULT_HALF_LIFE,
    DEFAULT_MIN_EVIDENCE,
    MAX_CANDIDATES,
    MAX_HALF_LIFE,
    MAX_VARIANT_NAME,
    MAX_VARIANTS,
)
from workflows.engine.output_schema import MAX_ATTEMPTS as MAX_SCHEMA_ATTEMPTS
from workflows.engine.schedules import MAX_SCHEDULES
from workflows.engine.secrets import MAX_SECRET_ENV_CHARS, SECRET_ENV_PREFIX
from workflows.engine.self_check import MAX_VALIDATION_ATTEMPTS
from workflows.engine.severity import SEVERITIES
from workflows.engine.sources import (
    DEFAULT_MIN_SCORE,
    DEFAULT_MODE,
    DEFAULT_TOP_K,
    MAX_BASE_SLUG,
    MAX_SOURCES,
    MAX_TOP_K,
    MODES,
)
from workflows.engine.step_kinds.registry import KIND_NAMES
from workflows.engine.tools import (
    MAX_ARGUMENTS,
    MAX_MAX_TOOL_CALLS,
    MAX_MAX_TOOL_SECONDS,
    MAX_TOOLS,
)
from workflows.engine.transform import MAX_EXPRESSIONS
from workflows.engine.vocabulary import FORMAT, INPUT_TYPES
from workflows.engine.webhooks import MAX_HOOKS, MAX_NAME_LENGTH

# The names of the format (step kinds, input types) are the engine's: `Literal[names]` spells
# them out for pydantic and the published JSON Schema, which mypy cannot follow.
# The largest number the integer columns (timeouts, priorities) hold on every database.
MAX_INT = 2**31 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputSpec(_Strict):
    type: Literal[INPUT_TYPES] = "string"  # type: ignore[valid-type]
    required: bool = False
    default: Any = None
    description: str = ""
    # File inputs only (`engine/files.py`).
    accept: list[str] | None = None
    max_bytes: int | None = Field(default=None, ge=1)
    max_files: int | None = Field(default=None, ge=1)


class Condition(BaseModel):
    """A branch condition; nested for `and` / `or` / `not`. Extra keys hold type-specific fields."""

    model_config = ConfigDict(extra="allow")

    type: str
    operator: str | None = None
    value: Any = None
    conditions: list[Condition] | None = None


class RecipeValidation(_Strict):
    """The defaults of the recipe's steps' validation settings (`engine/self_check.py`);
    unset, note 001's: threshold 0.75, 5 attempts, rule base 0.5, weights 0.3 and 0.7."""

    threshold: float | None = Field(None, ge=0, le=1)
    max_attempts: int | None = Field(None, ge=1, le=MAX_VALIDATION_ATTEMPTS)
    rule_base: float | None = Field(None, ge=0, le=1)
    rule_weight: float | None = Field(None, ge=0, le=1)
    judge_weight: float | None = Field(None, ge=0, le=1)
    judge: str | None = None
    fallback: str | None = None
    # Validate every llm step without its own `validation` (note 001: every LLM response).
    every_step: bool = False


class Validation(_Strict):
    """A step's validation loop; each unset setting is the recipe's, else note 001's."""

    threshold: float | None = Field(None, ge=0, le=1)
    max_attempts: int | None = Field(None, ge=1, le=MAX_VALIDATION_ATTEMPTS)
    rule_base: float | None = Field(None, ge=0, le=1)
    rule_weight: float | None = Field(None, ge=0, le=1)
    judge_weight: float | None = Field(None, ge=0, le=1)
    judge: str | None = None
    fallback: str = ""


class Position(_Strict):
    x: float
    y: float


class Branch(_Strict):
    name: str = Field(min_length=1, max_length=200)
    priority: int = Field(ge=1, le=MAX_INT)
    when: Condition
    action: str
    target: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    active: bool = True
    # success | failure | neutral; checked (with its path) by the engine's parser
    counts_as: str | None = None


class Route(_Strict):
    name: str = Field(min_length=1)
    instructions: str = ""
    examples: list[dict[str, Any]] = Field(default_factory=list)
    always_active: bool = False


class Source(_Strict):
    """One knowledge base a step searches (the engine checks the slug and the query)."""

    knowledge_base: str = Field(min_length=1, max_length=MAX_BASE_SLUG)
    query: str = ""
    top_k: int = Field(DEFAULT_TOP_K, ge=1, le=MAX_TOP_K)
    min_score: float = Field(DEFAULT_MIN_SCORE, ge=0, le=1)
    mode: Literal[MODES] = DEFAULT_MODE  # type: ignore[valid-type]


class Variant(_Strict):
    """Another prompt an llm step may ask with (the engine checks names and templates)."""

    name: str = Field(min_length=1, max_length=MAX_VARIANT_NAME)
    prompt: str = Field(min_length=1)


def _no_validation(value: object) -> object:
    return None if value is False else value


class Step(_Strict):
    key: str = Field(min_length=1, max_length=100)
    name: str = Field(min_length=1, max_length=200)
    kind: Literal[KIND_NAMES] = "llm"  # type: ignore[valid-type]
    actor: str | None = Field(None, max_length=100)
    prompt: str = ""
    timeout_s: int | None = Field(None, ge=1, le=MAX_INT)
    failure_severity: Literal[SEVERITIES] | None = None  # type: ignore[valid-type]
    # names and {"context": N}: checked (with its path) by the engine's parser
    requires: list[str | dict[str, int]] | None = None
    # `false`: kept out of the recipe's `every_step` (read as no validation of its own).
    validation: Annotated[Validation | None, BeforeValidator(_no_validation)] = None
    position: Position | None = None
    branches: list[Branch] = Field(default_factory=list)
    # decision_tree
    tree: dict[str, Any] | None = None
    leaf_targets: dict[str, str] | None = None
    detect: dict[str, Any] | None = None
    # classify
    routes: list[Route] | None = None
    bypass: bool | None = None
    max_reclassify: int | None = Field(None, ge=0, le=10)
    # human
    options: list[str] | None = None
    escalate_to: str | None = None
    material: str | None = None
    # llm and retrieve
    sources: list[Source] | None = Field(None, max_length=MAX_SOURCES)
    # llm
    tools: list[str] | None = Field(None, max_length=MAX_TOOLS)
    max_tool_calls: int | None = Field(None, ge=1, le=MAX_MAX_TOOL_CALLS)
    max_tool_seconds: int | None = Field(None, ge=1, le=MAX_MAX_TOOL_SECONDS)
    # tool
    tool: str | None = Field(None, max_length=300)
    arguments: dict[str, str] | None = Field(None, max_length=MAX_ARGUMENTS)
    # llm: what the learner chooses among (`workflows/engine/actor_choice.py`)
    variants: list[Variant] | None = Field(None, max_length=MAX_VARIANTS)
    candidates: list[Annotated[str, Field(max_length=100)]] | None = Field(
        None, max_length=MAX_CANDIDATES
    )
    # intent
    max_attempts: int | None = Field(None, ge=1, le=MAX_INTENT_ATTEMPTS)
    # llm: structured output (`workflows/engine/output_schema.py`)
    output_schema: dict[str, Any] | None = None
    output_schema_attempts: int | None = Field(None, ge=1, le=MAX_SCHEMA_ATTEMPTS)
    # llm: file inputs shown as images, names or {input, pages} (`workflows/engine/images.py`)
    images: list[str | dict[str, Any]] | None = Field(None, max_length=MAX_IMAGE_ITEMS)
    # transform: fact name -> JMESPath expression (`workflows/engine/transform.py`)
    set: dict[str, str] | None = Field(None, max_length=MAX_EXPRESSIONS)
    # http: the request's templates (a JSON body's strings are templates), its secrets' env vars
    method: str | None = Field(None, max_length=200)
    url: str | None = Field(None, max_length=8000)
    headers: dict[str, str] | None = Field(None, max_length=MAX_HEADERS)
    query: dict[str, str] | None = Field(None, max_length=MAX_QUERY)
    body: str | dict[str, Any] | list[Any] | None = None
    secret_env: list[Annotated[str, Field(max_length=200)]] | None = Field(
        None, max_length=MAX_SECRET_ENV
    )
    retries: int | None = Field(None, ge=0, le=MAX_RETRIES)


class Budget(_Strict):
    """The limits of each run of the recipe (`workflows/engine/budget.py`); none is required."""

    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT)
    # Inclusive bounds: OpenAPI 3.0, which publishes this schema too, has no numeric
    # exclusiveMinimum.
    max_cost: float | None = Field(None, ge=float(MIN_COST_LIMIT), le=float(MAX_COST_LIMIT))
    max_calls: int | None = Field(None, ge=1, le=MAX_CALLS_LIMIT)
    max_seconds: float | None = Field(None, ge=1, le=MAX_SECONDS_LIMIT)


class Learning(_Strict):
    """How the recipe's steps learn which actor and variant works (`engine/learner.py`)."""

    explore: bool = True
    min_evidence: int = Field(DEFAULT_MIN_EVIDENCE, ge=0, le=1000)
    half_life: int = Field(DEFAULT_HALF_LIFE, ge=1, le=MAX_HALF_LIFE)
    share: bool = False


# A recipe's secret env var (`workflows/engine/secrets.py`).
_RECIPE_SECRET = f"^{SECRET_ENV_PREFIX}[A-Z0-9_]+$"


class Webhook(_Strict):
    """An inbound webhook (`engine/webhooks.py`): `POST /api/hooks/{slug}/{name}`."""

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    secret_env: str = Field(max_length=MAX_SECRET_ENV_CHARS, pattern=_RECIPE_SECRET)
    inputs: dict[str, str] | None = None


class Callback(_Strict):
    """Whom the recipe's runs tell of their events (`workflows/engine/callbacks.py`)."""

    on: list[Literal[CALLBACK_EVENT_TYPES]] = Field(  # type: ignore[valid-type]
        min_length=1, max_length=len(CALLBACK_EVENT_TYPES)
    )
    url: str = Field(min_length=1, max_length=MAX_URL_CHARS)
    secret_env: str = Field(max_length=MAX_SECRET_ENV_CHARS, pattern=_RECIPE_SECRET)


class Schedule(_Strict):
    """When runs of the recipe start by themselves (`workflows/engine/schedules.py`)."""

    name: str | None = Field(None, max_length=50)
    cron: str = Field(max_length=200)
    timezone: str = Field("UTC", max_length=64)
    inputs: dict[str, Any] = Field(default_factory=dict)
    active: bool = True
    catch_up: bool = False


class RecipeDocument(_Strict):
    format: Literal[FORMAT]  # type: ignore[valid-type]
    slug: str = Field(min_length=1, max_length=100)
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    actors: dict[Annotated[str, Field(max_length=100)], Annotated[str, Field(max_length=200)]] = (
        Field(default_factory=dict)
    )
    steps: list[Step] = Field(min_length=1)
    budget: Budget | None = None
    learning: Learning | None = None
    validation: RecipeValidation | None = None
    webhooks: list[Webhook] | None = Field(None, max_length=MAX_HOOKS)
    callbacks: list[Callback] | None = Field(None, max_length=MAX_CALLBACKS)
    schedules: list[Schedule] | None = Field(None, max_length=MAX_SCHEDULES)


def json_schema() -> dict[str, Any]:
    """Return the JSON Schema of recipe format v1."""
    schema = RecipeDocument.model_json_schema()
    schema["$id"] = "https://branchline.example/schemas/recipe-v1.json"
    schema["title"] = "Branchline recipe (format v1)"
    return schema
