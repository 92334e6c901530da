"""Turn texts into vectors with a knowledge base's embedding actor.

- provider `openai`: the OpenAI SDK's `embeddings.create` at the actor's base URL (default
  OpenAI's own); provider `ollama`: the same API, which Ollama serves under `/v1`;
- provider `scripted`: a deterministic local embedding (feature hashing of words), for
  demos and tests with no server.

Calls to a server go through the guarded transport (`workflows/guarded_http.py`): the base
URL is checked with the SSRF guard before the call and every address again when connecting;
one time budget (the actor's `timeout_s`) covers each request with its retries. The API key
is read from the env var the actor names, sent, and never shown: errors name the server by
its redacted URL and replace the key wherever a server echoed it.

Whoever counts model calls (the runner, for a step's searches) watches the calls made in a
block with `observed`: each `embed` is reported once, answered or failed, with the tokens the
server reported (`usage.prompt_tokens`) and how long it took.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

import httpx
import numpy as np
import openai

from workflows.actor_urls import (
    Allowlist,
    NameUnresolved,
    URLRefused,
    check_base_url,
    redact_url,
    settings_allowlist,
)
from workflows.guarded_http import BodyTooLarge, DeadlinePassed, call_deadline, guarded_client
from workflows.models import Actor

# Texts per request: servers cap a request's inputs (OpenAI at 2048) and its tokens.
BATCH_SIZE = 64
SCRIPTED_DIMENSIONS = 256
# Retries of a request the SDK makes itself (connection errors, 408/409/429, 5xx).
MAX_RETRIES = 2
CONNECT_TIMEOUT_S = 5.0
MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
# Ollama ignores the key, but the OpenAI wire format expects one.
OLLAMA_PLACEHOLDER_KEY = "ollama"
_MIN_SECRET_CHARS = 8
_EXCERPT_CHARS = 200
_WORD = re.compile(r"\w+")
_NO_AMBIENT_HEADERS = cast(
    "dict[str, str]", {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
)


class EmbeddingError(Exception):
    """Say why texts could not be embedded, naming the server by its redacted URL."""


@dataclass(frozen=True)
class EmbeddingCall:
    """One `embed` as an observer sees it: the actor, the texts, what the server counted.

    `tokens` is the server's `usage.prompt_tokens` summed over the requests, None when some
    request reported none (or no server was asked: a scripted actor).
    """

    actor: Actor
    texts: tuple[str, ...]
    tokens: int | None
    latency_ms: int
    started_at: datetime
    error: str = ""


EmbeddingObserver = Callable[[EmbeddingCall], None]
_observer: ContextVar[EmbeddingObserver | None] = ContextVar("embedding_observer", default=None)


@contextmanager
def observed(observer: EmbeddingObserver) -> Iterator[None]:
    """Report each `embed` made in the block (in this thread or task) to `observer`."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


def embed(actor: Actor, texts: list[str]) -> list[list[float]]:
    """Return one vector per text, in order, all of the same length.

    Raise EmbeddingError when the actor cannot embed (a human actor, an unknown provider,
    a refused URL, a missing API key), when its server is unreachable or answers an error,
    or when the answer is not one vector of numbers per text, all of one size.
    """
    if not texts:
        return []
    observer = _observer.get()
    if observer is None:
        return _embed(actor, texts, [])
    started_at, began = datetime.now(UTC), time.monotonic()
    usage: list[int | None] = []
    error = ""
    try:
        return _embed(actor, texts, usage)
    except EmbeddingError as exc:
        error = str(exc)
        raise
    finally:
        counted = [tokens for tokens in usage if tokens is not None]
        observer(
            EmbeddingCall(
                actor=actor,
                texts=tuple(texts),
                tokens=sum(counted) if usage and len(counted) == len(usage) else None,
                latency_ms=int((time.monotonic() - began) * 1000),
                started_at=started_at,
                error=error,
            )
        )


