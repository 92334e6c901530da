"""Errors DRF does not answer: every response has a request id, a failure under /api/ is JSON
(500, or 503 with Retry-After when the database or the broker is unreachable), pages keep HTML.

Outages are real: the database is pointed at a closed port (or, on SQLite, a file that cannot
be opened), its own backend is terminated mid-request, Redis is a closed port or a socket that
never answers. Nothing is mocked.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
import redis
from django.db import OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client
from django.urls import include, path
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.middleware import RETRY_AFTER_SECONDS
from config.urls import handler400, handler403, handler404, handler500
from tests.conftest import api_client, reconnect
from tests.live_server import free_port

SECRET = "hunter2-in-the-error"
POSTGRES = connection.vendor == "postgresql"

# --------------------------------------------------------------------------------------------
# Views that fail for real, served by this module as the URLconf (next to the whole site)


def fail(kind: str) -> None:
    if kind == "crash":
        raise RuntimeError(f"the password is {SECRET}")
    if kind == "kombu":
        url = f"redis://127.0.0.1:{free_port()}/0"
        with kombu.Connection(url, connect_timeout=1) as broker:
            broker.ensure_connection(max_retries=1)
    if kind == "redis-refused":
        redis.Redis(port=free_port(), socket_connect_timeout=1).ping()
    if kind == "redis-frozen":
        # A socket that accepts and never answers: Redis stopped with SIGSTOP.
        with socket.socket() as frozen:
            frozen.bind(("127.0.0.1", 0))
            frozen.listen()
            port = frozen.getsockname()[1]
            redis.Redis(port=port, socket_connect_timeout=1, socket_timeout=0.5).ping()
    if kind == "terminated":
        # The server closes this very connection (a restart, a failover, an administrator).
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            cursor.execute("SELECT 1")
    raise AssertionError(f"{kind} did not fail")


class FailingApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def get(self, request: Request, kind: str) -> Response:
        fail(kind)
        return Response({})


def failing_page(request: HttpRequest, kind: str) -> HttpResponse:
    fail(kind)
    return HttpResponse()


class FailingMiddleware:
    """Fail after the view, outside any view: what handler500 answers."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.endswith("/late-crash") or request.path_info.endswith("/late-db"):
            if request.path_info.endswith("/late-db"):
                raise OperationalError("server closed the connection unexpectedly")
            raise RuntimeError(f"the password is {SECRET}")
        return response


urlpatterns = [
    path("api/fault/<str:kind>", FailingApi.as_view()),
    path("api/plain-fault/<str:kind>", failing_page),
    path("fault/<str:kind>", failing_page),
    path("", include("config.urls")),
]
__all__ = ["handler400", "handler403", "handler404", "handler500"]

pytestmark = pytest.mark.urls(__name__)


@pytest.fixture
def client_() -> Client:
    """Return a client that shows server errors as responses instead of raising them."""
    return Client(raise_request_exception=False)


def assert_json_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"errors", "request_id"}
    assert body["request_id"] == response["X-Request-ID"]
    (error,) = body["errors"]
    assert error.startswith("$: ")
    assert SECRET not in error and "Traceback" not in error
    return body


# --------------------------------------------------------------------------------------------
# Request ids


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/recipes", 403),  # DRF's own error
        ("/api/schema/", 403),
        ("/api/nowhere", 404),
        ("/login/", 200),
        ("/runs/", 302),  # to the login page
        ("/nowhere/", 404),
        ("/api/fault/crash", 500),
        ("/fault/crash", 500),
    ],
)
def test_every_response_carries_a_request_id(client_: Client, url: str, status: int) -> None:
    response = client_.get(url)

    assert response.status_code == status
    assert len(response["X-Request-ID"]) == 32
    assert response["X-Request-ID"] != client_.get(url)["X-Request-ID"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "incoming", ["0f8fe3c1-2a52-4a40-9d1c-5b7e0a2d9f11", "req_01HZX3", "lb:7f3a.42", "a" * 128]
)
def test_it_keeps_a_well_formed_incoming_request_id(client_: Client, incoming: str) -> None:
    response = client_.get("/api/fault/crash", HTTP_X_REQUEST_ID=incoming)

    assert response["X-Request-ID"] == incoming
    assert response.json()["request_id"] == incoming


@pytest.mark.django_db
@pytest.mark.parametrize(
    "incoming",
    ["", "a" * 129, "two words", "new\nline", "<script>", "-leading-dash", "ünïcode", "a;b=c"],
)
def test_it_replaces_a_malformed_incoming_request_id(client_: Client, incoming: str) -> None:
    response = client_.get("/login/", HTTP_X_REQUEST_ID=incoming)

    assert response["X-Request-ID"] != incoming
    assert len(response["X-Request-ID"]) == 32


@pytest.mark.django_db
async def test_under_asgi_too_every_response_has_an_id_and_the_door_holds() -> None:
    client = AsyncClient(raise_request_exception=False)

    page = await client.get("/login/", headers={"X-Request-ID": "from-the-proxy"})
    refused = await client.get("/api/recipes?q=a%00b")
    form = await client.post("/login/", {"username": "ada\x00", "password": "x"})
    crash = await client.get("/api/fault/crash")

    assert (page.status_code, page["X-Request-ID"]) == (200, "from-the-proxy")
    assert refused.json() == {
        "errors": ["q: contains a NUL character"],
        "request_id": refused["X-Request-ID"],
    }
    assert form.status_code == 400 and b"username: contains a NUL character" in form.content
    assert_json_error(crash, 500)


