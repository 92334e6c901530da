"""A local stand-in for model servers, scripted per test: OpenAI-compatible servers and Ollama
(``POST /v1/chat/completions``), Anthropic's Messages API (``POST /v1/messages``) and Google's
Gemini API (``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``).

Each chat request, in whichever format, takes the next behaviour from a queue (``enqueue``)
or, once the queue is empty, ``default``. Answers come as JSON or as SSE, whichever the request
asked for, in the format of the route it came to, like the real servers (``wire_formats.py``).
``GET /api/tags`` and ``GET /v1/models`` list ``models``. Every request is recorded in
``requests``.

``POST /v1/embeddings`` answers one vector per input from ``embedder`` (deterministic word
hashing by default), unless a behaviour queued with ``enqueue_embeddings`` says otherwise
(``error``, ``raw``, ``hang_up``; ``reply(delay_s=...)`` answers the vectors late).

Use it through the ``stub_server`` fixture (import it into a conftest), or directly::

    with StubServer() as server:
        server.enqueue(reply("Once upon a time"), error(500))
        provider = OpenAICompatibleProvider(server.base_url, "key", allowlist=[server.address])
"""

from __future__ import annotations

import json
import socket
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from .wire_formats import CHAT_PATH, CUT, HOLD, STALL, WIRES, Mark, OpenAIWire, Piece

__all__ = ["CHAT_PATH"]

EMBEDDINGS_PATH = "/v1/embeddings"
STUB_EMBEDDING_DIMENSIONS = 16


@dataclass(frozen=True)
class Behaviour:
    """Say how the stub answers one chat request; build one with the functions below."""

    kind: str
    text: str = ""
    chunks: tuple[str, ...] | None = None
    usage: tuple[int, int] | None = (7, 11)
    model: str | None = None
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    content_type: str = "application/json"
    events: tuple[str, ...] = ()
    delay_s: float = 0
    interval_s: float = 0
    stall_s: float = 0
    hold: threading.Event | None = None
    gate: threading.Event | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    cut_after: int | None = None
    details: tuple[dict[str, Any], ...] = ()


def reply(
    text: str = "stub answer",
    *,
    chunks: Sequence[str] | None = None,
    usage: tuple[int, int] | None = (7, 11),
    model: str | None = None,
    delay_s: float = 0,
    interval_s: float = 0,
    stall_s: float = 0,
    hold: threading.Event | None = None,
    gate: threading.Event | None = None,
    cut_after: int | None = None,
) -> Behaviour:
    """Answer ``text`` (streamed as ``chunks`` when given, else word by word).

    ``delay_s`` waits before the headers (a slow server); ``interval_s`` waits before each
    text chunk after the first (a trickling one); ``stall_s`` waits after the text, before
    the end of the answer (one that stops talking mid-answer). A plain JSON answer with an
    interval or a stall is sent in 16-byte pieces, stalling before the last one. A streamed
    answer with ``hold`` keeps its last text chunk back until the test sets that event, so
    the test sees the answer mid-stream however slow the machine is. A streamed answer with
    ``cut_after`` drops the connection after that many text chunks, mid-body. An answer with
    ``gate`` waits, after ``delay_s``, until the test sets that event.
    """
    if chunks is not None:
        text = "".join(chunks)
    return Behaviour(
        "reply",
        text=text,
        chunks=tuple(chunks) if chunks is not None else None,
        usage=usage,
        model=model,
        delay_s=delay_s,
        interval_s=interval_s,
        stall_s=stall_s,
        hold=hold,
        gate=gate,
        cut_after=cut_after,
    )


def error(
    status: int,
    message: str = "stub error",
    *,
    headers: dict[str, str] | None = None,
    details: Sequence[dict[str, Any]] = (),
) -> Behaviour:
    """Answer ``status`` with the error body of the request's format (Gemini's with
    ``details``, such as a RetryInfo)."""
    return Behaviour(
        "error",
        text=message,
        status=status,
        headers=tuple((headers or {}).items()),
        details=tuple(details),
    )


def rate_limited(retry_after: str | None = "1", *, header: str = "Retry-After") -> Behaviour:
    """Answer 429, asking to retry after ``retry_after`` (seconds, or an HTTP date)."""
    headers = {header: retry_after} if retry_after is not None else {}
    return error(429, "Rate limit reached", headers=headers)


