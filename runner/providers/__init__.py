"""LLM providers behind one small protocol: ``get_provider(actor).complete(request)``.

No Django import at module level: the runner, the CLI and tests use these without settings.
"""

from __future__ import annotations

from .base import (
    ChatRequest,
    ChatResult,
    ImagePart,
    OutputSchema,
    Provider,
    ProviderConfigError,
    ProviderError,
    ProviderTimeoutError,
    ToolCallRequest,
)
from .registry import PROVIDERS, SCHEMA_PROVIDERS, ActorConfig, get_provider
from .urls import DEFAULT_ALLOWLIST, validate_base_url

__all__ = [
    "DEFAULT_ALLOWLIST",
    "PROVIDERS",
    "SCHEMA_PROVIDERS",
    "ActorConfig",
    "ChatRequest",
    "ChatResult",
    "ImagePart",
    "OutputSchema",
    "Provider",
    "ProviderConfigError",
    "ProviderError",
    "ProviderTimeoutError",
    "ToolCallRequest",
    "get_provider",
    "validate_base_url",
]
