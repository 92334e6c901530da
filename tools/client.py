"""Talk to MCP servers with the official SDK: list their tools, call one.

The SDK is async; the runner and the pages are not. `discover` and `call` open one session
per use (streamable HTTP, or a stdio subprocess started from settings.MCP_STDIO_COMMANDS),
inside `anyio.run` with a hard deadline, so a slow or silent server costs at most its
timeout and never holds a worker. Every failure becomes a `ToolError` whose message says
what went wrong without echoing a header value.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import IO, Any, TypeVar

import anyio
import httpx2
from django.conf import settings
from django.utils import timezone
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import ValidationError

from workflows.actor_urls import Allowlist, URLRefused, check_base_url, settings_allowlist
from workflows.connections import release
from workflows.engine import strict_json

from .models import ToolServer
from .transport import PinnedTransport, ResponseTooLarge, too_large_message

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The largest answer read from an HTTP server (a JSON body, or one SSE event); results are
# capped far lower (TOOL_RESULT_MAX_CHARS) once read, but the transport must not buffer
# without end.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
# Pages of tools/list followed at most, so a server that never stops paginating cannot loop.
MAX_TOOL_PAGES = 20
# What one discovery keeps: each tool is stored on the server and shown in the editor, and a
# step's tools are described to the model in every request.
MAX_DISCOVERED_TOOLS = 200
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION_CHARS = 4000
# A discovery runs while staff wait for the page: it gets at most this long.
MAX_DISCOVERY_SECONDS = 20
# The most of a stdio server's stderr quoted in an error.
STDERR_TAIL_CHARS = 500
DEFAULT_RESULT_MAX_CHARS = 100_000


class ToolError(Exception):
    """Say why a tool server could not be used (down, timed out, garbage, refused, unknown)."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a server lists it: what recipes name, what the editor shows, what
    arguments are checked against."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        """Return the spec as stored in ToolServer.tools."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Read a spec back from ToolServer.tools."""
        schema = data.get("input_schema")
        return cls(
            name=str(data.get("name", "")),
            description=str(data.get("description") or ""),
            input_schema=dict(schema) if isinstance(schema, Mapping) else {"type": "object"},
        )


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer: its text (capped), the JSON it holds if any, and how it went."""

    text: str
    is_error: bool
    truncated: bool
    latency_ms: int

    @property
    def data(self) -> Any | None:
        """Return the JSON the text holds, or None (also when the text was cut).

        Read on demand: the runner keeps only the text, so a call does not parse it.
        """
        return None if self.truncated else _json_or_none(self.text)


def result_max_chars() -> int:
    """Return settings.TOOL_RESULT_MAX_CHARS (the cap on a result's text)."""
    return int(getattr(settings, "TOOL_RESULT_MAX_CHARS", DEFAULT_RESULT_MAX_CHARS))


def stdio_commands() -> Mapping[str, list[str]]:
    """Return settings.MCP_STDIO_COMMANDS: {name: argv} the stdio servers may run."""
    commands: Mapping[str, list[str]] = getattr(settings, "MCP_STDIO_COMMANDS", {})
    return commands


def discover(server: ToolServer) -> list[ToolSpec]:
    """List the server's tools, store them as its cache, and return them.

    A failure is stored too (`discovery_error`, the old cache kept) and raised as ToolError.
    What is kept is bounded (`_kept`); what was left out is said in `discovery_error`.
    """
    timeout = min(server.timeout_s, MAX_DISCOVERY_SECONDS)
    try:
        listed = _run(lambda: _list_tools(server, timeout), timeout=timeout, server=server)
    except ToolError as exc:
        server.discovery_error = str(exc)
        server.save(update_fields=["discovery_error", "updated_at"])
        raise
    specs, notes = _kept(listed)
    server.tools = [spec.as_json() for spec in specs]
    server.discovered_at = timezone.now()
    server.discovery_error = "; ".join(notes)
    server.save(update_fields=["tools", "discovered_at", "discovery_error", "updated_at"])
    return specs


def call(
    server: ToolServer,
    tool_name: str,
    arguments: Mapping[str, Any],
    *,
    timeout_s: float | None = None,
) -> ToolResult:
    """Call one tool and return its result; raise ToolError if the server could not answer.

    A tool that runs and fails answers with `is_error` set (that is the tool's answer, not
    a ToolError). `timeout_s` bounds the whole call, connecting included (default: the
    server's). The text is cut at TOOL_RESULT_MAX_CHARS, with `truncated` set.
    """
    if not server.enabled:
        raise ToolError(f"tool server '{server.name}' is disabled")
    # A recipe may ask for less time than staff gave the server, never for more.
    timeout = float(min(timeout_s, server.timeout_s) if timeout_s is not None else server.timeout_s)
    progress = _Progress()
    started = time.monotonic()
    result = _run(
        lambda: _call_tool(server, tool_name, dict(arguments), timeout, progress),
        timeout,
        server=server,
        progress=progress,
    )
    latency_ms = int((time.monotonic() - started) * 1000)
    return _tool_result(result, latency_ms=latency_ms)


class _Progress:
    """The last progress a server reported for a call (MCP `notifications/progress`), said
    when the call times out: how far the tool got."""

    def __init__(self) -> None:
        self.reported: str | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g} of {total:g}" if total is not None else f"{progress:g}"
        # The server's words, quoted in a step's error: one short line.
        words = " ".join(message.split())[:200] if message else ""
        self.reported = f"{done}: {words}" if words else done


