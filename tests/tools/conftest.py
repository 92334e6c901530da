"""Tools fixtures: a real MCP server over HTTP, and servers registered for it and for the
demo server over stdio."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.runner.providers.stub_server import stub_server  # noqa: F401 (fixture)
from tests.tools.mcp_server import McpTestServer
from tools.models import ToolServer

SECRET = "s3cr3t-token-value"
SECRET_ENV = "TOOLS_TEST_TOKEN"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpTestServer]:
    with McpTestServer() as server:
        yield server


@pytest.fixture
def allow_loopback(settings: Any) -> None:
    """Put 127.0.0.1 on the SSRF allowlist, as the provider tests do for their stub."""
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1"]


@pytest.fixture
def http_server(
    db: None, mcp_server: McpTestServer, allow_loopback: None, monkeypatch: pytest.MonkeyPatch
) -> ToolServer:
    """Return the test server registered as `remote`, sending a bearer token from the env."""
    monkeypatch.setenv(SECRET_ENV, f"Bearer {SECRET}")
    return ToolServer.objects.create(
        name="remote",
        transport=ToolServer.Transport.HTTP,
        url=mcp_server.url,
        header_envs={"Authorization": SECRET_ENV},
        timeout_s=10,
    )


@pytest.fixture
def demo_server(db: None) -> ToolServer:
    """Return the demo server registered over stdio as `demo`."""
    return ToolServer.objects.create(
        name="demo", transport=ToolServer.Transport.STDIO, command="demo", timeout_s=30
    )
