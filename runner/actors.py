"""Resolve a run's actor aliases to providers, with dry-run scripts standing in where given."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.contrib.auth.models import Group

from workflows.models import Actor

from .capacity import NO_LIMITS, Limits
from .model_calls import NO_PRICES, Prices
from .providers import (
    SCHEMA_PROVIDERS,
    ActorConfig,
    ChatRequest,
    ChatResult,
    ImagePart,
    OutputSchema,
    Provider,
    ProviderConfigError,
    get_provider,
)

HUMAN_PREFIX = "@human:"


@dataclass(frozen=True)
class ResolvedActor:
    alias: str
    name: str
    is_human: bool
    group_id: int | None = None
    config: ActorConfig | None = None
    scripted: tuple[str, ...] | None = None  # dry-run answers for this alias
    problem: str | None = None  # why the actor's row cannot run (`path: message`), if it cannot
    prices: Prices = NO_PRICES  # read once per time slice: a call is priced as it is made
    # The actor's workload limits, read with it (runner.capacity); none for a dry-run script,
    # whose answers are no calls to a model.
    limits: Limits = NO_LIMITS

    @property
    def provider_name(self) -> str:
        """Return who answers the actor's calls: its provider, or `scripted` in a dry run."""
        if self.scripted is not None:
            return "scripted"
        return self.config.provider if self.config else ""

    @property
    def model_name(self) -> str:
        """Return the model the actor's calls ask for (`script` in a dry run)."""
        if self.scripted is not None:
            return "script"
        return self.config.model if self.config else ""


def resolve(
    alias: str, *, document: dict[str, Any], script: dict[str, Any] | None
) -> ResolvedActor:
    """Return who answers for `alias` in this run: a script, an actor, or a reviewer group."""
    reference = document.get("actors", {}).get(alias)
    if reference is None:
        raise LookupError(f"actor alias '{alias}' is not declared by the recipe")
    answers = (script or {}).get(alias)
    scripted = tuple(str(a) for a in answers) if isinstance(answers, list) else None
    if isinstance(answers, str):
        scripted = (answers,)
    if reference.startswith(HUMAN_PREFIX):
        group = Group.objects.filter(name=reference.removeprefix(HUMAN_PREFIX)).first()
        if group is None:
            raise LookupError(
                f"reviewer group '{reference.removeprefix(HUMAN_PREFIX)}' no longer exists"
            )
        return ResolvedActor(alias, reference, True, group.pk, scripted=scripted)
    actor = Actor.objects.filter(name=reference).first()
    if actor is None:
        raise LookupError(f"actor '{reference}' no longer exists")
    if actor.kind == Actor.Kind.HUMAN:
        return ResolvedActor(alias, reference, True, actor.group_id, scripted=scripted)
    # Actors are checked when written; a row from before those checks fails its calls clearly.
    problems = actor.problems(resolve=False) if scripted is None else []
    problem = f"{problems[0][0]}: {problems[0][1]}" if problems else None
    config = ActorConfig(
        name=actor.name,
        provider=actor.provider,
        model=actor.model,
        base_url=actor.base_url or None,
        api_key_env=actor.api_key_env or None,
        params=actor.params,
        timeout_s=actor.timeout_s,
        config=actor.config,
    )
    prices = Prices(actor.price_in_per_million, actor.price_out_per_million, actor.currency)
    return ResolvedActor(
        alias,
        reference,
        False,
        config=config,
        scripted=scripted,
        problem=problem,
        prices=prices,
        limits=Limits.of(actor) if scripted is None else NO_LIMITS,
    )


def provider_for(actor: ResolvedActor) -> Provider:
    """Return the provider that answers for an LLM actor (a scripted one in dry runs)."""
    if actor.scripted is not None:
        return _scripted(actor.scripted)
    if actor.problem is not None:
        raise ProviderConfigError(f"actor '{actor.name}' cannot run: {actor.problem}")
    if actor.config is None:
        raise ProviderConfigError(
            f"actor '{actor.name}' is a reviewer group, not a model: it cannot answer a prompt"
        )
    return get_provider(actor.config)


@lru_cache(maxsize=256)
def _scripted(replies: tuple[str, ...]) -> Provider:
    config = ActorConfig(
        name="script",
        provider="scripted",
        model="script",
        base_url=None,
        api_key_env=None,
        params={},
        timeout_s=60,
        config={"replies": list(replies)},
    )
    return get_provider(config)


def enforces_schema(actor: ResolvedActor) -> bool:
    """Tell whether the actor's server is sent an output schema to enforce (a dry-run
    script is not: its answers are only validated)."""
    return actor.provider_name in SCHEMA_PROVIDERS


def default_timeout(actor: ResolvedActor) -> float:
    """Return how long a call of the actor may take when its step sets no timeout."""
    return float(actor.config.timeout_s if actor.config else 60)


def call(
    actor: ResolvedActor,
    prompt: str,
    *,
    call_index: int,
    timeout_s: float | None,
    on_token: Any = None,
    messages: tuple[dict[str, Any], ...] | None = None,
    tools: tuple[dict[str, Any], ...] | None = None,
    output_schema: OutputSchema | None = None,
    images: tuple[ImagePart, ...] = (),
) -> ChatResult:
    """Ask an LLM actor once (the provider retries transient errors itself).

    `messages` and `tools` carry a tool loop's conversation and the functions on offer;
    `output_schema` the JSON Schema the answer must meet; `images` what the model is shown
    with the prompt.
    """
    provider = provider_for(actor)
    config = actor.config
    request = ChatRequest(
        prompt=prompt,
        model=config.model if config else "script",
        params=dict(config.params) if config else {},
        timeout_s=float(timeout_s or default_timeout(actor)),
        call_index=call_index,
        messages=messages,
        tools=tools,
        output_schema=output_schema,
        images=images,
    )
    return provider.complete(request, on_token=on_token)