def _run(
    make: Callable[[], Awaitable[T]],
    timeout: float,
    *,
    server: ToolServer,
    progress: _Progress | None = None,
) -> T:
    """Run an SDK coroutine to completion within `timeout` seconds, errors as ToolError."""

    async def bounded() -> T:
        with anyio.fail_after(timeout):
            return await make()

    def run() -> T:
        try:
            return anyio.run(bounded)
        except ToolError:
            raise
        except BaseException as exc:  # the SDK's task groups wrap errors in groups
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise ToolError(_describe(server, exc, timeout, progress)) from None

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        release()  # the thread waits on the server now: its database connection is not needed
        return run()
    # Called from async code (a consumer, an async view): anyio.run needs a thread of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def _describe(
    server: ToolServer, exc: BaseException, timeout: float, progress: _Progress | None = None
) -> str:
    """Turn what the SDK raised into one clear sentence about the server."""
    cause = _innermost(exc)
    who = f"tool server '{server.name}'"
    seconds = f"{timeout:.3g}"  # a tool loop gives a call what is left: 2.99, not 2.99321
    if isinstance(cause, ToolError):
        return str(cause)
    if isinstance(cause, URLRefused):
        # Checked again at connect time: the name may resolve elsewhere than when registered.
        return f"{who}: url {cause.reason}"
    if isinstance(cause, ResponseTooLarge):
        return f"{who}: {cause}"
    if isinstance(cause, TimeoutError | httpx2.TimeoutException):
        if progress is not None and progress.reported is not None:
            return (
                f"{who} timed out after {seconds} s (the tool's last progress: {progress.reported})"
            )
        return f"{who} timed out after {seconds} s"
    if isinstance(cause, httpx2.ConnectError):
        # Not its URL: run owners read this, and only staff need to know where servers live.
        return f"{who} is not reachable: is it running?"
    if isinstance(cause, httpx2.HTTPStatusError):
        return f"{who} answered HTTP {cause.response.status_code}: not an MCP endpoint?"
    if isinstance(cause, MCPError):
        if too_large_message(MAX_RESPONSE_BYTES) in cause.message:
            # A JSON answer cut by the transport: the SDK reports it as a parse failure.
            return f"{who}: {too_large_message(MAX_RESPONSE_BYTES)}"
        return f"{who} refused the request: {cause.message}"
    if isinstance(cause, ValidationError | ValueError | json.JSONDecodeError):
        return f"{who} did not answer as an MCP server does ({type(cause).__name__})"
    if isinstance(cause, httpx2.HTTPError):
        # Not its text: an HTTP client's message may quote a request header (a secret).
        return f"{who} failed over HTTP: {type(cause).__name__}"
    if isinstance(cause, OSError):
        return f"{who} could not be started: {cause.strerror or cause}"
    logger.warning("Tool server %s failed: %s", server.name, type(cause).__name__)
    return f"{who} failed: {type(cause).__name__}"


