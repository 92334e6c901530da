"""Print how many LLM steps the deployed runner keeps in flight at once, next to LangGraph's.

    .venv/bin/python benchmarks/inflight.py [--runs 100] [--steps 3] [--delay 1] [--clients 20]
        [--batch 1]
        [--workers 1] [--worker-args "--pool threads --concurrency 100"] [--skip-langgraph]
        [--trace]

A model stub on loopback (an OpenAI-compatible `POST /v1/chat/completions`, plain and streamed,
in a process of its own on asyncio) answers every call after `--delay` D seconds, however many
are in flight, and counts the most in flight at one moment. A recipe of `--steps` S LLM steps in
sequence calls it. The app runs as the README's production topology: daphne
(`config.asgi`, EMBEDDED_WORKER=0) and `--workers` separate `celery -A config worker -l warning`
processes (plus `--worker-args`), on a scratch PostgreSQL database and Redis. `--clients`
concurrent HTTP clients (threads, keep-alive, token auth) start `--runs` N runs through
`POST /api/recipes/{slug}/runs` (or, with `--batch` K above 1, K runs a request through
`POST /api/recipes/{slug}/runs/batch`), then the database is polled until every run has ended.

With enough steps in flight, N runs take about S x D however large N is; a worker that runs one
step at a time per pool process needs about N x S x D / processes. Printed: the wall time (the
first start request to the last run's `finished_at`), the ideal S x D and their ratio, the
starts' time and rate, the most calls in flight at the stub, and, sampled every 0.2 s, the peak
PostgreSQL sessions of the workers and of daphne (by `application_name`, PGAPPNAME
branchline-worker and branchline-web) and the peak memory of the workers (VmRSS summed over
each worker and its children; PSS beside it, which counts pages that forked children share
once). One warm-up run goes first and is not counted. With `--trace`, the app traces its runs to
an OTLP/HTTP receiver in a process of its own (tests/runner/otlp_receiver.py), and the spans it
received are counted.

Then (unless --skip-langgraph) the same N x S calls in LangGraph with its async executor, in a
subprocess of this script (`--langgraph-only`, printing JSON) so that its memory and CPU are its
own: a StateGraph of S `async def` nodes in sequence, each streaming the same call through one
shared `openai.AsyncOpenAI`, checkpointed with `durability="sync"` by AsyncPostgresSaver on a
psycopg AsyncConnectionPool of 20 connections to a second scratch database, N graphs at once
under `asyncio.gather`. Its wall, peak memory (VmRSS, sampled as the workers'), CPU, most calls
in flight and PostgreSQL sessions are printed, and the ratio of the walls. (The pool keeps its 20
sessions open; AsyncPostgresSaver itself runs one query at a time, under an asyncio.Lock.)

Needs PostgreSQL (BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres: the
scratch databases branchline_bench_inflight and branchline_bench_inflight_lg are made next to it
and dropped afterwards) and Redis (REDIS_URL, default redis://127.0.0.1:6379/13; its Celery
queue is purged before and after). Exit status 0 when every start answered 201 and every run
of both succeeded, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import itertools
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_app import scratch_django  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402
from tests.runner.otlp_receiver import receiver_process, spans_received  # noqa: E402

DATABASE = "branchline_bench_inflight"
CHECKPOINT_DATABASE = "branchline_bench_inflight_lg"
ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"
WORKER_APP, WEB_APP, LANGGRAPH_APP = "branchline-worker", "branchline-web", "langgraph-bench"
SAMPLE_EVERY_S = 0.2
LANGGRAPH_POOL_SIZE = 20
ACTOR = "bench-stub"
SLUG = "bench-inflight"
REPLY = "The keeper lit the lamp and the ships came home."
STREAM_WRITE_EVERY_S = 0.02  # how often a streamed answer is written


# --------------------------------------------------------------------------------------------
# The model stub (`--serve-stub`: a process of its own)


class StubModel:
    """An OpenAI-compatible chat completions endpoint that answers each call after `delay` s.

    HTTP/1.1 with keep-alive on `asyncio.start_server`: `POST /v1/chat/completions` (a JSON
    answer, or SSE in chunked encoding when `stream` is true), `GET /stats` (calls, in flight,
    the most in flight at once) and `POST /stats/reset`.
    """

    def __init__(self, delay: float, tokens: int) -> None:
        self.delay = delay
        self.tokens = tokens
        self.calls = self.in_flight = self.peak = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self.answer_one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client closed the connection (between requests, as a rule)
        except asyncio.CancelledError:
            pass  # the stub is stopping with clients still connected: end quietly
        finally:
            writer.close()

    async def answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; return whether the connection stays open."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *lines = head.split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length") or 0))
        keep_alive = headers.get("connection", "").lower() != "close"
        if method == "POST" and path.endswith("/chat/completions"):
            await self.complete(json.loads(body), writer, keep_alive)
        elif path.startswith("/stats"):
            if method == "POST":
                self.calls = self.peak = 0
            stats = {"calls": self.calls, "in_flight": self.in_flight, "peak": self.peak}
            writer.write(http_response("200 OK", "application/json", json.dumps(stats).encode()))
        else:
            writer.write(http_response("404 Not Found", "text/plain", b"not found"))
        await writer.drain()
        return keep_alive

    async def complete(
        self, request: dict[str, Any], writer: asyncio.StreamWriter, keep_alive: bool
    ) -> None:
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            streamed = bool(request.get("stream")) and self.tokens > 1
            # A streamed answer of many tokens: the first after half the delay, the rest
            # spread over the other half, as a model writes them.
            await asyncio.sleep(self.delay / 2 if streamed else self.delay)
            prompt = str(request["messages"][-1]["content"])
            usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(REPLY.split())}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            answer = {
                "id": f"chatcmpl-stub-{self.calls}",
                "created": int(time.time()),
                "model": request.get("model", "stub"),
            }
            if streamed:
                await self.stream_tokens(answer, writer, keep_alive)
            elif request.get("stream"):
                writer.write(sse_response(answer, usage, keep_alive))
            else:
                message = {"role": "assistant", "content": REPLY}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                answer |= {"object": "chat.completion", "choices": [choice], "usage": usage}
                body = json.dumps(answer).encode()
                writer.write(http_response("200 OK", "application/json", body, keep_alive))
            await writer.drain()
        finally:
            self.in_flight -= 1

    async def stream_tokens(
        self, answer: dict[str, Any], writer: asyncio.StreamWriter, keep_alive: bool
    ) -> None:
        """Stream `tokens` one-word deltas over half the delay, in writes every 20 ms."""
        chunk = {**answer, "object": "chat.completion.chunk"}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": {"content": piece}}]}
            for piece in streamed_pieces(self.tokens)
        ]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        usage = {"prompt_tokens": 10, "completion_tokens": self.tokens}
        events.append({**chunk, "choices": [], "usage": usage})
        datas = [f"data: {json.dumps(event)}\n\n".encode() for event in events]
        datas.append(b"data: [DONE]\n\n")
        writer.write(sse_head(keep_alive))
        writes = max(1, round(self.delay / 2 / STREAM_WRITE_EVERY_S))
        per_write = -(-len(datas) // writes)  # rounded up
        for start in range(0, len(datas), per_write):
            await asyncio.sleep(STREAM_WRITE_EVERY_S)
            writer.write(b"".join(chunked(data) for data in datas[start : start + per_write]))
            await writer.drain()
        writer.write(b"0\r\n\r\n")


def streamed_pieces(tokens: int) -> list[str]:
    """The deltas of an answer streamed in `tokens` pieces: REPLY's words, over and over."""
    words = REPLY.split()
    return [(" " if i else "") + words[i % len(words)] for i in range(tokens)]