# --------------------------------------------------------------------------------------------
# 500


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/fault/crash", "/api/plain-fault/crash"])
def test_an_unhandled_exception_under_the_api_is_a_json_500_that_names_the_request(
    client_: Client, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = client_.get(url)

    body = assert_json_error(response, 500)
    rid = body["request_id"]
    assert body["errors"] == [f"$: the server failed; quote request id {rid} when you report it"]
    logged = [r for r in caplog.records if rid in r.getMessage()]
    assert len(logged) == 1, caplog.text
    assert logged[0].exc_info is not None and SECRET in str(logged[0].exc_info[1])
    # Logged once, with its id: not a second time by Django without it.
    assert not [r for r in caplog.records if r.getMessage().startswith("Internal Server Error")]


@pytest.mark.django_db
def test_an_unhandled_exception_on_a_page_is_an_html_500_that_names_the_request(
    client_: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = client_.get("/fault/crash")

    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    rid = response["X-Request-ID"]
    page = response.content.decode()
    assert f"quote request id {rid}" in page
    assert SECRET not in page and "Traceback" not in page
    assert [r for r in caplog.records if rid in r.getMessage()]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "api"), [("/api/late-crash", True), ("/late-crash", False)])
def test_an_exception_outside_a_view_is_answered_like_one_inside(
    client_: Client, settings: Any, url: str, api: bool
) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.FailingMiddleware"]

    response = client_.get(url)

    if api:
        assert_json_error(response, 500)
    else:
        assert response.status_code == 500
        assert SECRET not in response.content.decode()
    assert response["X-Request-ID"]


@pytest.mark.django_db
def test_an_outage_outside_a_view_is_a_503(client_: Client, settings: Any) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.FailingMiddleware"]

    response = client_.get("/api/late-db")

    assert_json_error(response, 503)
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)


@pytest.mark.django_db
def test_an_unknown_api_address_is_a_json_404_and_an_unknown_page_an_html_one(
    client_: Client,
) -> None:
    api = client_.get("/api/no/such/thing")
    page = client_.get("/no/such/page/")

    assert assert_json_error(api, 404)["errors"] == ["$: no such address"]
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_a_disallowed_host_under_the_api_is_a_json_400(client_: Client) -> None:
    response = client_.get("/api/recipes", HTTP_HOST="evil.example.com")

    assert assert_json_error(response, 400)["errors"] == ["$: the request is malformed"]


# --------------------------------------------------------------------------------------------
# 503: the database


@pytest.fixture
def token(transactional_db: None, user: Any) -> str:
    return Token.objects.create(user=user).key


@pytest.mark.parametrize("url", ["/api/runs/", "/api/recipes", "/api/tasks/", "/api/actors/"])
def test_an_unreachable_database_is_a_json_503_with_retry_after(
    token: str, database_down: None, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = api_client(raise_errors=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    response = client.get(url)

    body = assert_json_error(response, 503)
    assert body["errors"] == [
        f"$: the database is unreachable; try again in {RETRY_AFTER_SECONDS} seconds"
    ]
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert [r for r in caplog.records if body["request_id"] in r.getMessage()]


def test_an_unreachable_database_is_a_503_page_with_retry_after(
    user: Any, transactional_db: None, request: pytest.FixtureRequest
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    request.getfixturevalue("database_down")

    response = client.get("/runs/")

    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "the database is unreachable" in response.content.decode()


@pytest.mark.skipif(not POSTGRES, reason="PostgreSQL's own connection errors")
def test_a_connection_the_server_closes_mid_request_is_a_503(client_: Client, token: str) -> None:
    response = client_.get("/api/fault/terminated")
    # What the end of a request does outside the test client, which keeps connections open.
    connection.close()

    assert_json_error(response, 503)
    again = client_.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {token}")
    assert again.status_code == 200  # the next request gets a new connection


@pytest.fixture
def limited_role(transactional_db: None) -> Iterator[str]:
    """Create a role that may not open any connection (what `too many clients` is to it)."""
    name = "branchline_test_no_connections"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {name}")
        cursor.execute(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT 0")
    yield name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE {name}")


@pytest.mark.skipif(not POSTGRES, reason="PostgreSQL's own connection errors")
def test_too_many_connections_is_a_503(
    token: str, limited_role: str, client_: Client, request: pytest.FixtureRequest
) -> None:
    settings_dict = connection.settings_dict
    saved_user, saved_options = settings_dict["USER"], settings_dict["OPTIONS"]
    reconnect()
    # Without the pool: the driver's own error, as a worker process sees it (the pool turns
    # every failure to connect into a PoolTimeout, tested above).
    settings_dict["USER"] = limited_role
    settings_dict["OPTIONS"] = {k: v for k, v in saved_options.items() if k != "pool"}
    try:
        client = api_client(raise_errors=False)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        response = client.get("/api/runs/")
    finally:
        connection.close()
        settings_dict["USER"], settings_dict["OPTIONS"] = saved_user, saved_options
        reconnect()

    assert_json_error(response, 503)


# --------------------------------------------------------------------------------------------
# 503: the broker


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["kombu", "redis-refused", "redis-frozen"])
@pytest.mark.parametrize("prefix", ["/api/fault", "/fault"])
def test_an_unreachable_broker_is_a_503_with_retry_after(
    client_: Client, kind: str, prefix: str
) -> None:
    response = client_.get(f"{prefix}/{kind}")

    if prefix.startswith("/api/"):
        body = assert_json_error(response, 503)
        assert body["errors"] == [
            f"$: the message broker is unreachable; try again in {RETRY_AFTER_SECONDS} seconds"
        ]
    else:
        assert response.status_code == 503
        assert "the message broker is unreachable" in response.content.decode()
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
