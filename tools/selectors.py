"""Read tool servers and the tools they listed (the cache of their last discovery)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from .client import ToolSpec
from .models import ToolServer


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as recipes name it (`SERVER.TOOL`), with what the editor shows of it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    server: str

    def as_json(self) -> dict[str, Any]:
        """Return the tool as GET /api/tools/ lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "server": self.server,
        }


def tool_servers_listed() -> QuerySet[ToolServer]:
    """Return every tool server, by name."""
    return ToolServer.objects.order_by("name")


def tool_server(name: str) -> ToolServer | None:
    """Return the server named `name`, or None."""
    return ToolServer.objects.filter(name=name).first()


def discovered_tools() -> list[DiscoveredTool]:
    """Return the tools of the enabled servers, as last discovered, by name."""
    found: list[DiscoveredTool] = []
    for server in ToolServer.objects.filter(enabled=True).order_by("name"):
        for entry in server.tools if isinstance(server.tools, list) else []:
            if not isinstance(entry, dict) or not entry.get("name"):
                continue
            spec = ToolSpec.from_json(entry)
            found.append(
                DiscoveredTool(
                    name=f"{server.name}.{spec.name}",
                    description=spec.description,
                    input_schema=spec.input_schema,
                    server=server.name,
                )
            )
    return sorted(found, key=lambda tool: tool.name)