def raw(
    body: bytes | str,
    *,
    status: int = 200,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> Behaviour:
    """Answer exactly ``body``, whatever the request asked for."""
    data = body.encode() if isinstance(body, str) else body
    return Behaviour(
        "raw",
        status=status,
        body=data,
        content_type=content_type,
        headers=tuple((headers or {}).items()),
    )


def sse(*events: str) -> Behaviour:
    """Answer a ``text/event-stream`` made of ``events`` exactly as given (``data: …\\n\\n``)."""
    return Behaviour("sse", events=events)


def redirect(location: str, status: int = 302) -> Behaviour:
    """Answer a redirect to ``location``."""
    return Behaviour("raw", status=status, headers=(("Location", location),))


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str], usage: tuple[int, int] = (5, 3)
) -> Behaviour:
    """Answer a plain JSON message asking for tool calls: each (function name, arguments).

    Arguments given as text are sent as written (a model's broken JSON).
    """
    encoded = tuple(
        (name, arguments if isinstance(arguments, str) else json.dumps(arguments))
        for name, arguments in calls
    )
    return Behaviour("reply", text="", usage=usage, tool_calls=encoded)


def hang_up() -> Behaviour:
    """Close the connection without answering."""
    return Behaviour("hang_up")


@dataclass
class RecordedRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    json: Any = field(default=None)
    client_port: int = 0  # the connection it came on

    @property
    def prompt(self) -> str | None:
        """Return the text of the last user message of a chat request (any format)."""
        data = self.json if isinstance(self.json, dict) else {}
        if "contents" in data:  # Gemini's
            users = [c for c in data["contents"] if c.get("role") == "user"]
            return "".join(p.get("text", "") for p in users[-1]["parts"]) if users else None
        users = [m.get("content") for m in data.get("messages") or [] if m.get("role") == "user"]
        if not users:
            return None
        if isinstance(users[-1], list):  # Anthropic's content blocks
            return "".join(b.get("text", "") for b in users[-1] if b.get("type") == "text")
        return users[-1]

    @property
    def model(self) -> str | None:
        """Return the model a chat request asked for (in its body, or Gemini's path)."""
        path = urlsplit(self.path).path
        for wire in WIRES:
            if wire.matches(path):
                return wire.model(path, self.json)
        return (self.json or {}).get("model")


