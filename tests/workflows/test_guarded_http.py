"""The guarded transport under the model clients: bodies a call leaves open, and the httpx2
client that rides on the same transport."""

from __future__ import annotations

import time
from typing import Any

import httpx
import httpx2
import pytest

from tests.runner.providers.stub_server import StubServer, hang_up, reply, stub_server
from workflows.actor_urls import Allowlist, URLRefused
from workflows.guarded_http import call_deadline, guarded_client, guarded_httpx2_client

__all__ = ["stub_server"]

MAX_BODY_BYTES = 1_000_000
QUESTION = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def taken_connections(client: httpx.Client) -> list[Any]:
    """Return the connections of the client's pools still serving a request."""
    transport: Any = client._transport
    return [
        connection
        for pool in transport._pools.values()
        for connection in pool._pool.connections
        if not connection.is_idle() and not connection.is_closed()
    ]


def test_a_body_left_open_when_its_call_ends_is_closed_and_its_connection_freed(
    stub_server: StubServer,
) -> None:
    stub_server.keep_alive = True
    stub_server.enqueue(reply("x" * 50_000))
    client = guarded_client(Allowlist.parse([stub_server.address]), max_body_bytes=MAX_BODY_BYTES)

    with call_deadline(time.monotonic() + 5):
        request = client.build_request("POST", f"{stub_server.base_url}/chat/completions")
        response = client.send(request, stream=True)  # neither read nor closed, as an SDK may
        assert taken_connections(client)

    assert taken_connections(client) == []
    assert response.status_code == 200


def test_an_httpx2_client_shares_the_guard_and_its_connections(stub_server: StubServer) -> None:
    stub_server.keep_alive = True
    allowlist = Allowlist.parse([stub_server.address])
    url = f"{stub_server.base_url}/chat/completions"

    with call_deadline(time.monotonic() + 5):
        first = guarded_client(allowlist, max_body_bytes=MAX_BODY_BYTES).post(url, json=QUESTION)
        second = guarded_httpx2_client(allowlist, max_body_bytes=MAX_BODY_BYTES).post(
            url, json=QUESTION
        )

    assert isinstance(second, httpx2.Response)
    assert first.json() == second.json()
    assert second.json()["choices"][0]["message"]["content"] == "stub answer"
    # One connection for both: the httpx2 client's requests ride on the same pools.
    assert len({sent.client_port for sent in stub_server.chat_requests}) == 1


def test_an_httpx2_client_connects_only_where_the_guard_allows(stub_server: StubServer) -> None:
    client = guarded_httpx2_client(Allowlist.parse([]), max_body_bytes=MAX_BODY_BYTES)

    with call_deadline(time.monotonic() + 5), pytest.raises(URLRefused, match="loopback"):
        client.post(f"{stub_server.base_url}/chat/completions", json=QUESTION)
    assert stub_server.requests == []


def test_an_httpx2_client_sees_httpx2s_errors_with_the_original_as_their_cause(
    stub_server: StubServer,
) -> None:
    stub_server.enqueue(hang_up())
    client = guarded_httpx2_client(
        Allowlist.parse([stub_server.address]), max_body_bytes=MAX_BODY_BYTES
    )

    with call_deadline(time.monotonic() + 5), pytest.raises(httpx2.RemoteProtocolError) as caught:
        client.post(f"{stub_server.base_url}/chat/completions", json=QUESTION)

    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError)
