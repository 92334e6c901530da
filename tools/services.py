"""Write tool servers: one check of their settings for the API, the admin and seed_demo."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from workflows.actor_urls import URLRefused, check_base_url, settings_allowlist

from .client import stdio_commands
from .models import MAX_TIMEOUT_S, ToolServer

# An HTTP header name (RFC 9110 token) and a POSIX environment variable name.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Headers the transport sets itself: a server must not be able to override them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
    }
)
FIELDS = (
    "name",
    "description",
    "transport",
    "url",
    "header_envs",
    "command",
    "timeout_s",
    "enabled",
)


class ToolServerInvalid(ValueError):
    """List every problem with a tool server's settings as `field: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class ToolServerConflict(Exception):
    """Say that another server has the name."""


def settings_errors(
    *,
    transport: str,
    url: str,
    command: str,
    header_envs: Any,
    timeout_s: Any,
) -> list[str]:
    """Return every problem with these settings, as `field: message`."""
    problems: list[str] = []
    if transport == ToolServer.Transport.HTTP:
        if not url:
            problems.append("url: required for an HTTP server")
        else:
            try:
                check_base_url(url, allowlist=settings_allowlist())
            except URLRefused as exc:
                problems.append(f"url: {exc.reason}")
        if command:
            problems.append("command: only for a stdio server")
    elif transport == ToolServer.Transport.STDIO:
        if url:
            problems.append("url: only for an HTTP server")
        if command not in stdio_commands():
            known = ", ".join(sorted(stdio_commands())) or "none"
            problems.append(
                f"command: '{command}' is not in MCP_STDIO_COMMANDS (configured: {known})"
            )
        if header_envs:
            problems.append("header_envs: only for an HTTP server")
    else:
        problems.append(f"transport: must be http or stdio, not {transport!r}")
    problems += _header_env_errors(header_envs)
    if not isinstance(timeout_s, int) or isinstance(timeout_s, bool):
        problems.append("timeout_s: must be a whole number of seconds")
    elif not 1 <= timeout_s <= MAX_TIMEOUT_S:
        problems.append(f"timeout_s: must be between 1 and {MAX_TIMEOUT_S}")
    return problems


def _header_env_errors(header_envs: Any) -> list[str]:
    if not isinstance(header_envs, Mapping):
        return ["header_envs: must be an object {header name: ENV_VAR_NAME}"]
    problems: list[str] = []
    for header, variable in header_envs.items():
        if not isinstance(header, str) or not HEADER_NAME.fullmatch(header):
            problems.append(f"header_envs: {str(header)[:100]!r} is not a header name")
        elif header.lower() in RESERVED_HEADERS:
            problems.append(f"header_envs.{header}: set by the client itself")
        if not isinstance(variable, str) or not ENV_NAME.fullmatch(variable):
            problems.append(
                f"header_envs.{str(header)[:100]}: the value names an env var"
                " (letters, digits, _), never the secret itself"
            )
    return problems


def _check(fields: Mapping[str, Any]) -> None:
    problems = settings_errors(
        transport=fields.get("transport", ""),
        url=fields.get("url", ""),
        command=fields.get("command", ""),
        header_envs=fields.get("header_envs", {}),
        timeout_s=fields.get("timeout_s"),
    )
    if problems:
        raise ToolServerInvalid(problems)


def tool_server_create(**fields: Any) -> ToolServer:
    """Create a tool server after checking its settings (its tools: discover them next)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown fields: {sorted(unknown)}")
    server = ToolServer(**fields)
    _check({field: getattr(server, field) for field in FIELDS})
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError:
        raise ToolServerConflict(f"name: a tool server '{server.name}' exists already") from None
    return server


def tool_server_update(server: ToolServer, **changes: Any) -> ToolServer:
    """Change a server's settings (all checked together); a new endpoint clears its tools."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown fields: {sorted(unknown)}")
    merged = {field: changes.get(field, getattr(server, field)) for field in FIELDS}
    _check(merged)
    if merged["name"] != server.name and ToolServer.objects.filter(name=merged["name"]).exists():
        raise ToolServerConflict(f"name: a tool server '{merged['name']}' exists already")
    moved = any(merged[f] != getattr(server, f) for f in ("transport", "url", "command"))
    for field, value in merged.items():
        setattr(server, field, value)
    if moved:
        # The cached tools were another endpoint's.
        server.tools = []
        server.discovered_at = None
        server.discovery_error = ""
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError:
        raise ToolServerConflict(f"name: a tool server '{server.name}' exists already") from None
    return server


def tool_server_delete(server: ToolServer) -> None:
    """Delete a server (recipes that name its tools fail at run time, saying so)."""
    server.delete()