def _innermost(exc: BaseException) -> BaseException:
    """Return the error that matters inside exception groups and chains."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return exc
    # The SDK sometimes re-raises transport failures as its own error with the cause chained.
    if not isinstance(exc, httpx2.HTTPError | MCPError | OSError) and exc.__cause__ is not None:
        return _innermost(exc.__cause__)
    return exc


def _kept(listed: list[ToolSpec]) -> tuple[list[ToolSpec], list[str]]:
    """Return the tools a discovery keeps, and a note for each kind left out."""
    kept: list[ToolSpec] = []
    too_large: list[str] = []
    for spec in listed:
        if len(json.dumps(spec.input_schema)) > MAX_SCHEMA_BYTES:
            too_large.append(spec.name[:100])
            continue
        if len(spec.description) > MAX_DESCRIPTION_CHARS:
            spec = replace(spec, description=spec.description[:MAX_DESCRIPTION_CHARS] + "…")
        kept.append(spec)
    notes = []
    if too_large:
        notes.append(
            f"left out {len(too_large)} tool(s) whose input schema is larger than "
            f"{MAX_SCHEMA_BYTES // 1024} KB: {', '.join(too_large[:10])}"
        )
    if len(kept) > MAX_DISCOVERED_TOOLS:
        notes.append(
            f"the server lists more than {MAX_DISCOVERED_TOOLS} tools; "
            f"the first {MAX_DISCOVERED_TOOLS} are kept"
        )
        kept = kept[:MAX_DISCOVERED_TOOLS]
    return kept, notes


async def _list_tools(server: ToolServer, timeout: float) -> list[ToolSpec]:
    async with _Session(server, read_timeout=timeout) as client:
        specs: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            specs += [
                ToolSpec(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema or {"type": "object"}),
                )
                for tool in page.tools
            ]
            cursor = page.next_cursor
            # Past what is kept, further pages would only be read to be left out.
            if cursor is None or len(specs) > MAX_DISCOVERED_TOOLS:
                break
        return specs


async def _call_tool(
    server: ToolServer,
    tool_name: str,
    arguments: dict[str, Any],
    timeout: float,
    progress: _Progress,
) -> CallToolResult:
    async with _Session(server, read_timeout=timeout) as client:
        # A progress callback asks the server to report progress (it sends a progress token).
        return await client.call_tool(
            tool_name, arguments, read_timeout_seconds=timeout, progress_callback=progress
        )


class _Session:
    """One SDK client session on the server, with the resources it needs (the HTTP client,
    the stdio server's stderr file) closed with it."""

    def __init__(self, server: ToolServer, read_timeout: float) -> None:
        self._server = server
        self._read_timeout = read_timeout
        self._http: httpx2.AsyncClient | None = None
        self._stderr: IO[str] | None = None
        self._client: Client | None = None

    async def __aenter__(self) -> Client:
        server = self._server
        if server.transport == ToolServer.Transport.HTTP:
            # The check resolves the name: in a thread, so the deadline still holds.
            url = await anyio.to_thread.run_sync(checked_url, server.url, abandon_on_cancel=True)
            self._http = httpx2.AsyncClient(
                headers=env_headers(server.header_envs),
                timeout=httpx2.Timeout(self._read_timeout),
                transport=PinnedTransport(
                    allowlist=Allowlist.parse(settings_allowlist()),
                    max_body_bytes=MAX_RESPONSE_BYTES,
                ),
                follow_redirects=False,
                trust_env=False,
            )
            transport: Any = streamable_http_client(
                url, http_client=self._http, max_sse_event_size=MAX_RESPONSE_BYTES
            )
        elif server.transport == ToolServer.Transport.STDIO:
            argv = stdio_argv(server.command)
            # A file, not a pipe: a chatty server must not block on a full stderr pipe.
            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 (closed in _close)
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], cwd=str(settings.BASE_DIR)
            )
            transport = stdio_client(params, errlog=self._stderr)
        else:
            raise ToolError(f"tool server '{server.name}': unknown transport {server.transport!r}")
        self._client = Client(transport, read_timeout_seconds=self._read_timeout, cache=None)
        try:
            return await self._client.__aenter__()
        except BaseException as exc:
            cause = _innermost(exc)
            tail = self._stderr_tail() if self._stderr is not None else ""
            await self._close()
            if isinstance(cause, TimeoutError | ToolError | URLRefused | ResponseTooLarge):
                raise
            if tail:
                raise ToolError(f"tool server '{server.name}' stopped: {tail}") from None
            if isinstance(cause, MCPError | ValidationError | ValueError):
                # Failing the handshake: whatever answers there does not speak MCP.
                why = cause.message if isinstance(cause, MCPError) else type(cause).__name__
                raise ToolError(
                    f"tool server '{server.name}' did not answer as an MCP server does ({why})"
                ) from None
            raise

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            if self._client is not None:
                await self._client.__aexit__(*exc_info)
        finally:
            await self._close()

    async def _close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_tail(self) -> str:
        assert self._stderr is not None
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read()
        return " ".join(text[-STDERR_TAIL_CHARS:].split())


