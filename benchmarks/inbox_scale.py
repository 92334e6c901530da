"""Print how fast the reviewers' lists answer with 10,000 open tasks.

    .venv/bin/python benchmarks/inbox_scale.py [--tasks 10000] [--requests 50] [--material 350]

Needs PostgreSQL and Redis (defaults: postgres://postgres@127.0.0.1:5432/postgres to create a
scratch database `branchline_bench_inbox`, dropped afterwards; REDIS_URL=redis://127.0.0.1:6379/0;
override with BENCH_POSTGRES_URL and REDIS_URL).

The set-up parks `--tasks` runs on a human step of one reviewer group, each with its open task
(three bulk INSERTs: the rows the runner leaves when a run waits for a reviewer), and starts the
app in daphne, a process of its own, as ws_latency.py does. Each task's material to review is
`--material` characters: by default about what real tasks held when 2,000 of them made a 1.2 MB
API answer (some 600 bytes a task, 350 of them its material). A member of the group then asks, one
request at a time over one keep-alive connection:
- `GET /api/tasks/`, the API's first page of the caller's open tasks;
- `GET /inbox/`, the inbox page: the open count and the oldest tasks;
- `/ws/reviews/`, from the opening handshake to its first message (the count and the first
  page), with the `websockets` client (requirements-bench.txt), a new connection each time.
It prints p50 and p95 of each, and the size of what each returned. In this process it also times
the queries behind the live count: the fingerprint of the group's open tasks (one per catch-up
round every 2 s, and one per change, shared by the inboxes of a server).

Targets: each p50 under 100 ms, each page under 200 KB.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_app import scratch_django, served  # noqa: E402

TARGET_P50_MS = 100.0
TARGET_BYTES = 200 * 1024
DATABASE = "branchline_bench_inbox"
WARMUP = 3
STORY = (
    "The storm knocked twice before the keeper opened the door. It asked for tea and a dry "
    "chair, and told her of the ships it had carried home through the winter, one by one, "
    "and of the lamp it had watched from the sea for a hundred years. "
)


def material(chars: int) -> str:
    """Return `chars` characters of a story, for a reviewer to read."""
    return (STORY * (chars // len(STORY) + 1))[:chars]


# --- set-up ---------------------------------------------------------------------------------


def park_tasks(count: int, material_chars: int) -> tuple[str, int]:
    """Park `count` runs on a human step of one group; return a member's session cookie and
    the group's id."""
    from django.db import connection
    from django.test import Client as HttpClient

    from tests.factories import ActorFactory, GroupFactory, UserFactory, chain_document
    from tests.runner.open_tasks import park_runs
    from workflows.services import recipe_import, recipe_publish

    owner = UserFactory(username="bench-owner")
    reviewer = UserFactory(username="bench-reviewer")
    group = GroupFactory(name="bench-reviewers")
    reviewer.groups.add(group)
    ActorFactory(name="bench-inbox-writer")
    document = chain_document(slug="bench-inbox", actor="bench-inbox-writer", steps=1, branches=[])
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    started = time.perf_counter()
    park_runs(recipe, owner, group, count, material=material(material_chars))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would soon after such an insert
    print(f"parked {count} runs on a human step in {time.perf_counter() - started:.1f} s")
    http = HttpClient()
    http.force_login(reviewer)
    return f"sessionid={http.cookies['sessionid'].value}", group.pk


# --- the measurements -------------------------------------------------------------------------


def time_gets(port: int, cookie: str, path: str, requests: int) -> tuple[list[float], int]:
    """GET `path` `requests` times over one keep-alive connection; return the times (ms) and
    the size of the last body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times: list[float] = []
    size = 0
    for i in range(WARMUP + requests):
        started = time.perf_counter()
        conn.request("GET", path, headers={"Cookie": cookie})
        response = conn.getresponse()
        body = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
        if i >= WARMUP:
            times.append(elapsed)
        size = len(body)
    conn.close()
    return times, size


def time_first_messages(port: int, cookie: str, requests: int) -> tuple[list[float], int, int]:
    """Open /ws/reviews/ `requests` times; return the times (ms) from the handshake to the
    first message, the size of the last one and the count it gave."""
    import json

    from websockets.asyncio.client import connect

    async def once() -> tuple[float, str]:
        started = time.perf_counter()
        async with connect(
            f"ws://127.0.0.1:{port}/ws/reviews/",
            origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            max_size=None,
        ) as websocket:
            frame = await websocket.recv()
            return (time.perf_counter() - started) * 1000, str(frame)

    async def run() -> tuple[list[float], int, int]:
        times: list[float] = []
        frame = ""
        for i in range(WARMUP + requests):
            elapsed, frame = await once()
            if i >= WARMUP:
                times.append(elapsed)
        message = json.loads(frame)
        if message.get("type") != "tasks":
            raise SystemExit(f"/ws/reviews/ began with {frame[:300]}")
        return times, len(frame.encode()), message["count"]

    return asyncio.run(run())


def time_calls(call: Callable[[], Any], requests: int) -> list[float]:
    times = []
    for i in range(WARMUP + requests):
        started = time.perf_counter()
        call()
        if i >= WARMUP:
            times.append((time.perf_counter() - started) * 1000)
    return times


def measure(port: int, cookie: str, group_id: int, requests: int) -> list[tuple[str, Any]]:
    from runner.consumers import _read_fingerprints

    results: list[tuple[str, Any]] = []
    for label, path in (("GET /api/tasks/", "/api/tasks/"), ("GET /inbox/", "/inbox/")):
        results.append((label, time_gets(port, cookie, path, requests)))
    times, size, count = time_first_messages(port, cookie, requests)
    results.append((f"/ws/reviews/ first message (count {count})", (times, size)))
    fingerprint = time_calls(lambda: _read_fingerprints([group_id]), requests)
    results.append(("open-task fingerprint query (catch-up, live count)", (fingerprint, None)))
    return results


def report(results: list[tuple[str, Any]]) -> bool:
    passed = True
    print(f"{'':52} {'p50':>9} {'p95':>9} {'size':>10}")
    for label, (times, size) in results:
        p50 = statistics.median(times)
        p95 = statistics.quantiles(times, n=100, method="inclusive")[94]
        shown = "" if size is None else f"{size / 1024:7.1f} KB"
        print(f"{label:52} {p50:6.2f} ms {p95:6.2f} ms {shown:>10}")
        if size is None:
            continue  # a query, not something a client asks for: printed, not judged
        ok = p50 < TARGET_P50_MS and size < TARGET_BYTES
        passed = passed and ok
        verdict = "PASS" if ok else "FAIL"
        print(
            f"  {verdict}: p50 {p50:.2f} ms (target < {TARGET_P50_MS:g} ms), "
            f"{size / 1024:.1f} KB (target < {TARGET_BYTES // 1024} KB)"
        )
    print("PASS" if passed else "FAIL")
    return passed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="open tasks to park")
    parser.add_argument("--requests", type=int, default=50, help="timed requests of each kind")
    parser.add_argument(
        "--material", type=int, default=350, help="characters of each task's material"
    )
    args = parser.parse_args()

    with scratch_django(DATABASE):
        cookie, group_id = park_tasks(args.tasks, args.material)
        with served() as server:
            results = measure(server.port, cookie, group_id, args.requests)
    print(
        f"{args.tasks} open tasks of one reviewer group ({args.material} characters of material "
        f"each), {args.requests} requests of each kind"
    )
    sys.exit(0 if report(results) else 1)


if __name__ == "__main__":
    main()
