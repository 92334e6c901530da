"""A small OTLP/HTTP trace receiver on 127.0.0.1: it accepts `POST /v1/traces` (protobuf,
gzip or not), decodes each body as an `ExportTraceServiceRequest` and keeps the spans.

In a test it runs in a thread (`with OtlpReceiver() as receiver:`); the benchmarks run it as a
process of its own, as a collector would be (`with receiver_process() as endpoint:`, which runs
`python -m tests.runner.otlp_receiver`: it prints its port, then serves; `GET /count` answers
the number of spans received, `spans_received(endpoint)` asks it).
"""

from __future__ import annotations

import contextlib
import gzip
import subprocess
import sys
import threading
import urllib.request
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACES_PATH = "/v1/traces"


def value_of(value: AnyValue) -> Any:
    """Return an OTLP attribute value as Python (arrays as lists)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def attributes_of(span: Span) -> dict[str, Any]:
    """Return a received span's attributes as a dict."""
    return {a.key: value_of(a.value) for a in span.attributes}


class OtlpReceiver:
    """Receive OTLP/HTTP trace exports on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                with receiver.lock:
                    receiver.requests += 1
                    for resource_spans in request.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            receiver.spans.extend(scope_spans.spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:
                if self.path != "/count":
                    self.send_error(404)
                    return
                with receiver.lock:
                    answer = str(len(receiver.spans)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests and the benchmark read the spans, not the log

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def received(self) -> list[Span]:
        """Return a copy of the spans received so far."""
        with self.lock:
            return list(self.spans)


@contextlib.contextmanager
def receiver_process() -> Iterator[str]:
    """Run the receiver in a process of its own; yield its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.runner.otlp_receiver"],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError("the OTLP receiver did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def spans_received(endpoint: str) -> int:
    """Ask the receiver process at `endpoint` how many spans it has received."""
    with urllib.request.urlopen(f"{endpoint}/count", timeout=10) as answer:
        return int(answer.read())


def main() -> None:
    """Serve until stopped, after printing the port on the first line of standard output."""
    with OtlpReceiver() as receiver:
        print(receiver.port, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
