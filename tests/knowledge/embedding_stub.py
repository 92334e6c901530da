"""An embedding actor pointed at the tests' stub server (`/v1/embeddings`), for any test.

from tests.knowledge.embedding_stub import embedding_actor, stub_server  # fixtures
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from knowledge import embeddings
from tests.factories import ActorFactory
from tests.runner.providers.stub_server import StubServer, stub_server
from workflows.models import Actor

__all__ = ["API_KEY", "KEY_ENV", "MakeActor", "embedding_actor", "stub_server"]

KEY_ENV = "BRANCHLINE_TEST_EMBEDDING_KEY"
API_KEY = "sk-embed-0123456789"

MakeActor = Callable[..., Actor]


@pytest.fixture
def embedding_actor(
    db: None, stub_server: StubServer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> MakeActor:
    """Return a factory of `openai` actors that embed through the stub (no retries)."""
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    monkeypatch.setenv(KEY_ENV, API_KEY)
    # A failing server fails at once: the SDK's backoff would only slow the tests down.
    monkeypatch.setattr(embeddings, "MAX_RETRIES", 0)

    def make(**fields: Any) -> Actor:
        fields.setdefault("name", "stub-embedder")
        fields.setdefault("provider", Actor.Provider.OPENAI)
        fields.setdefault("model", "embed-1")
        fields.setdefault("base_url", stub_server.base_url)
        fields.setdefault("api_key_env", KEY_ENV)
        fields.setdefault("config", {})
        fields.setdefault("timeout_s", 5)
        actor: Actor = ActorFactory(**fields)
        return actor

    return make
