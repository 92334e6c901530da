"""A real MCP server (the SDK's MCPServer over streamable HTTP, served by uvicorn in a thread)
for the tools tests: tools that answer, fail, stall and flood, and a record of the headers of
every request it received.

    with McpTestServer() as server:
        ToolServer(transport="http", url=server.url, ...)
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from tests.live_server import free_port

BIG_RESULT_CHARS = 10 * 1024 * 1024


def build_server() -> MCPServer:
    server = MCPServer("tools-test", log_level="ERROR")

    @server.tool()
    def echo(text: str, times: int = 1) -> dict[str, Any]:
        """Repeat a text."""
        return {"text": text * times, "times": times}

    @server.tool()
    def shout(text: str) -> str:
        """Answer in capitals (plain text)."""
        return text.upper()

    @server.tool()
    def verbatim(text: str) -> str:
        """Answer the text as given: a server's own JSON, `NaN` and all."""
        return text

    @server.tool()
    def fail(reason: str = "it broke") -> str:
        """Always fail."""
        raise ToolError(reason)

    @server.tool()
    async def slow(seconds: float = 5.0) -> str:
        """Answer after a while."""
        await anyio.sleep(seconds)
        return "finally"

    @server.tool()
    def big() -> str:
        """Answer with 10 MB of text."""
        return "x" * BIG_RESULT_CHARS

    return server


class _RecordHeaders:
    """ASGI middleware: remember the headers of every HTTP request."""

    def __init__(self, app: Any, seen: list[dict[str, str]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append(
                {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            )
        await self.app(scope, receive, send)


# A name the tests resolve to 127.0.0.1 themselves; the server accepts it as a Host.
TEST_HOST_NAME = "tools.example"


class McpTestServer:
    """The test MCP server on a free loopback port; `url` is its endpoint (path /mcp).

    With `json_response`, it answers each request with one JSON body instead of an SSE
    stream (both are streamable HTTP).
    """

    def __init__(self, *, json_response: bool = False) -> None:
        self.port = free_port()
        self.headers: list[dict[str, str]] = []
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", f"{TEST_HOST_NAME}:*"],
        )
        app = build_server().streamable_http_app(
            host="127.0.0.1", json_response=json_response, transport_security=security
        )
        config = uvicorn.Config(
            _RecordHeaders(app, self.headers),
            host="127.0.0.1",
            port=self.port,
            log_level="error",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/mcp"

    def __enter__(self) -> McpTestServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the test MCP server did not start"
            assert self._thread.is_alive(), "the test MCP server stopped at start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