def _embed(actor: Actor, texts: list[str], usage: list[int | None]) -> list[list[float]]:
    """Embed `texts` (see `embed`), adding each request's reported tokens to `usage`."""
    if actor.kind != Actor.Kind.LLM:
        raise EmbeddingError(f"actor {actor.name!r} is not a model, so it cannot embed texts")
    if actor.provider == Actor.Provider.SCRIPTED:
        return [scripted_embedding(text) for text in texts]
    if actor.provider not in (Actor.Provider.OPENAI, Actor.Provider.OLLAMA):
        raise EmbeddingError(f"actor {actor.name!r}: unknown provider {actor.provider!r}")
    client = _Client(actor)
    vectors: list[list[float]] = []
    for start in range(0, len(texts), BATCH_SIZE):
        vectors.extend(client.embed(texts[start : start + BATCH_SIZE], usage))
        if len(vectors[-1]) != len(vectors[0]):
            raise EmbeddingError(
                f"{client.who} answered vectors of {len(vectors[0])} and of "
                f"{len(vectors[-1])} dimensions in one call"
            )
    return vectors


def fingerprint(actor: Actor) -> str:
    """Return what decides the vectors an actor answers: its provider, model and base URL."""
    return json.dumps([actor.provider, actor.model, (actor.base_url or "").strip()])