def expected_reply(tokens: int) -> str:
    """The answer a step gets from the stub."""
    return "".join(streamed_pieces(tokens)) if tokens > 1 else REPLY


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_head(keep_alive: bool) -> bytes:
    connection = "keep-alive" if keep_alive else "close"
    return (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        f"Transfer-Encoding: chunked\r\nConnection: {connection}\r\n\r\n"
    ).encode()


def http_response(status: str, content_type: str, body: bytes, keep_alive: bool = True) -> bytes:
    connection = "keep-alive" if keep_alive else "close"
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {connection}\r\n\r\n"
    )
    return head.encode() + body


def sse_response(answer: dict[str, Any], usage: dict[str, int], keep_alive: bool) -> bytes:
    """The streamed answer: the reply in one delta, the finish, the usage, then [DONE]."""
    chunk = {**answer, "object": "chat.completion.chunk"}
    delta = {"role": "assistant", "content": REPLY}
    events = [
        {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**chunk, "choices": [], "usage": usage},
    ]
    datas = [f"data: {json.dumps(event)}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]
    return sse_head(keep_alive) + b"".join(chunked(data) for data in datas) + b"0\r\n\r\n"


async def serve_stub(delay: float, tokens: int) -> None:
    """Serve the stub on a free loopback port, print the port, serve until stdin closes."""
    stub = StubModel(delay, tokens)
    server = await asyncio.start_server(stub.handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


class StubProcess:
    """The stub in a subprocess (`--serve-stub`), so that it never waits on this one's GIL."""

    def __init__(self, delay: float, tokens: int) -> None:
        self.delay, self.tokens = delay, tokens

    def __enter__(self) -> StubProcess:
        command = [sys.executable, __file__, "--serve-stub", "--delay", str(self.delay)]
        command += ["--tokens", str(self.tokens)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the model stub did not start")
        self.port = int(line)
        return self

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stats(self, *, reset: bool = False) -> dict[str, int]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("POST" if reset else "GET", "/stats")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the stub ends when its stdin closes
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


# --------------------------------------------------------------------------------------------
# Processes: their trees, memory and CPU, and the sampler


def process_tree(roots: Sequence[int]) -> list[int]:
    """Return `roots` and every process descending from them (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def status_kb(path: Path, field_name: str) -> int:
    """Return a `Name:   1234 kB` field of /proc/PID/status or smaps_rollup, 0 when gone."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def tree_memory_mb(roots: Sequence[int]) -> tuple[float, float]:
    """Return the VmRSS and the PSS of the processes under `roots`, summed, in MB."""
    pids = process_tree(roots)
    rss = sum(status_kb(Path(f"/proc/{pid}/status"), "VmRSS") for pid in pids)
    pss = sum(status_kb(Path(f"/proc/{pid}/smaps_rollup"), "Pss") for pid in pids)
    return rss / 1024, pss / 1024


def tree_cpu_s(roots: Sequence[int]) -> float:
    """Return the CPU time (user + system, with reaped children's) of the trees under `roots`."""
    ticks = 0
    for pid in process_tree(roots):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Peaks:
    connections: dict[str, int]
    rss_mb: float = 0.0
    pss_mb: float = 0.0
    idle_rss_mb: float | None = None  # the first sample's


class Sampler:
    """Every SAMPLE_EVERY_S, in a thread: the sessions of `database` in pg_stat_activity by
    application name, and the memory of the process trees under `roots()`; keep the peaks."""

    def __init__(self, database: str, apps: Sequence[str], roots: Callable[[], list[int]]) -> None:
        self.database = database
        self.roots = roots
        self.peaks = Peaks(connections=dict.fromkeys(apps, 0))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample_until_stopped, daemon=True)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def sample_until_stopped(self) -> None:
        import psycopg

        query = (
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE datname = %s GROUP BY application_name"
        )
        with psycopg.connect(ADMIN_URL, autocommit=True, application_name="bench-sampler") as db:
            while True:
                counts = dict(db.execute(query, (self.database,)).fetchall())
                self.record(counts, *tree_memory_mb(self.roots()))
                if self.stop.wait(SAMPLE_EVERY_S):
                    return

    def record(self, counts: dict[str, int], rss_mb: float, pss_mb: float) -> None:
        peaks = self.peaks
        for app in peaks.connections:
            peaks.connections[app] = max(peaks.connections[app], counts.get(app, 0))
        if peaks.idle_rss_mb is None:
            peaks.idle_rss_mb = rss_mb
        peaks.rss_mb = max(peaks.rss_mb, rss_mb)
        peaks.pss_mb = max(peaks.pss_mb, pss_mb)


@contextlib.contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """Create the database `name` afresh next to ADMIN_URL, yield its URL, drop it on leaving."""
    import psycopg

    drop = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(drop)


# --------------------------------------------------------------------------------------------
# Branchline: the recipe, the processes, the clients


def create_rows(model_url: str, steps: int) -> str:
    """Create the user, the stub's actor and the published recipe; return the user's token."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from tests.factories import chain_document
    from workflows.models import Actor
    from workflows.services import recipe_import, recipe_publish

    user = get_user_model().objects.create_user(username="bench-inflight")
    Actor.objects.create(
        name=ACTOR,
        kind=Actor.Kind.LLM,
        provider=Actor.Provider.OPENAI,
        base_url=model_url,
        model="stub",
    )
    recipe = recipe_import(
        user=user, data=chain_document(slug=SLUG, actor=ACTOR, steps=steps, branches=[])
    ).recipe
    recipe_publish(recipe=recipe, user=user)
    return Token.objects.create(user=user).key


def app_env(application_name: str) -> dict[str, str]:
    """The environment of a daphne or worker process (os.environ is the scratch set-up's)."""
    return {**os.environ, "PGAPPNAME": application_name}


class Workers:
    """`count` separate `celery -A config worker -l warning` processes (each in a process group
    of its own), ready once each answers a ping; stopped with their pools on leaving."""

    def __init__(self, count: int, extra_args: Sequence[str], logs: Path) -> None:
        self.names = [f"inflight{i}-{os.getpid()}" for i in range(count)]
        self.extra_args = list(extra_args)
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def __enter__(self) -> Workers:
        from config.celery import app

        try:
            for name in self.names:
                command = [sys.executable, "-m", "celery", "-A", "config", "worker"]
                command += ["-l", "warning", "-n", f"{name}@%h", *self.extra_args]
                with (self.logs / f"{name}.log").open("ab") as log:
                    self.processes.append(
                        subprocess.Popen(
                            command,
                            cwd=ROOT,
                            env=app_env(WORKER_APP),
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
            waiting = {f"{name}@{socket.gethostname()}" for name in self.names}
            deadline = time.monotonic() + 90
            while waiting:
                for reply in app.control.ping(destination=sorted(waiting), timeout=0.5):
                    waiting -= set(reply)
                exited = any(process.poll() is not None for process in self.processes)
                if exited or time.monotonic() > deadline:
                    raise RuntimeError(f"a Celery worker did not start: see {self.logs}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextlib.contextmanager
def purged_queue() -> Iterator[None]:
    """Purge the Celery queue before and after (messages of runs of an earlier database)."""
    from config.celery import app

    app.control.purge()
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            app.control.purge()


@dataclass
class Starts:
    began: float  # time.time() of the first request
    seconds: float
    latencies: list[float] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)  # "status: body" -> how many


class Starter:
    """Start runs through the API from `clients` threads, each on a keep-alive connection."""

    def __init__(self, port: int, token: str, clients: int, batch: int = 1) -> None:
        self.port = port
        self.clients = clients
        self.batch = batch
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.local = threading.local()
        self.connections: list[http.client.HTTPConnection] = []

    def connection(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self.connections.append(conn)
        return conn

    def start(self, labels: Sequence[str]) -> tuple[int, str, float]:
        """POST one run start (or, for several labels, one batch of them); return its status,
        body and latency. The Idempotency-Key makes the one retry (the connection closed under
        it) safe."""
        items = [{"inputs": {"topic": f"lighthouse {label}"}} for label in labels]
        if len(labels) == 1:
            path, body = f"/api/recipes/{SLUG}/runs", json.dumps(items[0])
        else:
            path, body = f"/api/recipes/{SLUG}/runs/batch", json.dumps({"runs": items})
        headers = {**self.headers, "Idempotency-Key": f"bench-inflight-{labels[0]}"}
        began = time.perf_counter()
        for attempt in (1, 2):
            conn = self.connection()
            try:
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                text = response.read().decode(errors="replace")
            except (http.client.HTTPException, OSError) as exc:
                conn.close()  # reconnects at the next request
                if attempt == 2:
                    return 0, repr(exc), time.perf_counter() - began
                continue
            if response.will_close:
                conn.close()
            return response.status, text, time.perf_counter() - began
        raise AssertionError("unreachable")

    def start_all(self, labels: Sequence[str]) -> Starts:
        began, t0 = time.time(), time.perf_counter()
        groups = [labels[i : i + self.batch] for i in range(0, len(labels), self.batch)]
        with ThreadPoolExecutor(self.clients) as pool:
            answers = list(pool.map(self.start, groups))
        starts = Starts(began=began, seconds=time.perf_counter() - t0)
        for status, text, latency in answers:
            starts.latencies.append(latency)
            if status != 201:
                starts.refused[f"{status}: {text[:300]}"] += 1
        return starts

    def close(self) -> None:
        for conn in self.connections:
            conn.close()


def wait_ended(exclude: Sequence[int], timeout: float) -> tuple[Counter[str], bool]:
    """Poll until every run (but those in `exclude`) has ended; return the counts by status and
    whether they all ended in time."""
    from django.db.models import Count

    from runner.models import Run
    from runner.status import TERMINAL

    deadline = time.monotonic() + timeout
    while True:
        runs = Run.objects.exclude(pk__in=exclude).order_by()
        counts = Counter(dict(runs.values_list("status").annotate(n=Count("id"))))
        if not set(counts) - TERMINAL:
            return counts, True
        if time.monotonic() > deadline:
            return counts, False
        time.sleep(SAMPLE_EVERY_S)


@dataclass
class Branchline:
    starts: Starts
    statuses: Counter[str]
    ended: bool
    wall: float
    run_walls: list[float]
    errors: list[tuple[int, str, str]]
    stub: dict[str, int]
    peaks: Peaks
    cpu_s: float
    spans: int = 0  # received over OTLP (--trace)


def run_branchline(args: argparse.Namespace, stub: StubProcess, logs: Path) -> Branchline:
    from runner.models import Run

    token = create_rows(f"http://{stub.host_port}/v1", args.steps)
    with (
        purged_queue(),
        LiveServer(app_env(WEB_APP), log=logs / "daphne.log", verbosity=0) as server,
        Workers(args.workers, shlex.split(args.worker_args), logs) as workers,
    ):
        starter = Starter(server.port, token, args.clients, args.batch)
        try:
            warmup = starter.start_all(["warmup"])
            if warmup.refused:
                raise RuntimeError(f"the warm-up run was refused: {dict(warmup.refused)}")
            warm_ids = list(Run.objects.values_list("pk", flat=True))
            wait_ended([], timeout=args.timeout)
            stub.stats(reset=True)
            cpu_before = tree_cpu_s(workers.pids)
            with Sampler(DATABASE, [WORKER_APP, WEB_APP], lambda: workers.pids) as sampler:
                starts = starter.start_all([str(i) for i in range(args.runs)])
                statuses, ended = wait_ended(warm_ids, timeout=args.timeout)
            cpu_s = tree_cpu_s(workers.pids) - cpu_before
        finally:
            starter.close()
    runs = list(Run.objects.exclude(pk__in=warm_ids))
    finished = [run.finished_at.timestamp() for run in runs if run.finished_at]
    return Branchline(
        starts=starts,
        statuses=statuses,
        ended=ended,
        wall=(max(finished) if finished else time.time()) - starts.began,
        run_walls=[(r.finished_at - r.created_at).total_seconds() for r in runs if r.finished_at],
        errors=[(r.pk, r.status, r.error) for r in runs if r.status != "succeeded"],
        stub=stub.stats(),
        peaks=sampler.peaks,
        cpu_s=cpu_s,
    )


# --------------------------------------------------------------------------------------------
# LangGraph (`--langgraph-only`: a subprocess of its own)


class GraphState(TypedDict):
    topic: str
    replies: list[str]


def build_graph(client: Any, steps: int) -> Any:
    """S async nodes in sequence, each streaming one call of the stub, as a Branchline step."""
    from langgraph.graph import END, START, StateGraph

    def node(n: int) -> Callable[[GraphState], Any]:
        async def call_model(state: GraphState) -> dict[str, list[str]]:
            stream = await client.chat.completions.create(
                model="stub",
                messages=[{"role": "user", "content": f"Step {n} about {state['topic']}"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
            return {"replies": [*state["replies"], "".join(parts)]}

        return call_model

    builder = StateGraph(GraphState)
    names = [f"s{n}" for n in range(1, steps + 1)]
    for n, name in enumerate(names, start=1):
        builder.add_node(name, node(n))
    for a, b in itertools.pairwise([START, *names, END]):
        builder.add_edge(a, b)
    return builder


async def langgraph_runs(
    runs: int, steps: int, tokens: int, model_url: str, checkpoint_url: str, stats_url: str
) -> dict[str, Any]:
    """Run `runs` graphs at once (after one warm-up); return the figures for the parent."""
    import httpx
    import openai
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    limits = httpx.Limits(max_connections=runs, max_keepalive_connections=runs)
    http_client = openai.DefaultAsyncHttpxClient(limits=limits)
    client = openai.AsyncOpenAI(base_url=model_url, api_key="x", http_client=http_client)
    # What AsyncPostgresSaver needs of its connections (see its from_conn_string).
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool = AsyncConnectionPool(
        checkpoint_url,
        min_size=LANGGRAPH_POOL_SIZE,
        max_size=LANGGRAPH_POOL_SIZE,
        kwargs=kwargs,
        open=False,
    )
    async with pool, http_client:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        graph = build_graph(client, steps).compile(checkpointer=saver)

        async def one(thread: str) -> float:
            began = time.perf_counter()
            state = await graph.ainvoke(
                {"topic": f"lighthouse {thread}", "replies": []},
                config={"configurable": {"thread_id": thread}},
                durability="sync",
            )
            if len(state["replies"]) != steps or state["replies"][-1] != expected_reply(tokens):
                raise AssertionError(f"graph {thread} ended with {state['replies']!r}")
            return time.perf_counter() - began

        await one("warmup")
        await http_client.post(stats_url)  # reset the stub's counts after the warm-up
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        results = await asyncio.gather(*(one(str(i)) for i in range(runs)), return_exceptions=True)
        wall = time.perf_counter() - began
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    return {
        "wall": wall,
        "run_walls": [r for r in results if isinstance(r, float)],
        "failed": len(errors),
        "errors": errors[:5],
        "cpu_s": (cpu_after.ru_utime + cpu_after.ru_stime)
        - (cpu_before.ru_utime + cpu_before.ru_stime),
        "vmhwm_mb": status_kb(Path("/proc/self/status"), "VmHWM") / 1024,
    }


@dataclass
class LangGraph:
    figures: dict[str, Any]
    stub: dict[str, int]
    peaks: Peaks


def run_langgraph(args: argparse.Namespace, stub: StubProcess) -> LangGraph:
    with scratch_database(CHECKPOINT_DATABASE) as checkpoint_url:
        command = [sys.executable, __file__, "--langgraph-only", "--runs", str(args.runs)]
        command += ["--steps", str(args.steps), "--stub-port", str(stub.port)]
        command += ["--tokens", str(args.tokens)]
        command += ["--checkpoint-url", checkpoint_url]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            env={**os.environ, "PGAPPNAME": LANGGRAPH_APP},
            start_new_session=True,
        )
        try:
            with Sampler(CHECKPOINT_DATABASE, [LANGGRAPH_APP], lambda: [process.pid]) as sampler:
                out, _ = process.communicate(timeout=args.timeout)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"the LangGraph subprocess exited with status {process.returncode}")
    return LangGraph(json.loads(out.splitlines()[-1]), stub.stats(), sampler.peaks)


# --------------------------------------------------------------------------------------------
# The report


def print_rows(title: str, rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(label) for label, _ in rows)
    print(title)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


def spread(seconds: Sequence[float]) -> str:
    if not seconds:
        return "-"
    return f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s"


def report_branchline(args: argparse.Namespace, ours: Branchline) -> bool:
    ideal = args.steps * args.delay
    starts, peaks = ours.starts, ours.peaks
    succeeded = ours.statuses.get("succeeded", 0)
    others = {status: n for status, n in ours.statuses.items() if status != "succeeded"}
    rows = [
        ("wall (first start request -> last run finished)", f"{ours.wall:.2f} s"),
        (f"ideal (S x D = {args.steps} x {args.delay:g} s)", f"{ideal:.2f} s"),
        ("wall / ideal", f"{ours.wall / ideal:.2f}x"),
        ("each run (created -> finished)", spread(ours.run_walls)),
        (
            (
                f"starts ({args.runs} POSTs from {args.clients} clients)"
                if args.batch == 1
                else f"starts ({args.runs} runs in batches of {args.batch} from {args.clients} "
                "clients)"
            ),
            f"{starts.seconds:.2f} s, {args.runs / starts.seconds:.0f}/s, "
            f"latency {spread(starts.latencies)}",
        ),
        ("starts answered other than 201", str(sum(starts.refused.values()))),
        *([("spans received over OTLP", str(ours.spans))] if args.trace else []),
        ("model calls (expected N x S)", f"{ours.stub['calls']} ({args.runs * args.steps})"),
        ("most calls in flight at the stub", str(ours.stub["peak"])),
        (f"peak PostgreSQL sessions, {WORKER_APP}", str(peaks.connections[WORKER_APP])),
        (f"peak PostgreSQL sessions, {WEB_APP}", str(peaks.connections[WEB_APP])),
        (
            "peak worker memory (VmRSS summed, idle before; PSS)",
            f"{peaks.rss_mb:.0f} MB (idle {peaks.idle_rss_mb or 0:.0f} MB); {peaks.pss_mb:.0f} MB",
        ),
        ("worker CPU during the runs (user + system)", f"{ours.cpu_s:.1f} s"),
        ("runs succeeded / not", f"{succeeded} / {sum(others.values())} {others or ''}".strip()),
    ]
    workers = f"{args.workers} celery worker process(es)"
    if args.worker_args:
        workers += f" with `{args.worker_args}`"
    streamed = f", streaming {args.tokens} tokens" if args.tokens > 1 else ""
    print_rows(
        f"Branchline: {args.runs} runs of {args.steps} LLM steps, the model answering after "
        f"{args.delay:g} s{streamed}; daphne + {workers} (load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs):",
        rows,
    )
    for answer, n in starts.refused.items():
        print(f"  refused x{n}: {answer}")
    if not ours.ended:
        print(f"  NOT ENDED within {args.timeout:g} s: {dict(ours.statuses)}")
    for pk, status, error in ours.errors[:10]:
        print(f"  run {pk} {status}: {error[:500]}")
    if len(ours.errors) > 10:
        print(f"  ... and {len(ours.errors) - 10} more runs that did not succeed")
    return ours.ended and not starts.refused and not ours.errors


def report_langgraph(args: argparse.Namespace, theirs: LangGraph, ours: Branchline) -> bool:
    figures, peaks = theirs.figures, theirs.peaks
    rows = [
        ("wall (asyncio.gather of the N graphs)", f"{figures['wall']:.2f} s"),
        ("wall / ideal", f"{figures['wall'] / (args.steps * args.delay):.2f}x"),
        ("each graph (ainvoke)", spread(figures["run_walls"])),
        ("model calls (expected N x S)", f"{theirs.stub['calls']} ({args.runs * args.steps})"),
        ("most calls in flight at the stub", str(theirs.stub["peak"])),
        (f"peak PostgreSQL sessions, {LANGGRAPH_APP}", str(peaks.connections[LANGGRAPH_APP])),
        (
            "peak memory (VmRSS; VmHWM)",
            f"{peaks.rss_mb:.0f} MB; {figures['vmhwm_mb']:.0f} MB",
        ),
        ("CPU during the runs (user + system)", f"{figures['cpu_s']:.1f} s"),
        ("graphs succeeded / failed", f"{args.runs - figures['failed']} / {figures['failed']}"),
        ("Branchline wall / LangGraph wall", f"{ours.wall / figures['wall']:.2f}x"),
    ]
    print_rows(
        f"LangGraph: the same {args.runs} x {args.steps} calls, async nodes, "
        f'AsyncPostgresSaver on a pool of {LANGGRAPH_POOL_SIZE}, durability="sync":',
        rows,
    )
    for error in figures["errors"]:
        print(f"  failed: {error[:500]}")
    return not figures["failed"]


# --------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="runs started at once (N)")
    parser.add_argument("--steps", type=int, default=3, help="LLM steps per run (S)")
    parser.add_argument("--delay", type=float, default=1.0, help="the model's answer time (D, s)")
    parser.add_argument(
        "--tokens",
        type=int,
        default=1,
        help="stream answers as this many one-word chunks over the second half of D "
        "(1: the whole reply in one chunk)",
    )
    parser.add_argument("--clients", type=int, default=20, help="concurrent HTTP clients")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="runs per start request (above 1: POST /api/recipes/{slug}/runs/batch)",
    )
    parser.add_argument("--workers", type=int, default=1, help="celery worker processes")
    parser.add_argument("--worker-args", default="", help="appended to each worker's command")
    parser.add_argument("--skip-langgraph", action="store_true", help="Branchline only")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="trace the runs: daphne and the workers export their spans over OTLP/HTTP to a "
        "receiver in a process of its own",
    )
    parser.add_argument("--timeout", type=float, default=600, help="for the runs to end (s)")
    parser.add_argument("--serve-stub", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--langgraph-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stub-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.runs, args.steps, args.clients, args.workers, args.batch) < 1 or args.delay <= 0:
        parser.error(
            "--runs, --steps, --clients, --workers and --batch must be at least 1, --delay > 0"
        )
    return args


def stop_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C, so that every clean-up runs."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def main() -> int:
    args = parse_args()
    if args.serve_stub:
        asyncio.run(serve_stub(args.delay, args.tokens))
        return 0
    if args.langgraph_only:
        stub = f"http://127.0.0.1:{args.stub_port}"
        figures = asyncio.run(
            langgraph_runs(
                args.runs,
                args.steps,
                args.tokens,
                f"{stub}/v1",
                args.checkpoint_url,
                f"{stub}/stats/reset",
            )
        )
        print(json.dumps(figures))
        return 0

    stop_on_sigterm()
    logs = Path(tempfile.mkdtemp(prefix="bench-inflight-"))
    passed = False
    try:
        with StubProcess(args.delay, args.tokens) as stub:
            # Read by the settings at django.setup(): the SSRF guard lets the stub through.
            os.environ["PROVIDER_URL_ALLOWLIST"] = stub.host_port
            os.environ.setdefault("REDIS_URL", DEFAULT_REDIS_URL)
            with contextlib.ExitStack() as tracing:
                if args.trace:  # read by daphne and the workers, which inherit os.environ
                    endpoint = tracing.enter_context(receiver_process())
                    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
                with scratch_django(DATABASE):
                    ours = run_branchline(args, stub, logs)
                if args.trace:
                    ours.spans = spans_received(endpoint)
            passed = report_branchline(args, ours)
            if not args.skip_langgraph:
                theirs = run_langgraph(args, stub)
                passed = report_langgraph(args, theirs, ours) and passed
    finally:
        if passed:
            shutil.rmtree(logs, ignore_errors=True)
        else:
            print(f"the logs of daphne and the workers: {logs}", file=sys.stderr)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
