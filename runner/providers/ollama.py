"""Ollama, through the OpenAI-compatible API it serves under ``/v1``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

from .http_calls import MAX_BODY_BYTES, MAX_RESPONSE_CHARS
from .openai_compat import OpenAICompatibleProvider
from .urls import DEFAULT_ALLOWLIST

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434/v1"
# Ollama ignores the key, but the OpenAI wire format expects one.
PLACEHOLDER_API_KEY = "ollama"


class OllamaProvider(OpenAICompatibleProvider):
    """Call an Ollama server; base URLs given without ``/v1`` (as Ollama documents them) get it."""

    name = "ollama"

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        connect_timeout: float = 5,
        allowlist: Sequence[str] = DEFAULT_ALLOWLIST,
        sleep: Callable[[float], None] = time.sleep,
        max_response_chars: int = MAX_RESPONSE_CHARS,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        super().__init__(
            openai_base_url(base_url or DEFAULT_OLLAMA_URL),
            api_key or PLACEHOLDER_API_KEY,
            max_retries=max_retries,
            connect_timeout=connect_timeout,
            allowlist=allowlist,
            max_response_chars=max_response_chars,
            max_body_bytes=max_body_bytes,
            sleep=sleep,
        )


def openai_base_url(base_url: str) -> str:
    """Return Ollama's base URL with its OpenAI-compatible ``/v1`` path appended if missing."""
    try:
        parts = urlsplit(base_url.strip())
    except ValueError:
        # Left for validate_base_url to refuse with its own, clearer message.
        return base_url
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit(parts._replace(path=path))
