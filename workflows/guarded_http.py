"""An httpx transport that guards each call to a model server: where it connects, how long it
reads, how much it reads.

- A request connects to the addresses `actor_urls.connect_addresses` checked for its host (the
  name kept for Host and TLS), so a name cannot resolve elsewhere between the check and the
  connect; or by name, where that check says so. A caller may pass its own check (the
  providers pass one that raises their errors).
- A response body is cut at the call's deadline, between chunks and, through a watchdog on
  the socket, during a stalled read; and at a byte ceiling.

Callers (the chat providers, the knowledge bases' embeddings) take the process's client for
their guard (`guarded_client`, or `guarded_httpx2_client` for an SDK built on httpx2, which
rides on the same transport), make their calls inside `call_deadline`, and see the cuts as
`DeadlinePassed` and `BodyTooLarge`. A body still open when the block ends is closed then, so
its connection goes back to the pool even when an SDK drops a response it did not read to
the end. Here, below both, so neither imports the other.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import cache
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx
import httpx2

from .actor_urls import Allowlist, connect_addresses
from .connections import release

# (host, port, allowlist) -> the addresses to connect to, or None to connect by name.
ConnectCheck = Callable[[str, int, Allowlist], list[str] | None]


@cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings of every call, made once per process: loading the CA bundle costs
    milliseconds, and a worker makes hundreds of calls a second. SSLContext is thread-safe."""
    return httpx.create_ssl_context()


class _Call:
    """One `call_deadline` block: its deadline, and the bodies its requests opened."""

    __slots__ = ("bodies", "deadline")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.bodies: list[_GuardedStream] = []


_current_call: ContextVar[_Call | None] = ContextVar("guarded_call", default=None)


@contextlib.contextmanager
def call_deadline(at: float) -> Iterator[None]:
    """Bound the guarded calls made in the block to `at` (a `time.monotonic()` value): a body
    still coming then is cut, as DeadlinePassed. Bodies left open when the block ends are
    closed (read ones already are)."""
    call = _Call(at)
    token = _current_call.set(call)
    try:
        yield
    finally:
        _current_call.reset(token)
        for body in call.bodies:
            body.close()


_ClientKey = tuple[Allowlist, int, ConnectCheck]
_transports: dict[_ClientKey, GuardedTransport] = {}
_clients: dict[_ClientKey, httpx.Client] = {}
_httpx2_clients: dict[_ClientKey, httpx2.Client] = {}
_clients_lock = threading.Lock()


def _forget_clients_in_child() -> None:
    """A forked child makes its own clients: its parent's sockets and lock are not its own."""
    global _clients_lock
    _transports.clear()
    _clients.clear()
    _httpx2_clients.clear()
    _clients_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_clients_in_child)


def guarded_client(
    allowlist: Allowlist, *, max_body_bytes: int, connect_check: ConnectCheck = connect_addresses
) -> httpx.Client:
    """The process's client for calls under this guard, shared by its threads (httpx's client
    may be). Its pool keeps a connection, made to an address the guard checked, open for the
    next call to that server: a call pays no TCP and TLS handshake of its own. It keeps no
    cookies, which would carry one actor's session into another's calls; it ignores proxies
    from the environment, which would resolve names themselves and skip the address check."""
    key = (allowlist, max_body_bytes, connect_check)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = httpx.Client(
                transport=_transport(key),
                follow_redirects=False,
                trust_env=False,
                cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            )
        return client


def guarded_httpx2_client(
    allowlist: Allowlist, *, max_body_bytes: int, connect_check: ConnectCheck = connect_addresses
) -> httpx2.Client:
    """`guarded_client` for SDKs that take an httpx2 client (httpx's fork, under its own
    name): the same settings, its requests carried by the same transport and pools."""
    key = (allowlist, max_body_bytes, connect_check)
    with _clients_lock:
        client = _httpx2_clients.get(key)
        if client is None:
            client = _httpx2_clients[key] = httpx2.Client(
                transport=_Httpx2Bridge(_transport(key)),
                follow_redirects=False,
                trust_env=False,
                cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            )
        return client