def scripted_embedding(text: str, dimensions: int = SCRIPTED_DIMENSIONS) -> list[float]:
    """Return the text's lowercased words hashed into `dimensions` signed buckets, length 1.

    Texts sharing words point the same way, so search by meaning works (lexically) with no
    server. A text without words is the zero vector.
    """
    vector = np.zeros(dimensions, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vector[digest % dimensions] += 1.0 if (digest >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm > 0:
        vector /= norm
    return [float(x) for x in vector]


class _Client:
    """One actor's embedding server: checked URL, key, and the requests to it."""

    def __init__(self, actor: Actor) -> None:
        if actor.provider == Actor.Provider.OLLAMA:
            url = _with_v1(actor.base_url or DEFAULT_OLLAMA_URL)
        else:
            url = actor.base_url or DEFAULT_OPENAI_URL
        self.who = f"embedding server at {redact_url(url)}"
        self._actor = actor
        try:
            self._allowlist = Allowlist.parse(settings_allowlist())
            self.base_url = check_base_url(url, allowlist=self._allowlist).url
        except NameUnresolved as exc:
            raise EmbeddingError(f"{self.who} is unreachable: {exc}") from None
        except URLRefused as exc:
            raise EmbeddingError(f"actor {actor.name!r}: {exc}") from None
        self.who = f"embedding server at {redact_url(self.base_url)}"
        self._key = self._api_key(actor)

    @staticmethod
    def _api_key(actor: Actor) -> str:
        if actor.api_key_env:
            value = os.environ.get(actor.api_key_env)
            if not value:
                raise EmbeddingError(
                    f"actor {actor.name!r}: environment variable {actor.api_key_env} "
                    "(api_key_env) is not set"
                )
            return value
        # An empty key makes the SDK send no Authorization header (and read no env var).
        return OLLAMA_PLACEHOLDER_KEY if actor.provider == Actor.Provider.OLLAMA else ""

    def embed(self, texts: list[str], usage: list[int | None]) -> list[list[float]]:
        """Return the vectors of one request's texts, checked; add its tokens to `usage`."""
        timeout_s = float(self._actor.timeout_s)
        deadline = time.monotonic() + timeout_s
        timeout = httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
        http_client = guarded_client(self._allowlist, max_body_bytes=MAX_BODY_BYTES)
        with call_deadline(deadline):
            client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self._key,
                max_retries=MAX_RETRIES,
                timeout=timeout,
                http_client=http_client,
                default_headers=_NO_AMBIENT_HEADERS,
            )
            try:
                raw = client.embeddings.with_raw_response.create(
                    model=self._actor.model, input=texts, encoding_format="float"
                )
                body = raw.http_response.read()
            except openai.APIStatusError as exc:
                raise self._error(f"answered {exc.status_code}", _status_detail(exc)) from None
            except openai.APITimeoutError:
                raise self._error(f"did not answer within {timeout_s:g} s") from None
            except (openai.APIConnectionError, httpx.HTTPError, DeadlinePassed) as exc:
                raise self._unreachable(exc, timeout_s) from None
            except BodyTooLarge as exc:
                raise self._error(str(exc)) from None
            except openai.OpenAIError as exc:
                raise self._error("failed", str(exc)) from None
        return self._vectors(body, len(texts), usage)

    def _vectors(self, body: bytes, count: int, usage: list[int | None]) -> list[list[float]]:
        try:
            data = json.loads(body)
        except ValueError:
            raise self._error("answered with a body that is not valid JSON") from None
        usage.append(_prompt_tokens(data))
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            error = data.get("error") if isinstance(data, dict) else None
            if error:
                message = error.get("message") if isinstance(error, dict) else error
                raise self._error("answered with an error", str(message))
            raise self._error("answered without a list of embeddings in data")
        if len(items) != count:
            raise self._error(f"answered {len(items)} embeddings for {count} texts")
        # The API numbers its answers; a server may list them in another order.
        if all(isinstance(item, dict) and isinstance(item.get("index"), int) for item in items):
            items = sorted(items, key=lambda item: item["index"])
        vectors = [self._vector(item, position) for position, item in enumerate(items)]
        sizes = {len(vector) for vector in vectors}
        if len(sizes) > 1:
            shown = ", ".join(str(size) for size in sorted(sizes))
            raise self._error(f"answered vectors of different sizes ({shown})")
        return vectors

    def _vector(self, item: object, position: int) -> list[float]:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, list) or not vector:
            raise self._error(f"answered no embedding at position {position}")
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in vector
        ):
            raise self._error(f"answered an embedding of things other than numbers at {position}")
        return [float(x) for x in vector]

    def _unreachable(self, exc: BaseException, timeout_s: float) -> EmbeddingError:
        for cause in _causes(exc):
            if isinstance(cause, DeadlinePassed | httpx.ReadTimeout):
                return self._error(f"did not answer within {timeout_s:g} s")
            if isinstance(cause, BodyTooLarge):
                return self._error(str(cause))
            if isinstance(cause, NameUnresolved):
                return EmbeddingError(f"{self.who} is unreachable: {cause}")
            if isinstance(cause, URLRefused):
                # The name now resolves to a refused address (checked again at connect).
                return self._error("is refused", str(cause))
        reason = next(
            (str(c) for c in _causes(exc) if isinstance(c, httpx.HTTPError | OSError) and str(c)),
            str(exc),
        )
        return EmbeddingError(f"{self.who} is unreachable: {self._redact(reason)}")

    def _error(self, reason: str, detail: str = "") -> EmbeddingError:
        message = f"{self.who} {reason}"
        if detail:
            message += f": {self._redact(_excerpt(detail))}"
        return EmbeddingError(message)

    def _redact(self, text: str) -> str:
        # Servers sometimes echo the credentials they rejected.
        if len(self._key) >= _MIN_SECRET_CHARS and self._key in text:
            return text.replace(self._key, "***")
        return text


def _prompt_tokens(data: object) -> int | None:
    """Return the tokens a server says a request's texts made (`usage.prompt_tokens`)."""
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return tokens
    return None


def _with_v1(base_url: str) -> str:
    """Return Ollama's base URL with its OpenAI-compatible `/v1` path, as Ollama documents it."""
    stripped = base_url.strip().rstrip("/")
    return stripped if stripped.endswith("/v1") else stripped + "/v1"


def _status_detail(exc: openai.APIStatusError) -> str:
    if 300 <= exc.status_code < 400:
        location = exc.response.headers.get("location", "nowhere")
        return f"redirect to {_excerpt(location)} not followed; fix the base URL"
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)
    # The SDK's own message for a body without one says nothing the status does not.
    return "" if exc.message == f"Error code: {exc.status_code}" else exc.message


def _causes(exc: BaseException) -> list[BaseException]:
    # The SDK wraps transport exceptions in APIConnectionError; what matters is underneath.
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"
