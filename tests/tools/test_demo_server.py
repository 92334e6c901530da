"""The demo MCP server: its tools, and its streamable HTTP mode (`--http PORT`) in a process
of its own; seed_demo registers it over stdio with its tools."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command

from tests.live_server import ROOT, free_port
from tools import client, demo_server
from tools.models import ToolServer


def test_its_tools_answer_without_django() -> None:
    assert demo_server.add(2, 3) == 5
    assert demo_server.multiply(3, 4) == 12
    assert demo_server.word_count("") == {"words": 0, "characters": 0, "lines": 0}
    everything = demo_server.lookup_recipe()
    assert everything["count"] == len(list(demo_server.RECIPES_DIR.glob("*.json")))
    assert demo_server.lookup_recipe("PRIMES")["recipes"][0]["slug"] == "first-1000-primes"
    assert demo_server.lookup_recipe("no such thing") == {"count": 0, "recipes": []}


@pytest.fixture
def demo_over_http() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.demo_server", "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, "the demo server stopped at start"
            assert time.monotonic() < deadline, "the demo server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_it_serves_streamable_http_with_dash_dash_http(
    db: None, demo_over_http: str, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1"]
    server = ToolServer.objects.create(
        name="demo-http", transport="http", url=demo_over_http, timeout_s=10
    )

    assert len(client.discover(server)) == 4
    assert client.call(server, "add", {"a": 1, "b": 2}).data == 3


def test_register_tool_server_registers_and_discovers(db: None, capsys: Any) -> None:
    call_command("register_tool_server", "demo", stdio="demo", discover=True)
    call_command("register_tool_server", "demo", stdio="demo", timeout=20)  # again: updated

    server = ToolServer.objects.get()
    assert server.timeout_s == 20
    assert [tool["name"] for tool in server.tools] == [
        "add",
        "multiply",
        "word_count",
        "lookup_recipe",
    ]
    out = capsys.readouterr().out
    assert "Tools (4): demo.add, demo.multiply, demo.word_count, demo.lookup_recipe" in out
