"""A local HTTP server for http steps, on loopback, with one route per way a server answers.

    with HttpTestServer() as server:
        server.url("/json")  # http://127.0.0.1:PORT/json

Routes: `/json` (an object), `/text`, `/echo` (the request's headers, query and body as
JSON), `/limited?after=S` (429 with `Retry-After: S`, default 1, on the first
request, then 200), `/broken`
(always 500), `/slow` (answers after `slow_s`), `/huge` (`huge_bytes` bytes, with or without
a length: `/huge?chunked=1`), `/gzip?bytes=N` (N bytes of `x`, default 10 MB, sent gzipped:
a few KB on the wire), `/redirect?to=URL&status=S` (S, default 302, to URL). Every request is
kept in `requests` with the time it came.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    at: float


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that stopped reading (the size cap, a timeout) is expected here


class HttpTestServer:
    def __init__(self, *, slow_s: float = 3.0, huge_bytes: int = 64 * 1024) -> None:
        self.slow_s = slow_s
        self.huge_bytes = huge_bytes
        self.requests: list[Received] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> HttpTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, path: str) -> str:
        return f"http://{self.address}{path}"

    def received(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(
                Received(
                    handler.command,
                    parts.path,
                    query,
                    dict(handler.headers.items()),
                    body,
                    time.monotonic(),
                )
            )
            count = self._counts[parts.path] = self._counts.get(parts.path, 0) + 1
        route = parts.path
        if route == "/json":
            self._send(handler, 200, json.dumps({"count": 7, "name": "widget"}), "application/json")
        elif route == "/text":
            self._send(handler, 200, "plain words from the server", "text/plain; charset=utf-8")
        elif route == "/echo":
            echoed = {
                "method": handler.command,
                "headers": dict(handler.headers.items()),
                "query": query,
                "body": body.decode(errors="replace"),
            }
            self._send(handler, 200, json.dumps(echoed), "application/json")
        elif route == "/limited":
            if count == 1:
                after = query.get("after", "1")
                self._send(handler, 429, "slow down", "text/plain", {"Retry-After": after})
            else:
                self._send(handler, 200, json.dumps({"ok": True}), "application/json")
        elif route == "/broken":
            self._send(handler, 500, "it broke", "text/plain")
        elif route == "/slow":
            time.sleep(self.slow_s)
            self._send(handler, 200, "late", "text/plain")
        elif route == "/huge":
            self._huge(handler, chunked=query.get("chunked") == "1")
        elif route == "/gzip":
            self._gzip(handler, int(query.get("bytes", 10_000_000)))
        elif route == "/redirect":
            status = int(query.get("status", 302))
            self._send(handler, status, "", "text/plain", {"Location": query.get("to", "/")})
        else:
            self._send(handler, 404, "no such route", "text/plain")

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        text: str,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = text.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def _gzip(self, handler: BaseHTTPRequestHandler, size: int) -> None:
        data = gzip.compress(b"x" * size)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        with contextlib.suppress(OSError):  # the client stopped reading
            handler.wfile.write(data)

    def _huge(self, handler: BaseHTTPRequestHandler, *, chunked: bool) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        chunk = b"x" * 8192
        if not chunked:
            handler.send_header("Content-Length", str(self.huge_bytes))
            handler.end_headers()
            sent = 0
            while sent < self.huge_bytes:
                part = chunk[: self.huge_bytes - sent]
                try:
                    handler.wfile.write(part)
                except OSError:
                    return  # the client stopped reading
                sent += len(part)
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for _ in range(self.huge_bytes // len(chunk) + 1):
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
