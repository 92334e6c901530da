"""A callback receiver for the tests: a real HTTP server on loopback that verifies each
message with the Standard Webhooks library, as a receiving system would."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass
class Received:
    """One POST the receiver got: its headers, its body, and what verifying it gave."""

    path: str
    headers: dict[str, str]
    body: bytes
    verified: Any = None  # the payload, when the signature checked out
    refused: str = ""  # why verification failed


@dataclass
class Receiver:
    """Answer each POST with the next of `statuses` (the last repeats); keep what came."""

    secret: str
    statuses: list[int] = field(default_factory=lambda: [204])
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/branchline"

    @property
    def verified(self) -> list[Any]:
        with self._lock:
            return [r.verified for r in self.received if r.verified is not None]

    def take(self, path: str, headers: dict[str, str], body: bytes) -> int:
        got = Received(path, headers, body)
        try:
            got.verified = Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError as exc:
            got.refused = str(exc)
        with self._lock:
            self.received.append(got)
            index = min(len(self.received), len(self.statuses)) - 1
            return self.statuses[index]


def serve(receiver: Receiver) -> Iterator[Receiver]:
    """Serve `receiver` on a free loopback port until the generator is closed."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            status = receiver.take(self.path, dict(self.headers.items()), body)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def payloads(receiver: Receiver) -> list[dict[str, Any]]:
    """Return the bodies the receiver got, parsed (verified or not)."""
    return [json.loads(r.body) for r in receiver.received]
