"""Register (or update) an MCP tool server, and optionally discover its tools.

    manage.py register_tool_server demo --stdio demo --discover
    manage.py register_tool_server search --url https://tools.example.com/mcp \
        --header Authorization=SEARCH_TOKEN --timeout 20 --discover

A header is given as NAME=ENV_VAR: the value is read from that env var at each call.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools import client, selectors, services


class Command(BaseCommand):
    help = "Register or update an MCP tool server (http or stdio) and discover its tools."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the server's name (recipes name tools NAME.TOOL)")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--url", help="a streamable HTTP endpoint")
        where.add_argument("--stdio", metavar="COMMAND", help="a name in MCP_STDIO_COMMANDS")
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="NAME=ENV_VAR",
            help="send header NAME with the value of env var ENV_VAR (repeatable)",
        )
        parser.add_argument("--timeout", type=int, help="seconds per call")
        parser.add_argument("--description", help="what the server is for")
        parser.add_argument("--discover", action="store_true", help="list its tools now")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        fields: dict[str, Any] = {
            "transport": "http" if options["url"] else "stdio",
            "url": options["url"] or "",
            "command": options["stdio"] or "",
            "header_envs": self._headers(options["header"]),
        }
        if options["timeout"] is not None:
            fields["timeout_s"] = options["timeout"]
        if options["description"] is not None:
            fields["description"] = options["description"]
        server = selectors.tool_server(name)
        try:
            if server is None:
                server = services.tool_server_create(name=name, **fields)
                self.stdout.write(f"Tool server {name} registered.")
            else:
                services.tool_server_update(server, **fields)
                self.stdout.write(f"Tool server {name} updated.")
        except services.ToolServerInvalid as exc:
            raise CommandError("; ".join(exc.errors)) from None
        except services.ToolServerConflict as exc:
            raise CommandError(str(exc)) from None
        if options["discover"]:
            try:
                tools = client.discover(server)
            except client.ToolError as exc:
                # Registered all the same: discovery can be tried again once the server is up.
                self.stderr.write(self.style.WARNING(f"Discovery failed: {exc}"))
                return
            names = ", ".join(f"{name}.{tool.name}" for tool in tools) or "none"
            self.stdout.write(f"Tools ({len(tools)}): {names}")

    def _headers(self, pairs: list[str]) -> dict[str, str]:
        headers: dict[str, str] = {}
        for pair in pairs:
            header, equals, variable = pair.partition("=")
            if not equals:
                raise CommandError(f"--header {pair!r}: write NAME=ENV_VAR")
            headers[header.strip()] = variable.strip()
        return headers
