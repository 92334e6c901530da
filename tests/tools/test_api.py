"""The tools API: tool servers for staff only, the tools list for anyone signed in; header
values never shown, in the API or the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.tools.conftest import SECRET, SECRET_ENV
from tools.models import ToolServer

SERVERS = "/api/tool-servers/"


def test_only_staff_see_and_change_tool_servers(
    api: APIClient, anon_api: APIClient, demo_server: ToolServer
) -> None:
    for client in (api, anon_api):
        assert client.get(SERVERS).status_code == 403
        assert client.get(f"{SERVERS}demo").status_code == 403
        assert (
            client.post(
                SERVERS, {"name": "x", "transport": "stdio", "command": "demo"}, format="json"
            ).status_code
            == 403
        )
        assert client.patch(f"{SERVERS}demo", {"enabled": False}, format="json").status_code == 403
        assert client.delete(f"{SERVERS}demo").status_code == 403
        assert client.post(f"{SERVERS}demo/discover").status_code == 403
    assert ToolServer.objects.get().enabled


def test_staff_register_discover_change_and_delete_a_server(staff_api: APIClient) -> None:
    created = staff_api.post(
        SERVERS,
        {"name": "demo", "transport": "stdio", "command": "demo", "timeout_s": 30},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["tools"] == []

    discovered = staff_api.post(f"{SERVERS}demo/discover")
    assert discovered.status_code == 200, discovered.json()
    assert [t["name"] for t in discovered.json()["tools"]] == [
        "add",
        "multiply",
        "word_count",
        "lookup_recipe",
    ]
    assert discovered.json()["discovered_at"]

    changed = staff_api.patch(f"{SERVERS}demo", {"description": "Calculator"}, format="json")
    assert changed.status_code == 200
    assert changed.json()["description"] == "Calculator"
    assert len(changed.json()["tools"]) == 4  # same endpoint: the tools are kept

    assert staff_api.delete(f"{SERVERS}demo").status_code == 204
    assert not ToolServer.objects.exists()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"name": "x", "transport": "stdio", "command": "bash"}, "command: 'bash' is not in"),
        ({"name": "x", "transport": "http"}, "url: required for an HTTP server"),
        (
            {"name": "x", "transport": "http", "url": "http://169.254.169.254/mcp"},
            "url: refused: 169.254.169.254, a link-local address",
        ),
        (
            {
                "name": "x",
                "transport": "http",
                "url": "https://example.com/mcp",
                "header_envs": {"Authorization": "Bearer abc.def"},
            },
            "header_envs.Authorization: the value names an env var",
        ),
        (
            {
                "name": "x",
                "transport": "http",
                "url": "https://example.com/mcp",
                "header_envs": {"Host": "TOKEN"},
            },
            "header_envs.Host: set by the client itself",
        ),
        (
            {"name": "x", "transport": "stdio", "command": "demo", "header_envs": {"A": "B"}},
            "header_envs: only for an HTTP server",
        ),
        ({"name": "a.b", "transport": "stdio", "command": "demo"}, "name: Use lowercase"),
        ({"name": "x", "transport": "ftp"}, "transport:"),
        ({"name": "x", "transport": "stdio", "command": "demo", "timeout_s": 0}, "timeout_s:"),
    ],
)
def test_it_refuses_settings_that_cannot_work(
    staff_api: APIClient, body: dict[str, Any], error: str, settings: Any
) -> None:
    staff_api.raise_request_exception = False
    answer = staff_api.post(SERVERS, body, format="json")

    assert answer.status_code == 400, answer.json()
    assert any(error in message for message in answer.json()["errors"]), answer.json()
    assert not ToolServer.objects.exists()


def test_a_second_server_with_the_same_name_conflicts(
    staff_api: APIClient, demo_server: ToolServer
) -> None:
    answer = staff_api.post(
        SERVERS, {"name": "demo", "transport": "stdio", "command": "demo"}, format="json"
    )

    assert answer.status_code == 409


def test_a_new_endpoint_clears_the_discovered_tools(
    staff_api: APIClient, demo_server: ToolServer, allow_loopback: None
) -> None:
    demo_server.tools = [{"name": "add", "description": "", "input_schema": {}}]
    demo_server.save()

    answer = staff_api.patch(
        f"{SERVERS}demo",
        {"transport": "http", "url": "http://127.0.0.1:8765/mcp", "command": ""},
        format="json",
    )

    assert answer.status_code == 200, answer.json()
    assert answer.json()["tools"] == []


def test_a_failed_discovery_is_a_502_saying_why(
    staff_api: APIClient, db: None, allow_loopback: None
) -> None:
    from tests.live_server import free_port

    ToolServer.objects.create(
        name="down", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp", timeout_s=3
    )

    answer = staff_api.post(f"{SERVERS}down/discover")

    assert answer.status_code == 502
    assert "is not reachable" in answer.json()["errors"][0]
    assert "is not reachable" in staff_api.get(f"{SERVERS}down").json()["discovery_error"]


def test_an_unknown_server_is_a_404(staff_api: APIClient) -> None:
    assert staff_api.get(f"{SERVERS}nope").status_code == 404
    assert staff_api.post(f"{SERVERS}nope/discover").status_code == 404


def test_anyone_signed_in_lists_the_tools_and_no_one_else(
    api: APIClient, anon_api: APIClient, demo_server: ToolServer
) -> None:
    demo_server.tools = [{"name": "add", "description": "Add.", "input_schema": {"type": "object"}}]
    demo_server.save()
    ToolServer.objects.create(
        name="off",
        transport="stdio",
        command="demo",
        enabled=False,
        tools=[{"name": "x", "description": "", "input_schema": {}}],
    )

    assert anon_api.get("/api/tools/").status_code == 403
    answer = api.get("/api/tools/")
    assert answer.status_code == 200
    assert answer.json() == [
        {
            "name": "demo.add",
            "description": "Add.",
            "input_schema": {"type": "object"},
            "server": "demo",
        }
    ]


def test_header_values_never_appear_in_the_api_or_the_admin(
    staff_api: APIClient, admin_client: Client, http_server: ToolServer
) -> None:
    staff_api.post(f"{SERVERS}remote/discover")

    for answer in (
        staff_api.get(SERVERS),
        staff_api.get(f"{SERVERS}remote"),
        admin_client.get("/admin/tools/toolserver/"),
        admin_client.get(f"/admin/tools/toolserver/{http_server.pk}/change/"),
    ):
        assert answer.status_code == 200
        assert SECRET not in answer.content.decode()
    assert SECRET_ENV in staff_api.get(f"{SERVERS}remote").content.decode()
    http_server.refresh_from_db()
    assert http_server.tools  # discovery did run with the header
    assert SECRET not in str(http_server.header_envs)


def test_the_admin_refuses_a_command_not_configured(admin_client: Client, db: None) -> None:
    answer = admin_client.post(
        "/admin/tools/toolserver/add/",
        {
            "name": "shell",
            "transport": "stdio",
            "command": "bash",
            "header_envs": "{}",
            "timeout_s": "10",
            "enabled": "on",
        },
    )

    assert answer.status_code == 200
    assert "is not in MCP_STDIO_COMMANDS" in answer.content.decode()
    assert not ToolServer.objects.exists()


def test_the_admin_discovers_tools(admin_client: Client, demo_server: ToolServer) -> None:
    answer = admin_client.post(
        "/admin/tools/toolserver/",
        {"action": "discover_tools", "_selected_action": [demo_server.pk]},
        follow=True,
    )

    assert [str(m) for m in answer.context["messages"]] == ["demo: 4 tool(s) found."]
    demo_server.refresh_from_db()
    assert len(demo_server.tools) == 4
