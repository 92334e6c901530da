"""Print the delay from a step's commit to its events' arrival at a websocket client.

    .venv/bin/python benchmarks/ws_latency.py [--events 200]

Needs PostgreSQL and Redis (defaults: postgres://postgres@127.0.0.1:5432/postgres to create a
scratch database `branchline_bench_ws`, dropped afterwards; REDIS_URL=redis://127.0.0.1:6379/0;
override with BENCH_POSTGRES_URL and REDIS_URL).

The path measured is the production one: this process commits run steps the way a worker does
(the runner's own claim, execute and commit, on a 10-step scripted recipe), `runner.events`
publishes each commit's events to Redis (a blocking PUBLISH after the commit), a real ASGI server (daphne,
a separate process) receives them on its channel layer and its consumer sends them down the
websocket to a client in this process. The commit is stamped by an on-commit callback registered
before the events' own; the arrival when a websocket client, in a process of its own as a
browser would be, receives the message (perf_counter is the machine's monotonic clock, shared by
its processes). The client is the `websockets` library (requirements-bench.txt). The
runs are driven here rather than through Celery so that both stamps come from this process.

Target: p95 under 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_app import run_here_stamping_commits, scratch_django, served  # noqa: E402

TARGET_P95_MS = 10.0
DATABASE = "branchline_bench_ws"
STEPS = 10
WARMUP_RUNS = 2
REPLY = "The keeper lit the lamp, and the ships came home safely through the storm that night."


def recipe_document() -> dict[str, Any]:
    from tests.factories import chain_document

    broken = {
        "name": "broken",
        "priority": 1,
        "when": {"type": "pattern_match", "operator": "regex_match", "value": "(error|failed)"},
        "action": "END_RECIPE",
        "target": "@end",
    }
    return chain_document(
        slug="bench-ws",
        name="Benchmark: websocket latency",
        actor="bench-ws-writer",
        steps=STEPS,
        branches=[broken],
    )


# --- the websocket client (its own process, like a browser) -----------------------------------


def client_main(port: int, cookie: str) -> None:
    """Follow the runs named on stdin; print each run's arrival stamps as one JSON line.

    A separate process, so that the stamps are not held up by the GIL of the process committing
    the steps. perf_counter is CLOCK_MONOTONIC on Linux: one clock for every process here.
    """
    from websockets.asyncio.client import connect

    async def follow(run_id: int) -> dict[int, float]:
        async with connect(
            f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
            origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
        ) as websocket:
            while json.loads(await websocket.recv())["type"] != "replayed":
                pass
            print("ready", flush=True)
            arrivals: dict[int, float] = {}
            async for frame in websocket:
                arrived = time.perf_counter()
                for event in json.loads(frame).get("events", []):
                    arrivals.setdefault(event["seq"], arrived)
                    if event["type"] == "run.finished":
                        return arrivals
        return arrivals

    for line in sys.stdin:
        print(json.dumps(asyncio.run(follow(int(line)))), flush=True)


class Client:
    """Drive the client process: follow a run, then collect its arrival stamps."""

    def __init__(self, port: int, cookie: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--client", str(port), cookie],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def follow(self, run_id: int) -> None:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(f"{run_id}\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the websocket client could not follow the run")

    def arrivals(self) -> dict[int, float]:
        assert self.process.stdout
        return {int(seq): t for seq, t in json.loads(self.process.stdout.readline()).items()}

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=10)


# --- the measurement --------------------------------------------------------------------------


def measure(port: int, wanted: int) -> list[float]:
    from django.test import Client as HttpClient

    from runner import advance, services
    from tests.factories import ActorFactory, UserFactory
    from workflows.services import recipe_import, recipe_publish

    user = UserFactory(username="bench")
    ActorFactory(name="bench-ws-writer", config={"replies": [REPLY]})
    recipe = recipe_import(user=user, data=recipe_document()).recipe
    recipe_publish(recipe=recipe, user=user)
    http = HttpClient()
    http.force_login(user)
    client = Client(port, f"sessionid={http.cookies['sessionid'].value}")

    commits = run_here_stamping_commits()

    delays: list[float] = []
    runs = 0
    try:
        while len(delays) < wanted:
            run = services.run_start(user=user, recipe=recipe, inputs={"topic": "storms"})
            commits.clear()  # the run.queued commit happened before the client joined
            client.follow(run.pk)
            advance.advance(run.pk, time_slice=3600)
            arrivals = client.arrivals()
            runs += 1
            if runs > WARMUP_RUNS:
                delays += [(arrivals[seq] - t) * 1000 for seq, t in sorted(commits.items())]
    finally:
        client.close()
    return delays[:wanted]


def report(delays: list[float]) -> bool:
    p95 = statistics.quantiles(delays, n=100, method="inclusive")[94]
    print(f"commit -> websocket arrival, {len(delays)} step commits ({STEPS}-step scripted runs)")
    print("  path: PostgreSQL commit -> Redis pub/sub -> daphne consumer -> websocket client")
    print(f"  median {statistics.median(delays):6.2f} ms")
    print(f"  p95    {p95:6.2f} ms")
    print(f"  max    {max(delays):6.2f} ms")
    passed = p95 < TARGET_P95_MS
    comparison = "<" if passed else ">="
    print(f"{'PASS' if passed else 'FAIL'}: p95 {p95:.2f} ms {comparison} {TARGET_P95_MS:g} ms")
    return passed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=200, help="step commits to measure")
    parser.add_argument("--client", nargs=2, metavar=("PORT", "COOKIE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(int(args.client[0]), args.client[1])
        return

    with scratch_django(DATABASE), served() as server:
        delays = measure(server.port, args.events)
    sys.exit(0 if report(delays) else 1)


if __name__ == "__main__":
    main()
