"""The MCP client against real SDK servers: the test server over streamable HTTP, the demo
server over stdio, and endpoints that are not MCP servers at all."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from tests.live_server import free_port
from tests.resolver import fake_resolver
from tests.runner.providers.stub_server import StubServer
from tests.tools.conftest import SECRET, SECRET_ENV
from tests.tools.mcp_server import BIG_RESULT_CHARS, TEST_HOST_NAME, McpTestServer
from tools import client
from tools.client import ToolError
from tools.models import ToolServer


def test_it_discovers_the_tools_of_an_http_server_and_stores_them(
    http_server: ToolServer,
) -> None:
    specs = client.discover(http_server)

    assert {spec.name for spec in specs} == {"echo", "shout", "verbatim", "fail", "slow", "big"}
    echo = next(spec for spec in specs if spec.name == "echo")
    assert echo.description == "Repeat a text."
    assert echo.input_schema["required"] == ["text"]
    http_server.refresh_from_db()
    assert [tool["name"] for tool in http_server.tools] == [spec.name for spec in specs]
    assert http_server.discovered_at is not None
    assert http_server.discovery_error == ""


def test_it_calls_a_tool_over_http_and_reads_its_json(http_server: ToolServer) -> None:
    result = client.call(http_server, "echo", {"text": "ab", "times": 2})

    assert result.data == {"text": "abab", "times": 2}
    assert '"abab"' in result.text
    assert not result.is_error
    assert not result.truncated
    assert result.latency_ms >= 0


def test_a_plain_text_answer_has_no_data(http_server: ToolServer) -> None:
    result = client.call(http_server, "shout", {"text": "hello there"})

    assert result.text == "HELLO THERE"
    assert result.data is None


def test_a_tool_that_fails_answers_with_its_error(http_server: ToolServer) -> None:
    result = client.call(http_server, "fail", {"reason": "the disk is full"})

    assert result.is_error
    assert "the disk is full" in result.text


def test_an_unknown_tool_is_the_servers_error_answer(http_server: ToolServer) -> None:
    result = client.call(http_server, "nope", {})

    assert result.is_error
    assert "nope" in result.text


def test_a_slow_tool_times_out_without_holding_the_caller(http_server: ToolServer) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"tool server 'remote' timed out after 1 s"):
        client.call(http_server, "slow", {"seconds": 5}, timeout_s=1)
    assert time.monotonic() - started < 4


def test_a_ten_megabyte_result_is_capped_and_flagged(
    http_server: ToolServer, settings: Any
) -> None:
    settings.TOOL_RESULT_MAX_CHARS = 1000

    result = client.call(http_server, "big", {})

    assert result.truncated
    assert result.text == "x" * 1000
    assert result.data is None
    assert BIG_RESULT_CHARS > 1000


def test_header_values_come_from_the_env_and_reach_the_server(
    http_server: ToolServer, mcp_server: McpTestServer
) -> None:
    mcp_server.headers.clear()

    client.call(http_server, "shout", {"text": "hi"})

    assert mcp_server.headers
    assert all(h.get("authorization") == f"Bearer {SECRET}" for h in mcp_server.headers)
    http_server.refresh_from_db()
    assert SECRET not in repr(http_server.__dict__)


def test_a_header_whose_env_var_is_unset_is_refused_naming_the_var(
    http_server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_ENV)

    with pytest.raises(ToolError, match=f"header Authorization: env var {SECRET_ENV} is not set"):
        client.call(http_server, "shout", {"text": "hi"})


def test_a_header_value_with_a_control_character_is_refused_without_showing_it(
    http_server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "Bearer s3cret\r\n")

    with pytest.raises(ToolError) as raised:
        client.call(http_server, "shout", {"text": "hi"})
    assert str(raised.value) == (
        f"header Authorization: env var {SECRET_ENV} holds a control character"
    )


def test_a_recipe_cannot_give_a_call_more_time_than_the_server_has(
    http_server: ToolServer,
) -> None:
    http_server.timeout_s = 1
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 1"):
        client.call(http_server, "slow", {"seconds": 5}, timeout_s=600)
    assert time.monotonic() - started < 4


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/v1/models", "Not Found"),  # nothing answers POST there
        ("/v1/chat/completions", ""),  # JSON, but not JSON-RPC
    ],
)
def test_an_endpoint_that_is_not_an_mcp_server_is_a_clear_error(
    db: None, stub_server: StubServer, allow_loopback: None, path: str, why: str
) -> None:
    server = ToolServer.objects.create(
        name="garbage", transport="http", url=f"{stub_server.url}{path}", timeout_s=5
    )

    with pytest.raises(ToolError, match="tool server 'garbage' did not answer as an MCP server"):
        client.discover(server)

    server.refresh_from_db()
    assert "did not answer as an MCP server" in server.discovery_error
    assert why in server.discovery_error
    assert server.tools == []


def test_a_server_that_is_down_is_a_clear_error(db: None, allow_loopback: None) -> None:
    server = ToolServer.objects.create(
        name="down", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp", timeout_s=5
    )

    with pytest.raises(ToolError, match="'down' is not reachable"):
        client.call(server, "echo", {"text": "x"})


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/mcp", "link-local"),
        ("http://10.0.0.7:8000/mcp", "private address"),
        ("http://127.0.0.1:9/mcp", "loopback"),
        ("ftp://example.com/mcp", "scheme must be http or https"),
    ],
)
def test_it_refuses_urls_the_ssrf_guard_refuses(db: None, url: str, reason: str) -> None:
    server = ToolServer(name="inside", transport="http", url=url, timeout_s=5)

    with pytest.raises(ToolError, match=reason):
        client.call(server, "echo", {})


def test_a_disabled_server_is_not_called(http_server: ToolServer) -> None:
    http_server.enabled = False

    with pytest.raises(ToolError, match="disabled"):
        client.call(http_server, "echo", {"text": "x"})


def test_it_discovers_and_calls_the_demo_server_over_stdio(demo_server: ToolServer) -> None:
    names = [spec.name for spec in client.discover(demo_server)]
    assert names == ["add", "multiply", "word_count", "lookup_recipe"]

    assert client.call(demo_server, "add", {"a": 2, "b": 3.5}).data == 5.5
    assert client.call(demo_server, "multiply", {"a": 4, "b": 2.5}).data == 10
    counted = client.call(demo_server, "word_count", {"text": "one two\nthree"})
    assert counted.data == {"words": 3, "characters": 13, "lines": 2}
    found = client.call(demo_server, "lookup_recipe", {"query": "citations"})
    assert found.data["count"] == 1
    assert found.data["recipes"][0]["slug"] == "answer-with-citations"


def test_a_stdio_command_not_in_the_settings_is_refused(db: None) -> None:
    server = ToolServer(name="shell", transport="stdio", command="bash", timeout_s=5)

    with pytest.raises(ToolError, match="command 'bash' is not in MCP_STDIO_COMMANDS"):
        client.call(server, "anything", {})


def test_a_stdio_server_that_exits_at_once_is_a_clear_error(db: None, settings: Any) -> None:
    settings.MCP_STDIO_COMMANDS = {
        "broken": [sys.executable, "-c", "import sys; sys.exit('no tools here')"]
    }
    server = ToolServer(name="broken", transport="stdio", command="broken", timeout_s=10)

    started = time.monotonic()
    with pytest.raises(ToolError, match="tool server 'broken'"):
        client.call(server, "anything", {})
    assert time.monotonic() - started < 10


# -- where it connects, and how much it reads ---------------------------------------------


def test_it_refuses_a_host_that_rebinds_to_a_private_address_after_the_check(
    db: None, mcp_server: McpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Public when the URL is checked, loopback when the client connects.
    fake_resolver(monkeypatch, {TEST_HOST_NAME: [["8.8.8.8"], ["127.0.0.1"]]})
    server = ToolServer.objects.create(
        name="rebind",
        transport="http",
        url=f"http://{TEST_HOST_NAME}:{mcp_server.port}/mcp",
        timeout_s=5,
    )
    mcp_server.headers.clear()

    with pytest.raises(ToolError) as caught:
        client.call(server, "echo", {"text": "x"})

    assert f"{TEST_HOST_NAME} now resolves to 127.0.0.1, a loopback address" in str(caught.value)
    assert mcp_server.headers == []


def test_it_connects_to_the_address_it_checked_keeping_the_host_name(
    db: None, mcp_server: McpTestServer, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.0/8"]
    asked = fake_resolver(monkeypatch, {TEST_HOST_NAME: [["127.0.0.1"]]})
    server = ToolServer.objects.create(
        name="named",
        transport="http",
        url=f"http://{TEST_HOST_NAME}:{mcp_server.port}/mcp",
        timeout_s=5,
    )
    mcp_server.headers.clear()

    assert client.call(server, "shout", {"text": "hi"}).text == "HI"

    # Every request looked the name up itself (the check, then each connect): the HTTP
    # client never resolved it behind the check's back.
    assert len(asked) >= 2
    assert {h["host"] for h in mcp_server.headers} == {f"{TEST_HOST_NAME}:{mcp_server.port}"}


def test_a_json_answer_larger_than_the_ceiling_is_cut_with_a_clear_error(
    db: None, allow_loopback: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 1024 * 1024)
    with McpTestServer(json_response=True) as json_server:
        server = ToolServer.objects.create(
            name="flood", transport="http", url=json_server.url, timeout_s=10
        )
        assert client.call(server, "shout", {"text": "hi"}).text == "HI"

        started = time.monotonic()
        with pytest.raises(ToolError, match=r"'flood': its answer is larger than 1 MB"):
            client.call(server, "big", {})
        assert time.monotonic() - started < 5


def test_a_discovery_keeps_a_bounded_list_and_says_what_it_left_out(
    http_server: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_DISCOVERED_TOOLS", 2)

    specs = client.discover(http_server)

    http_server.refresh_from_db()
    assert len(specs) == len(http_server.tools) == 2
    assert "lists more than 2 tools; the first 2 are kept" in http_server.discovery_error


def test_a_tool_with_a_huge_schema_is_left_out_and_long_descriptions_are_cut() -> None:
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    listed = [
        client.ToolSpec("fine", "d" * 10_000, {"type": "object"}),
        client.ToolSpec("huge", "", huge),
    ]

    kept, notes = client._kept(listed)

    assert [spec.name for spec in kept] == ["fine"]
    assert len(kept[0].description) == client.MAX_DESCRIPTION_CHARS + 1
    assert notes == ["left out 1 tool(s) whose input schema is larger than 64 KB: huge"]
