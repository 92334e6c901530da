"""The registry: actor configs to providers, API keys from env vars, the allowlist source."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from runner.providers import (
    DEFAULT_ALLOWLIST,
    PROVIDERS,
    ActorConfig,
    ChatRequest,
    Provider,
    ProviderConfigError,
    get_provider,
)
from runner.providers.anthropic_messages import AnthropicProvider
from runner.providers.gemini import GeminiProvider
from runner.providers.ollama import DEFAULT_OLLAMA_URL, OllamaProvider
from runner.providers.openai_compat import OpenAICompatibleProvider
from runner.providers.scripted import ScriptedProvider
from tests.resolver import fake_resolver
from tests.runner.providers.stub_server import StubServer

KEY_VAR = "BRANCHLINE_TEST_OPENAI_KEY"
SECRET = "sk-live-do-not-print-me"
# The vendors' API hosts, resolved to a public address (no DNS here).
VENDOR_HOSTS = {
    "api.anthropic.com": [["8.8.8.8"]],
    "generativelanguage.googleapis.com": [["8.8.4.4"]],
}


def actor(**fields: Any) -> ActorConfig:
    fields.setdefault("name", "writer")
    fields.setdefault("provider", "openai")
    fields.setdefault("model", "gpt-test")
    return ActorConfig(**fields)


def test_it_knows_the_five_providers() -> None:
    assert set(PROVIDERS) == {"anthropic", "gemini", "openai", "ollama", "scripted"}


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        (actor(provider="openai", base_url="https://8.8.8.8/v1"), OpenAICompatibleProvider),
        (actor(provider="ollama"), OllamaProvider),
        (actor(provider="scripted", config={"replies": ["hi"]}), ScriptedProvider),
        (actor(provider="anthropic", api_key_env=KEY_VAR), AnthropicProvider),
        (actor(provider="gemini", api_key_env=KEY_VAR), GeminiProvider),
    ],
)
def test_it_builds_the_provider_an_actor_names(
    config: ActorConfig, cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    fake_resolver(monkeypatch, VENDOR_HOSTS)
    provider = get_provider(config)

    assert type(provider) is cls
    assert isinstance(provider, Provider)


def test_it_refuses_an_unknown_provider() -> None:
    with pytest.raises(
        ProviderConfigError, match="actor 'writer': unknown provider 'claude'; expected one of"
    ):
        get_provider(actor(provider="claude"))


@pytest.mark.parametrize(
    ("provider", "url"),
    [
        ("anthropic", "https://api.anthropic.com"),
        ("gemini", "https://generativelanguage.googleapis.com"),
    ],
)
def test_the_vendors_providers_default_to_the_vendors_servers(
    provider: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    fake_resolver(monkeypatch, VENDOR_HOSTS)

    built = get_provider(actor(provider=provider, api_key_env=KEY_VAR))

    assert built.base_url == url  # type: ignore[attr-defined]
    assert SECRET not in repr(built)


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_the_vendors_providers_need_a_key(provider: str) -> None:
    with pytest.raises(
        ProviderConfigError,
        match=f"actor 'writer': the {provider} API needs a key: name the environment variable",
    ):
        get_provider(actor(provider=provider))


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_the_vendors_providers_check_their_base_url_like_the_others(provider: str) -> None:
    with pytest.raises(ProviderConfigError, match=re.escape("127.0.0.1, a loopback address")):
        get_provider(
            actor(provider=provider, api_key_env="PATH", base_url="http://127.0.0.1:9/"),
            allowlist=[],
        )


def test_ollama_defaults_to_the_local_server() -> None:
    provider = get_provider(actor(provider="ollama"))

    assert isinstance(provider, OllamaProvider)
    assert provider.base_url == DEFAULT_OLLAMA_URL


def test_it_sends_the_key_from_the_named_env_var_and_never_shows_it(
    stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VAR, SECRET)
    provider = get_provider(
        actor(base_url=stub_server.base_url, api_key_env=KEY_VAR), allowlist=[stub_server.address]
    )

    provider.complete(ChatRequest(prompt="hi", model="gpt-test"))

    [sent] = stub_server.chat_requests
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(provider)


def test_it_names_a_missing_env_var_without_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)

    with pytest.raises(ProviderConfigError) as caught:
        get_provider(actor(base_url="https://8.8.8.8/v1", api_key_env=KEY_VAR))

    assert (
        str(caught.value)
        == f"actor 'writer': environment variable {KEY_VAR} (api_key_env) is not set"
    )


def test_an_empty_env_var_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "")

    with pytest.raises(ProviderConfigError, match=KEY_VAR):
        get_provider(actor(provider="ollama", api_key_env=KEY_VAR))


def test_it_prefixes_config_errors_with_the_actor_name() -> None:
    with pytest.raises(
        ProviderConfigError,
        match=re.escape("actor 'judge': base URL refused: 10.0.0.1, a private address"),
    ):
        get_provider(actor(name="judge", base_url="http://10.0.0.1/v1"))
    with pytest.raises(
        ProviderConfigError, match=r"actor 'bot': scripted config: replies\[0\]: must be text"
    ):
        get_provider(actor(name="bot", provider="scripted", config={"replies": [1]}))


def test_without_django_settings_it_uses_the_default_allowlist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("django.conf.settings", SimpleNamespace(configured=False))

    get_provider(actor(provider="ollama", base_url="http://127.0.0.1:11434"))
    with pytest.raises(ProviderConfigError, match="loopback"):
        get_provider(actor(base_url="http://127.0.0.1:8000/v1"))


def test_it_reads_the_allowlist_from_django_settings_when_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = SimpleNamespace(configured=True, PROVIDER_URL_ALLOWLIST=["10.0.0.0/8"])
    monkeypatch.setattr("django.conf.settings", fake)

    provider = get_provider(actor(base_url="http://10.9.8.7:8000/v1"))

    assert isinstance(provider, OpenAICompatibleProvider)
    with pytest.raises(ProviderConfigError, match="loopback"):
        get_provider(actor(provider="ollama"))  # the settings replace the default list


def test_configured_settings_without_the_setting_fall_back_to_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("django.conf.settings", SimpleNamespace(configured=True))

    assert get_provider(actor(provider="ollama")).base_url == DEFAULT_OLLAMA_URL  # type: ignore[attr-defined]


def test_an_explicit_allowlist_wins_over_everything() -> None:
    assert get_provider(actor(base_url="http://10.1.1.1/v1"), allowlist=["10.1.1.1"])
    assert DEFAULT_ALLOWLIST  # unchanged by the call