class StubServer:
    """Serve the OpenAI and Ollama wire formats on 127.0.0.1, on a free port, in a thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.default: Behaviour = reply()
        self.models: list[str] = ["llama3.2:latest", "qwen3:latest"]
        # Plain answers close their connection unless this is set (streams always do).
        self.keep_alive = False
        self._queue: deque[Behaviour] = deque()
        self.embedder: Callable[[str], list[float]] = stub_embedding
        self._embedding_queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        # Chat requests being answered now, and the most there were at once.
        self.chats_in_flight = 0
        self.most_chats_in_flight = 0
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.stub = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        """Return the port the stub listens on."""
        return int(self._httpd.server_address[1])

    @property
    def address(self) -> str:
        """Return ``127.0.0.1:PORT``, the allowlist entry that lets providers call the stub."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """Return the server root, as Ollama's base URL is usually written."""
        return f"http://{self.address}"

    @property
    def base_url(self) -> str:
        """Return the OpenAI-compatible base URL (``/v1``)."""
        return f"{self.url}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Return the chat requests received so far, in whichever format."""
        return [r for r in self.requests if _wire(urlsplit(r.path).path) is not None]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        """Return the embeddings requests received so far."""
        return [r for r in self.requests if r.path == EMBEDDINGS_PATH]

    def enqueue_embeddings(self, *behaviours: Behaviour) -> None:
        """Queue how the next embeddings requests are answered, in order."""
        with self._lock:
            self._embedding_queue.extend(behaviours)

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Queue how the next chat requests are answered, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    def start(self) -> StubServer:
        """Start serving; return self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and wake handlers that are waiting, so no thread outlives the test."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _counted(self, change: int) -> None:
        with self._lock:
            self.chats_in_flight += change
            self.most_chats_in_flight = max(self.most_chats_in_flight, self.chats_in_flight)

    def _next(self) -> Behaviour:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds``; return True if the stub is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def _wait_for(self, event: threading.Event) -> bool:
        """Wait until ``event`` is set; return True if the stub is stopping first."""
        while not event.wait(0.05):
            if self._stopping.is_set():
                return True
        return self._stopping.is_set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of workers' calls may connect at once
    stub: StubServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that give up (timeouts, size caps) close their end; that is the point of
        # those tests, not a failure of the stub.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- routing -----------------------------------------------------------------------

    def do_GET(self) -> None:
        stub = self.server.stub
        stub._record(RecordedRequest("GET", self.path, self._headers()))
        if self.path == "/api/tags":
            models = [{"name": m, "model": m, "size": 1, "digest": "0" * 12} for m in stub.models]
            self._send_json(200, {"models": models})
        elif self.path == "/v1/models":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "library"}
                for m in stub.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        stub._record(
            RecordedRequest(
                "POST", self.path, self._headers(), body, payload, self.client_address[1]
            )
        )
        if self.path == EMBEDDINGS_PATH:
            self._embeddings(payload)
            return
        parts = urlsplit(self.path)
        wire = _wire(parts.path)
        if wire is None:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        stub._counted(+1)
        try:
            self._chat(
                stub, payload, wire, streaming=wire.streaming(parts.path, parts.query, payload)
            )
        finally:
            stub._counted(-1)

    def _chat(self, stub: StubServer, payload: Any, wire: Any, *, streaming: bool) -> None:
        behaviour = stub._next()
        if stub._wait(behaviour.delay_s):
            return
        if behaviour.gate is not None and stub._wait_for(behaviour.gate):
            return
        model = behaviour.model or wire.model(self.path, payload) or "stub-model"
        try:
            if behaviour.kind == "hang_up":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif behaviour.kind == "raw":
                self._send_raw(behaviour)
            elif behaviour.kind == "error":
                self._send_error(behaviour, wire)
            elif behaviour.kind == "sse":
                self._send_chunked(
                    behaviour, [e.encode() for e in behaviour.events], "text/event-stream"
                )
            elif streaming and not behaviour.tool_calls:
                self._send_chunked(
                    behaviour, wire.stream(behaviour, model, payload), "text/event-stream"
                )
            else:
                body = json.dumps(wire.answer(behaviour, model)).encode()
                if behaviour.interval_s or behaviour.stall_s:
                    pieces: list[Piece] = [body[i : i + 16] for i in range(0, len(body), 16)]
                    pieces.insert(len(pieces) - 1, STALL)
                    self._send_chunked(behaviour, pieces, "application/json")
                else:
                    self._send_bytes(200, body, "application/json")
        except OSError:
            # The client hung up first (its deadline or size cap): expected in those tests.
            self.close_connection = True

    def _embeddings(self, payload: Any) -> None:
        stub = self.server.stub
        with stub._lock:
            behaviour = stub._embedding_queue.popleft() if stub._embedding_queue else reply()
        if stub._wait(behaviour.delay_s):
            return
        try:
            if behaviour.kind == "hang_up":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif behaviour.kind == "raw":
                self._send_raw(behaviour)
            elif behaviour.kind == "error":
                self._send_error(behaviour, OpenAIWire())
            else:
                texts = (payload or {}).get("input") or []
                texts = [texts] if isinstance(texts, str) else texts
                data = [
                    {"object": "embedding", "index": i, "embedding": stub.embedder(text)}
                    for i, text in enumerate(texts)
                ]
                model = (payload or {}).get("model") or "stub-embedder"
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                self._send_json(
                    200, {"object": "list", "data": data, "model": model, "usage": usage}
                )
        except OSError:
            self.close_connection = True

    # -- writing -----------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {key.lower(): value for key, value in self.headers.items()}

    def _send_json(self, status: int, data: Any) -> None:
        self._send_bytes(status, json.dumps(data).encode(), "application/json")

    def _send_bytes(
        self, status: int, body: bytes, content_type: str, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        keep_alive = self.server.stub.keep_alive
        if not keep_alive:
            self.send_header("Connection", "close")
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = not keep_alive

    def _send_raw(self, behaviour: Behaviour) -> None:
        self._send_bytes(
            behaviour.status, behaviour.body, behaviour.content_type, behaviour.headers
        )

    def _send_error(self, behaviour: Behaviour, wire: Any) -> None:
        body = json.dumps(wire.error(behaviour)).encode()
        self._send_bytes(behaviour.status, body, "application/json", behaviour.headers)

    def _send_chunked(
        self, behaviour: Behaviour, pieces: Iterable[Piece], content_type: str
    ) -> None:
        stub = self.server.stub
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        first = True
        for piece in pieces:
            if piece is STALL:
                if stub._wait(behaviour.stall_s):
                    return
                continue
            if piece is HOLD:
                if behaviour.hold is not None and stub._wait_for(behaviour.hold):
                    return
                continue
            if piece is CUT:
                # Dropped mid-body: no closing chunk, as a server that dies sends none.
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            assert not isinstance(piece, Mark)
            if not first and stub._wait(behaviour.interval_s):
                return
            first = False
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def stub_embedding(text: str) -> list[float]:
    """Return the text's lowercased words hashed into 16 buckets, scaled to length 1."""
    vector = [0.0] * STUB_EMBEDDING_DIMENSIONS
    for word in text.lower().split():
        vector[zlib.crc32(word.encode()) % STUB_EMBEDDING_DIMENSIONS] += 1.0
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def _wire(path: str) -> Any:
    """Return the wire format of a chat route, or None for any other path."""
    return next((wire for wire in WIRES if wire.matches(path)), None)


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    """Yield a running StubServer, stopped after the test."""
    with StubServer() as server:
        yield server
