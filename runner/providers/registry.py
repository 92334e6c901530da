"""Map an actor's provider name to the class that calls it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .base import Provider, ProviderConfigError
from .ollama import OllamaProvider
from .openai_compat import OpenAICompatibleProvider
from .scripted import ScriptedProvider
from .urls import settings_allowlist

ProviderName = Literal["anthropic", "gemini", "ollama", "openai", "scripted"]
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
# The providers whose servers are sent a step's output schema to enforce (`response_format`);
# the others' answers are only validated, the schema told to the model in the prompt.
SCHEMA_PROVIDERS: frozenset[str] = frozenset({"openai", "ollama"})


@dataclass(frozen=True)
class ActorConfig:
    """Describe an LLM actor the way providers need it, free of Django models.

    ``api_key_env`` names the environment variable holding the key; the key itself is read
    only when the provider is built and is never stored here.
    """

    name: str
    provider: ProviderName
    model: str = ""
    base_url: str | None = field(default=None, repr=False)  # rows may predate the URL checks
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 60
    config: dict[str, Any] = field(default_factory=dict)


def _build_openai(actor: ActorConfig, allowlist: Sequence[str]) -> Provider:
    return OpenAICompatibleProvider(
        actor.base_url or DEFAULT_OPENAI_URL, _api_key(actor), allowlist=allowlist
    )


def _build_ollama(actor: ActorConfig, allowlist: Sequence[str]) -> Provider:
    return OllamaProvider(actor.base_url, _api_key(actor), allowlist=allowlist)


def _build_anthropic(actor: ActorConfig, allowlist: Sequence[str]) -> Provider:
    # Imported here: loading the SDK takes seconds, which a process that calls no Anthropic
    # model should not wait (the same below for Gemini's).
    from .anthropic_messages import AnthropicProvider

    return AnthropicProvider(actor.base_url, _required_api_key(actor), allowlist=allowlist)


def _build_gemini(actor: ActorConfig, allowlist: Sequence[str]) -> Provider:
    from .gemini import GeminiProvider

    return GeminiProvider(actor.base_url, _required_api_key(actor), allowlist=allowlist)


def _build_scripted(actor: ActorConfig, allowlist: Sequence[str]) -> Provider:
    return ScriptedProvider(actor.config)


PROVIDERS: dict[str, Callable[[ActorConfig, Sequence[str]], Provider]] = {
    "anthropic": _build_anthropic,
    "gemini": _build_gemini,
    "openai": _build_openai,
    "ollama": _build_ollama,
    "scripted": _build_scripted,
}


def get_provider(actor: ActorConfig, *, allowlist: Sequence[str] | None = None) -> Provider:
    """Return the provider for ``actor``, or raise ProviderConfigError saying what is missing.

    Without ``allowlist``, the base URL allowlist comes from Django's
    ``PROVIDER_URL_ALLOWLIST`` when settings are configured, else ``DEFAULT_ALLOWLIST``.
    """
    build = PROVIDERS.get(actor.provider)
    if build is None:
        raise ProviderConfigError(
            f"actor {actor.name!r}: unknown provider {actor.provider!r}; "
            f"expected one of {', '.join(sorted(PROVIDERS))}"
        )
    if allowlist is None:
        allowlist = settings_allowlist()
    try:
        return build(actor, allowlist)
    except ProviderConfigError as exc:
        raise ProviderConfigError(f"actor {actor.name!r}: {exc}") from None


def _api_key(actor: ActorConfig) -> str | None:
    """Return the key from the env var the actor names; only its name ever appears in errors."""
    if not actor.api_key_env:
        return None
    value = os.environ.get(actor.api_key_env)
    if not value:
        raise ProviderConfigError(
            f"environment variable {actor.api_key_env} (api_key_env) is not set"
        )
    return value


def _required_api_key(actor: ActorConfig) -> str:
    """Return the key of a provider whose API always wants one."""
    key = _api_key(actor)
    if key is None:
        raise ProviderConfigError(
            f"the {actor.provider} API needs a key: name the environment variable that holds "
            "it in api_key_env"
        )
    return key
