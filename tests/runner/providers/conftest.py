"""Fixtures for provider tests: the stub server and providers pointed at it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runner.providers.anthropic_messages import AnthropicProvider
from runner.providers.gemini import GeminiProvider
from runner.providers.http_calls import HTTPProvider
from runner.providers.ollama import OllamaProvider
from runner.providers.openai_compat import OpenAICompatibleProvider
from tests.runner.providers.stub_server import StubServer, stub_server

__all__ = ["stub_server"]

API_KEY = "sk-test-0123456789"

MakeProvider = Callable[..., OpenAICompatibleProvider]


@pytest.fixture
def sleeps() -> list[float]:
    """Collect the backoff sleeps providers ask for, instead of sleeping."""
    return []


@pytest.fixture
def openai_provider(stub_server: StubServer, sleeps: list[float]) -> MakeProvider:
    """Return a factory of OpenAI-compatible providers pointed at the stub."""

    def make(**options: Any) -> OpenAICompatibleProvider:
        options.setdefault("allowlist", [stub_server.address])
        options.setdefault("sleep", sleeps.append)
        return OpenAICompatibleProvider(
            stub_server.base_url, options.pop("api_key", API_KEY), **options
        )

    return make


@pytest.fixture(params=["openai", "ollama"])
def any_provider(
    request: pytest.FixtureRequest, stub_server: StubServer, sleeps: list[float]
) -> MakeProvider:
    """Return a factory of providers of both kinds pointed at the stub."""

    def make(**options: Any) -> OpenAICompatibleProvider:
        options.setdefault("allowlist", [stub_server.address])
        options.setdefault("sleep", sleeps.append)
        if request.param == "openai":
            return OpenAICompatibleProvider(
                stub_server.base_url, options.pop("api_key", API_KEY), **options
            )
        # The root URL, as Ollama users write it: the provider appends /v1.
        return OllamaProvider(stub_server.url, options.pop("api_key", None), **options)

    return make


NATIVE = {"anthropic": AnthropicProvider, "gemini": GeminiProvider}
MakeNative = Callable[..., HTTPProvider]


def _native(name: str, stub_server: StubServer, sleeps: list[float]) -> MakeNative:
    def make(**options: Any) -> HTTPProvider:
        options.setdefault("allowlist", [stub_server.address])
        options.setdefault("sleep", sleeps.append)
        return NATIVE[name](stub_server.url, options.pop("api_key", API_KEY), **options)

    return make


@pytest.fixture(params=sorted(NATIVE))
def native_provider(
    request: pytest.FixtureRequest, stub_server: StubServer, sleeps: list[float]
) -> MakeNative:
    """Return a factory of the Anthropic and the Gemini provider, each pointed at the stub,
    which answers in its wire format."""
    return _native(request.param, stub_server, sleeps)


@pytest.fixture
def anthropic_provider(stub_server: StubServer, sleeps: list[float]) -> MakeNative:
    """Return a factory of Anthropic providers pointed at the stub."""
    return _native("anthropic", stub_server, sleeps)


@pytest.fixture
def gemini_provider(stub_server: StubServer, sleeps: list[float]) -> MakeNative:
    """Return a factory of Gemini providers pointed at the stub."""
    return _native("gemini", stub_server, sleeps)