def _transport(key: _ClientKey) -> GuardedTransport:
    """The transport of one guard (called holding `_clients_lock`)."""
    transport = _transports.get(key)
    if transport is None:
        allowlist, max_body_bytes, connect_check = key
        transport = _transports[key] = GuardedTransport(
            allowlist=allowlist, max_body_bytes=max_body_bytes, connect_check=connect_check
        )
    return transport


class BodyTooLarge(Exception):
    """Signal from the transport: the body went past the byte ceiling."""


class DeadlinePassed(Exception):
    """Signal from the transport: the call's time budget ran out while reading."""


class _Watchdog:
    """Shut a response's socket down at the deadline, so a stalled read returns at once.

    A read timeout alone is not enough: it bounds each read, not the sum of them, so a
    server that stalls after trickling for a while would hold the worker past the budget.
    """

    def __init__(self, sock: socket.socket, delay: float) -> None:
        self.fired = threading.Event()
        self._sock = sock
        # Timer.cancel() does not stop a timer that is already running: the lock makes a cut
        # and a cancel exclusive, so that once cancel() returns the socket is never cut.
        self._lock = threading.Lock()
        self._cancelled = False
        self._timer = threading.Timer(max(delay, 0.0), self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self.fired.set()
            # The base-class method, so that on a TLS socket the SSL object is left alone for
            # the reading thread, which then sees a plain end of stream.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        """Stop the timer for good: the response was read or dropped, and its connection may
        serve another call, which this timer must not cut."""
        with self._lock:
            self._cancelled = True
        self._timer.cancel()


class _GuardedStream(httpx.SyncByteStream):
    """Wrap a response body: enforce the byte ceiling and the deadline between chunks."""

    def __init__(
        self,
        inner: httpx.SyncByteStream,
        *,
        deadline: float,
        max_bytes: int,
        watchdog: _Watchdog | None,
    ) -> None:
        self._inner = inner
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._watchdog = watchdog
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        try:
            for chunk in self._inner:
                received += len(chunk)
                if received > self._max_bytes:
                    raise BodyTooLarge(f"response body exceeded {self._max_bytes} bytes")
                if time.monotonic() > self._deadline:
                    raise DeadlinePassed()
                yield chunk
        except httpx.TransportError as exc:
            if self._cut_short():
                raise DeadlinePassed() from exc
            raise
        # Stopped first, so that no cut can come after the check below: the connection may
        # serve another call once this body is closed.
        if self._watchdog is not None:
            self._watchdog.cancel()
        # A body without a length ends at end of stream, which is also what the watchdog's
        # shutdown looks like: a cut body must not pass for a complete one.
        if self._cut_short():
            raise DeadlinePassed()

    def _cut_short(self) -> bool:
        fired = self._watchdog is not None and self._watchdog.fired.is_set()
        return fired or time.monotonic() >= self._deadline

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._inner.close()


# Idle connections are kept however many calls were in flight (a step's next call to its model
# finds one open), for 2 s: less than the 5 s after which uvicorn (vLLM, LiteLLM, llama.cpp's
# server) and Node close an idle one, so that a call never picks one the server is closing.
POOL_LIMITS = httpx.Limits(
    max_connections=None, max_keepalive_connections=None, keepalive_expiry=2.0
)
MAX_POOLS = 64  # server names with a pool of their own in a process


class GuardedTransport(httpx.BaseTransport):
    """Connect only to checked addresses, and guard every response body (see _GuardedStream)."""

    def __init__(
        self,
        *,
        allowlist: Allowlist,
        max_body_bytes: int,
        connect_check: ConnectCheck = connect_addresses,
    ) -> None:
        self._pools: OrderedDict[tuple[str, str, int], httpx.HTTPTransport] = OrderedDict()
        self._pools_lock = threading.Lock()
        self._allowlist = allowlist
        self._connect_check = connect_check
        self._max_body_bytes = max_body_bytes

    def _pool_of(self, scheme: str, host: str, port: int) -> httpx.HTTPTransport:
        """The connections of one server name. A pinned request's URL names its address, which
        other names may share (a CDN's): their requests must not ride on a connection whose
        TLS session verified this name. The names used least recently past MAX_POOLS are
        let go (their calls in flight finish on them; their idle sockets close with them)."""
        key = (scheme, host, port)
        with self._pools_lock:
            pool = self._pools.pop(key, None)
            if pool is None:
                pool = httpx.HTTPTransport(verify=_tls_context(), limits=POOL_LIMITS)
            self._pools[key] = pool  # the most recently used, last
            while len(self._pools) > MAX_POOLS:
                del self._pools[next(iter(self._pools))]
            return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        call = _current_call.get()
        if call is None:
            raise RuntimeError("a guarded call is made inside call_deadline(): none was set")
        deadline = call.deadline
        release()  # the thread waits on the server now: its database connection is not needed
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = self._connect_check(url.host, port, self._allowlist)
        pool = self._pool_of(url.scheme, url.host, port)
        if addresses is None:
            response = pool.handle_request(request)
        else:
            response = self._send_pinned(pool, request, addresses)
        try:
            watchdog = None
            network_stream = response.extensions.get("network_stream")
            sock = network_stream.get_extra_info("socket") if network_stream is not None else None
            if isinstance(sock, socket.socket):
                watchdog = _Watchdog(sock, deadline - time.monotonic())
            assert isinstance(response.stream, httpx.SyncByteStream)
            body = _GuardedStream(
                response.stream,
                deadline=deadline,
                max_bytes=self._max_body_bytes,
                watchdog=watchdog,
            )
            call.bodies.append(body)
            return httpx.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=body,
                extensions=response.extensions,
            )
        except BaseException:
            response.close()  # else its connection stays taken in the shared pool
            raise

    def _send_pinned(
        self, pool: httpx.HTTPTransport, request: httpx.Request, addresses: list[str]
    ) -> httpx.Response:
        """Send to the checked addresses in turn, keeping the name for Host and TLS."""
        original_url = request.url
        if original_url.scheme == "https":
            request.extensions = {"sni_hostname": original_url.host, **request.extensions}
        last_error: httpx.ConnectError | None = None
        for address in addresses:
            request.url = original_url.copy_with(host=address)
            try:
                return pool.handle_request(request)
            except httpx.ConnectError as exc:
                # Nothing was sent yet, so the next address is as safe to try as the first.
                last_error = exc
            finally:
                request.url = original_url
        assert last_error is not None
        raise last_error

    def close(self) -> None:
        with self._pools_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


class _Httpx2Bridge(httpx2.BaseTransport):
    """Carry an httpx2 client's requests over a GuardedTransport (httpx): one guard, one set of
    pools for both. httpx's errors come out as httpx2's of the same name (the SDK tells a
    timeout from a broken connection by them), the original kept as their cause; the guard's
    own cuts come out as they are."""

    def __init__(self, inner: GuardedTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        outgoing = httpx.Request(
            request.method,
            str(request.url),
            headers=request.headers.raw,
            content=request.read(),
            extensions=request.extensions,
        )
        with _as_httpx2_errors(request):
            response = self._inner.handle_request(outgoing)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers.raw,
            stream=_Httpx2Body(response.stream, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        pass  # the transport is the process's, shared with the httpx client of the guard


class _Httpx2Body(httpx2.SyncByteStream):
    """A guarded body, read through httpx2."""

    def __init__(self, inner: httpx.SyncByteStream, request: httpx2.Request) -> None:
        self._inner = inner
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx2_errors(self._request):
            yield from self._inner

    def close(self) -> None:
        self._inner.close()


@contextlib.contextmanager
def _as_httpx2_errors(request: httpx2.Request) -> Iterator[None]:
    try:
        yield
    except httpx.HTTPError as exc:
        kind = getattr(httpx2, type(exc).__name__, None)
        if not (isinstance(kind, type) and issubclass(kind, httpx2.RequestError)):
            kind = httpx2.TransportError
        raise kind(str(exc), request=request) from exc
