"""The HTTP transport of the MCP client: where it connects, and how much it reads.

The SDK speaks to a server through an `httpx2.AsyncClient`; this transport under it

- connects each request to the addresses `actor_urls.connect_addresses` checked for its
  host at that moment (the name kept for Host and TLS), so a name that resolved to a public
  address when the server was registered cannot be made to resolve to an inner one later
  (DNS rebinding); the lookup runs in a thread, so a slow resolver never stalls the loop
  and the call's deadline still holds;
- cuts a response body at a byte ceiling, streamed (SSE) or not: the SDK reads a JSON
  answer whole, so without it a server could make a worker buffer without end.

The deadline itself is the caller's (`anyio.fail_after` around the whole session).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2

from workflows.actor_urls import Allowlist, connect_addresses


def too_large_message(max_bytes: int) -> str:
    """Return what a response past the ceiling is called (the SDK passes it on as text)."""
    return f"its answer is larger than {max_bytes // (1024 * 1024)} MB"


class ResponseTooLarge(httpx2.StreamError, httpx2.SSEError):
    """Signal that a response body went past the byte ceiling.

    The SDK answers the pending request with it instead of leaving the caller to wait for its
    deadline: a StreamError, for a JSON answer; an SSEError, for an event stream, which the
    SDK would otherwise resume from the last event id (a server that keeps its events, as
    server-everything does, would then send the same flood again, twice).
    """


class _CappedStream(httpx2.AsyncByteStream):
    """Wrap a response body: raise ResponseTooLarge past `max_bytes`."""

    def __init__(self, inner: httpx2.AsyncByteStream, max_bytes: int) -> None:
        self._inner = inner
        self._max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._max_bytes:
                raise ResponseTooLarge(too_large_message(self._max_bytes))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Connect only to the addresses checked for each request, and cap every body."""

    def __init__(self, *, allowlist: Allowlist, max_body_bytes: int) -> None:
        # trust_env=False: a proxy from the environment would resolve names itself.
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)
        self._allowlist = allowlist
        self._max_body_bytes = max_body_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await anyio.to_thread.run_sync(
            connect_addresses, url.host, port, self._allowlist, abandon_on_cancel=True
        )
        if addresses is None:
            response = await self._inner.handle_async_request(request)
        else:
            response = await self._send_pinned(request, addresses)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._max_body_bytes),
            extensions=response.extensions,
        )

    async def _send_pinned(self, request: httpx2.Request, addresses: list[str]) -> httpx2.Response:
        """Send to the checked addresses in turn, keeping the name for Host and TLS."""
        original_url = request.url
        if original_url.scheme == "https":
            request.extensions = {"sni_hostname": original_url.host, **request.extensions}
        last_error: httpx2.ConnectError | None = None
        for address in addresses:
            request.url = original_url.copy_with(host=address)
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.ConnectError as exc:
                # Nothing was sent yet, so the next address is as safe to try as the first.
                last_error = exc
            finally:
                request.url = original_url
        assert last_error is not None
        raise last_error

    async def aclose(self) -> None:
        await self._inner.aclose()
