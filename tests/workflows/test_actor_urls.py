"""Actor base URLs: the SSRF guard wherever an actor is written, and credentials never shown."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import ActorFactory, admin_form_data, openai_actor
from workflows.actor_urls import redact_url
from workflows.models import Actor

pytestmark = pytest.mark.django_db

CREDENTIALS = (
    "base_url: must not contain credentials; put the key in the env var named by api_key_env"
)
HINT = "add it to PROVIDER_URL_ALLOWLIST to allow it"


def resolve_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    """Make every host name resolve to `addresses` (no test needs real DNS)."""

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        family = socket.AF_INET6 if ":" in addresses[0] else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


class TestBaseURLs:
    @pytest.mark.parametrize(
        ("url", "error"),
        [
            (
                "http://169.254.169.254/latest/meta-data",
                "base_url: refused: 169.254.169.254, a link-local address (cloud metadata "
                f"services live there); {HINT}",
            ),
            ("http://10.0.0.1:8000/v1", f"base_url: refused: 10.0.0.1, a private address; {HINT}"),
            (
                "http://[::ffff:10.0.0.1]/v1",
                f"base_url: refused: ::ffff:10.0.0.1 is 10.0.0.1, a private address; {HINT}",
            ),
            ("http://192.168.1.5/v1", f"base_url: refused: 192.168.1.5, a private address; {HINT}"),
            (
                "http://127.0.0.1:8080/v1",
                f"base_url: refused: 127.0.0.1, a loopback address; {HINT}",
            ),
            ("http://0x7f000001/v1", "base_url: Enter a valid URL."),  # refused by the field
            ("http://[fd00::1]/v1", f"base_url: refused: fd00::1, a private address; {HINT}"),
            ("http://localhost:8080/v1", "base_url: refused: localhost resolves to *"),
            ("https://user:hunter2@api.example.com/v1", CREDENTIALS),
            ("https://user@api.example.com/v1", CREDENTIALS),
            ("https://api.example.com/v1?key=hunter2", "base_url: must not have a query*"),
        ],
    )
    def test_the_api_refuses_a_url_the_call_time_guard_refuses(
        self, staff_api: APIClient, url: str, error: str
    ) -> None:
        response = staff_api.post("/api/actors/", openai_actor(base_url=url), format="json")

        assert response.status_code == 400, response.content
        errors = response.json()["errors"]
        if error.endswith("*"):
            assert any(e.startswith(error[:-1]) for e in errors), errors
        else:
            assert error in errors, errors
        assert "hunter2" not in response.content.decode()
        assert not Actor.objects.filter(name="remote").exists()

    def test_it_refuses_a_name_that_resolves_to_a_private_address(
        self, staff_api: APIClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        resolve_to(monkeypatch, "8.8.8.8", "10.0.0.7")

        response = staff_api.post(
            "/api/actors/", openai_actor(base_url="https://llm.example.com/v1"), format="json"
        )

        assert response.status_code == 400
        assert response.json()["errors"] == [
            f"base_url: refused: llm.example.com resolves to 10.0.0.7, a private address; {HINT}"
        ]

    def test_it_accepts_a_name_that_does_not_resolve_now(
        self, staff_api: APIClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # DNS answers change: every call resolves and checks the name again.
        def no_such_name(*args: Any, **kwargs: Any) -> Any:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        monkeypatch.setattr(socket, "getaddrinfo", no_such_name)

        response = staff_api.post(
            "/api/actors/", openai_actor(base_url="https://llm.example.com/v1"), format="json"
        )

        assert response.status_code == 201, response.content

    @pytest.mark.parametrize(
        ("allowlist", "url"),
        [
            (["127.0.0.1:11434", "localhost:11434"], "http://127.0.0.1:11434/v1"),
            (["10.20.0.0/16"], "http://10.20.0.5:8000/v1"),
            (["vllm.internal:8000"], "http://vllm.internal:8000/v1"),
        ],
    )
    def test_it_honours_the_allowlist_as_calls_do(
        self, staff_api: APIClient, settings: Any, allowlist: list[str], url: str
    ) -> None:
        settings.PROVIDER_URL_ALLOWLIST = allowlist

        response = staff_api.post("/api/actors/", openai_actor(base_url=url), format="json")

        assert response.status_code == 201, response.content

    def test_an_allowlist_without_the_local_ollama_refuses_it(
        self, staff_api: APIClient, settings: Any
    ) -> None:
        settings.PROVIDER_URL_ALLOWLIST = []

        response = staff_api.post(
            "/api/actors/",
            {
                "name": "llama",
                "provider": "ollama",
                "model": "llama3.2",
                "base_url": "http://127.0.0.1:11434",
            },
            format="json",
        )

        assert response.status_code == 400
        assert response.json()["errors"] == [
            f"base_url: refused: 127.0.0.1, a loopback address; {HINT}"
        ]

    def test_a_patch_is_checked_too(self, staff_api: APIClient, actors: Any) -> None:
        response = staff_api.patch(
            f"/api/actors/{actors.openai.pk}/",
            {"base_url": "http://[::ffff:169.254.169.254]/"},
            format="json",
        )

        assert response.status_code == 400
        assert response.json()["errors"][0].startswith("base_url: refused: ::ffff:169.254.169.254")
        actors.openai.refresh_from_db()
        assert actors.openai.base_url == "https://llm.example.com/v1"


class TestCredentialsAreNeverShown:
    @pytest.fixture
    def legacy(self, db: None) -> Actor:
        """A row written before credentials in URLs were refused."""
        return ActorFactory(
            name="legacy", openai=True, base_url="https://admin:hunter2@llm.example.com/v1"
        )

    def test_the_api_shows_a_stored_url_redacted(self, api: APIClient, legacy: Actor) -> None:
        listed = api.get("/api/actors/").content.decode()
        one = api.get(f"/api/actors/{legacy.pk}/").json()

        assert "hunter2" not in listed and "admin:" not in listed
        assert one["base_url"] == "https://***@llm.example.com/v1"

    def test_the_admin_shows_it_redacted_and_a_save_must_drop_it(
        self, admin_client: Client, legacy: Actor
    ) -> None:
        url = f"/admin/workflows/actor/{legacy.pk}/change/"
        page = admin_client.get(url).content.decode()
        assert "hunter2" not in page and "***@llm.example.com" in page
        assert "hunter2" not in admin_client.get("/admin/workflows/actor/").content.decode()

        response = admin_client.post(
            url, {**admin_form_data(legacy), "base_url": "https://***@llm.example.com/v1"}
        )

        assert response.status_code == 200
        assert "must not contain credentials" in response.content.decode()
        legacy.refresh_from_db()
        assert legacy.base_url == "https://admin:hunter2@llm.example.com/v1"

    @pytest.mark.parametrize(
        ("url", "shown"),
        [
            ("https://a:b@host/v1", "https://***@host/v1"),
            ("https://a@host:8443", "https://***@host:8443"),
            ("http://a:b@c@host/p@q", "http://***@host/p@q"),
            ("https://host/v1", "https://host/v1"),
            ("host/@x", "host/@x"),
            ("", ""),
        ],
    )
    def test_redaction_drops_everything_before_the_host(self, url: str, shown: str) -> None:
        assert redact_url(url) == shown
