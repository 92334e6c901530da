"""The provider protocol: a chat request in, a chat result out, errors saying if retrying helps."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

TokenCallback = Callable[[str], None]


@dataclass(frozen=True)
class OutputSchema:
    """The JSON Schema an answer must meet, for servers that enforce it (``response_format``
    of the OpenAI chat format; Ollama's OpenAI-compatible API reads it as its ``format``).

    ``name`` is the step's key; ``strict`` asks OpenAI to enforce the schema exactly, which it
    accepts only for schemas whose objects list every property as required and allow no
    others. The answer is validated either way (``workflows.engine.output_schema``).
    """

    name: str
    schema: dict[str, Any]
    strict: bool = False


@dataclass(frozen=True)
class ImagePart:
    """An image the model is shown with the prompt: its media type (``image/png``...) and its
    bytes, sent in each provider's wire format (a data URL, a base64 block, inline data)."""

    media_type: str
    data: bytes = field(repr=False)

    def __repr__(self) -> str:  # never the bytes in a log or an error
        return f"ImagePart({self.media_type!r}, {len(self.data)} bytes)"

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"


@dataclass(frozen=True)
class ChatRequest:
    """Describe one call to a model.

    ``timeout_s`` is the budget of the whole call, retries and backoff included: a provider
    returns or raises within it (plus a small margin), so a worker never hangs on a model.
    ``call_index`` counts how many times this actor alias was already called in the run;
    scripted actors use it to pick their reply. ``messages``, when given, is the whole
    conversation in the OpenAI chat format (a tool loop's assistant ``tool_calls`` and
    ``tool`` results) and replaces ``prompt``/``system``; ``tools`` are the functions the model
    may call, as ``{"type": "function", "function": {"name", "description", "parameters"}}``;
    ``output_schema`` the JSON Schema the answer must meet, sent by providers whose servers
    enforce one (others leave it to the caller's validation). ``images`` go with the prompt
    (with a conversation's first user message), after its text; a provider that shows a model
    no images (a script) ignores them.
    """

    prompt: str
    model: str
    system: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 60
    call_index: int = 0
    messages: tuple[dict[str, Any], ...] | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    output_schema: OutputSchema | None = None
    images: tuple[ImagePart, ...] = ()

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, not {self.timeout_s!r}")
        if self.call_index < 0:
            raise ValueError(f"call_index must not be negative, not {self.call_index!r}")


@dataclass(frozen=True)
class ToolCallRequest:
    """One call to a tool a model asked for: its id, the function's name, its arguments.

    ``arguments`` is the JSON text the model wrote (it may not be valid JSON: the caller
    tells the model so). ``extra_content`` is what the model's API wants back with the call
    when the conversation goes on, as the OpenAI chat format's tool calls carry it
    (``{"google": {"thought_signature": ...}}``: Gemini refuses a call sent back without it).
    """

    id: str
    name: str
    arguments: str
    # Not compared: a dict would make the call unhashable.
    extra_content: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ChatResult:
    """Hold a model's full answer and what it cost.

    Token counts are None when the server did not report them. ``latency_ms`` covers the
    whole call, retries included, because that is what the run waited for. ``tool_calls``
    are the tools the model asked to call instead of (or beside) answering.
    """

    text: str
    tokens_in: int | None
    tokens_out: int | None
    latency_ms: int
    model: str
    tool_calls: tuple[ToolCallRequest, ...] = ()


class ProviderError(Exception):
    """Report a failed model call; ``retryable`` says whether trying again later can help."""

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code

    def __str__(self) -> str:
        return self.message


class ProviderConfigError(ProviderError):
    """Report a config mistake (bad base URL, missing env var, bad script); never retryable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ProviderTimeoutError(ProviderError):
    """Report that the call ran out of its time budget.

    Separate from other failures because recipes branch on it (``execution_timeout``).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


@runtime_checkable
class Provider(Protocol):
    """Answer chat requests; every backend (HTTP or scripted) implements this."""

    def complete(
        self, request: ChatRequest, *, on_token: TokenCallback | None = None
    ) -> ChatResult:
        """Return the model's full answer, streaming each text delta to ``on_token`` if given.

        Raise ProviderError (or a subclass) for every failure the backend can cause; an
        exception raised by ``on_token`` itself propagates unchanged.
        """
        ...