def checked_url(url: str) -> str:
    """Return the server URL normalised, or raise ToolError if the SSRF guard refuses it."""
    try:
        return check_base_url(url, allowlist=settings_allowlist()).url
    except URLRefused as exc:
        raise ToolError(f"url {exc.reason}") from None


def stdio_argv(command: str) -> list[str]:
    """Return the argv configured for `command`, or raise ToolError if none is."""
    argv = stdio_commands().get(command)
    if not command or not argv:
        raise ToolError(f"command '{command}' is not in MCP_STDIO_COMMANDS")
    return [str(part) for part in argv]


def env_headers(header_envs: Mapping[str, str]) -> dict[str, str]:
    """Read each header's value from its env var; a missing one is a ToolError naming the
    variable (never a value)."""
    headers: dict[str, str] = {}
    for header, variable in header_envs.items():
        value = os.environ.get(variable)
        if value is None:
            raise ToolError(f"header {header}: env var {variable} is not set")
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            # The HTTP client would refuse it with the value in its message.
            raise ToolError(f"header {header}: env var {variable} holds a control character")
        headers[header] = value
    return headers


def _tool_result(result: CallToolResult, *, latency_ms: int) -> ToolResult:
    """Flatten the SDK's result into text (capped) and data (its JSON, if any)."""
    text = "\n".join(_block_text(block) for block in result.content)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    limit = result_max_chars()
    truncated = len(text) > limit
    return ToolResult(
        text=text[:limit],
        is_error=bool(result.is_error),
        truncated=truncated,
        latency_ms=latency_ms,
    )


def _block_text(block: ContentBlock) -> str:
    """Return a content block as text: its text, or what it is (a model reads the result)."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource):
        if isinstance(block.resource, TextResourceContents):
            return block.resource.text
        return f"[resource: {block.resource.uri} ({block.resource.mime_type or 'binary'})]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}]"
    return f"[{block.type} content]"


def _json_or_none(text: str) -> Any | None:
    stripped = text.strip()
    if not stripped or stripped[0] not in '{["-0123456789tfn':
        return None
    try:
        return strict_json(stripped)  # a NaN is not JSON: the result is its text
    except (ValueError, RecursionError):
        return None
