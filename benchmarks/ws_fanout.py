"""Print the delay from a step's commit to its events' arrival at N websocket clients of one run.

    .venv/bin/python benchmarks/ws_fanout.py [--clients 100] [--processes 4] [--steps 50]
        [--delay-ms 0]

Needs PostgreSQL and Redis (`benchmarks/live_app.py`: a scratch database `branchline_bench_fanout`,
created and dropped; REDIS_URL, default redis://127.0.0.1:6379/0).

After a warm-up run, one run of `--steps` scripted steps executes back to back in this process
(each answering after `--delay-ms`, a model's latency), committed as a
worker commits them; each commit's events go through Redis to one daphne process, whose
consumers send them to `--clients` websocket clients spread over `--processes` client
processes (picows, requirements-bench.txt). Every client stamps each event's
arrival; the delay is the arrival less the commit (perf_counter: the machine's monotonic clock,
shared by its processes). Printed: p50, p95 and p99 over every client and every step commit,
the frames the clients received, and daphne's CPU time per frame (its process' user + system
time during the run, over the frames sent).

Target: p95 under 10 ms with 100 clients (with more, the figures are printed only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_app import run_here_stamping_commits, scratch_django, served  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402

DATABASE = "branchline_bench_fanout"
TARGET_P95_MS = 10.0
TARGET_CLIENTS = 100
WARMUP_RUNS = 1
REPLY = "The keeper lit the lamp, and the ships came home safely through the storm that night."


# --- the websocket clients (processes of their own, like browsers) ----------------------------


def client_main(port: int, cookie: str, count: int) -> None:
    """Open `count` sockets on each run named on stdin; print each socket's arrival stamps.

    Prints "ready" once every socket has caught up with the run, then one JSON line: a list,
    per socket, of [{seq: arrival}, frames received].

    The clients stand in for browsers, which would be on other machines: here they share the
    server's two cores, so they are picows's (a websocket client in C: a frame costs a callback,
    not a task switch), and each frame is only stamped and kept until the run is over.
    """
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_connect

    class Socket(WSListener):  # type: ignore[misc]
        def __init__(self) -> None:
            self.replayed = asyncio.get_running_loop().create_future()
            self.finished = asyncio.get_running_loop().create_future()
            self.received: list[tuple[float, str]] = []

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            arrived = time.perf_counter()
            if frame.msg_type != WSMsgType.TEXT:
                if frame.msg_type == WSMsgType.CLOSE and not self.finished.done():
                    self.finished.set_exception(RuntimeError("the server closed the socket"))
                return
            text = frame.get_payload_as_utf8_text()
            if not self.replayed.done():
                if '"replayed"' in text:
                    self.replayed.set_result(None)
                return
            self.received.append((arrived, text))
            if '"run.finished"' in text and not self.finished.done():
                self.finished.set_result(None)

        def arrivals(self) -> list[Any]:
            stamps: dict[int, float] = {}
            for arrived, text in self.received:
                for event in json.loads(text).get("events", []):
                    stamps.setdefault(event["seq"], arrived)
            return [stamps, len(self.received)]

    async def open_socket(run_id: int, gate: asyncio.Semaphore) -> tuple[WSTransport, Socket]:
        async with gate:  # a few handshakes at a time, as browsers opening a page would
            transport, socket = await ws_connect(
                Socket,
                f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
                extra_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
                websocket_handshake_timeout=60,
            )
            await asyncio.wait_for(socket.replayed, 60)
        return transport, socket

    async def follow_all(run_id: int) -> list[list[Any]]:
        gate = asyncio.Semaphore(50)
        sockets = await asyncio.gather(*(open_socket(run_id, gate) for _ in range(count)))
        print("ready", flush=True)
        await asyncio.gather(*(socket.finished for _, socket in sockets))
        for transport, _ in sockets:
            transport.disconnect()
        return [socket.arrivals() for _, socket in sockets]

    for line in sys.stdin:
        print(json.dumps(asyncio.run(follow_all(int(line)))), flush=True)


class Clients:
    """One client process: `count` sockets on the run it is given."""

    def __init__(self, port: int, cookie: str, count: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--client", str(port), cookie, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def follow(self, run_id: int) -> None:
        assert self.process.stdin
        self.process.stdin.write(f"{run_id}\n")
        self.process.stdin.flush()

    def wait_ready(self) -> None:
        assert self.process.stdout
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the websocket clients could not follow the run")

    def arrivals(self) -> list[tuple[dict[int, float], int]]:
        """Per socket: the arrival of each event, and the frames it received."""
        assert self.process.stdout
        sockets = json.loads(self.process.stdout.readline())
        return [({int(seq): t for seq, t in stamps.items()}, frames) for stamps, frames in sockets]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


# --- the measurement --------------------------------------------------------------------------


def measure(
    server: LiveServer, clients: int, processes: int, steps: int, delay_ms: int
) -> dict[str, Any]:
    from django.test import Client as HttpClient

    from runner import advance, services
    from tests.factories import ActorFactory, UserFactory, chain_document
    from workflows.services import recipe_import, recipe_publish

    user = UserFactory(username="bench")
    ActorFactory(name="bench-fanout-writer", config={"replies": [REPLY], "delay_ms": delay_ms})
    document = chain_document(
        slug="bench-fanout",
        name="Benchmark: fan-out",
        actor="bench-fanout-writer",
        steps=steps,
        branches=[],
    )
    recipe = recipe_import(user=user, data=document).recipe
    recipe_publish(recipe=recipe, user=user)
    http = HttpClient()
    http.force_login(user)
    cookie = f"sessionid={http.cookies['sessionid'].value}"
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    pool = [Clients(server.port, cookie, share) for share in shares if share]

    commits = run_here_stamping_commits()
    try:
        # The first run warms both sides up (imports, caches, compiled queries); the last counts.
        for _ in range(WARMUP_RUNS + 1):
            run = services.run_start(user=user, recipe=recipe, inputs={"topic": "storms"})
            for process in pool:
                process.follow(run.pk)
            for process in pool:
                process.wait_ready()
            commits.clear()  # the run.queued commit happened before the clients joined
            assert server.process is not None
            cpu_before = cpu_seconds(server.process.pid)
            advance.advance(run.pk, time_slice=3600)
            sockets = [socket for process in pool for socket in process.arrivals()]
            cpu = cpu_seconds(server.process.pid) - cpu_before
    finally:
        for process in pool:
            process.close()
    delays = [
        (stamps[seq] - committed) * 1000
        for stamps, _ in sockets
        for seq, committed in commits.items()
    ]
    frames = sum(count for _, count in sockets)
    return {
        "delays": delays,
        "commits": len(commits),
        "sockets": len(sockets),
        "frames": frames,
        "cpu_s": cpu,
    }


def report(result: dict[str, Any], steps: int, delay_ms: int) -> bool:
    delays = result["delays"]
    cuts = statistics.quantiles(delays, n=100, method="inclusive")
    print(
        f"commit -> websocket arrival: {result['sockets']} clients on one run of {steps} "
        f"scripted steps answering {f'after {delay_ms} ms' if delay_ms else 'at once'} "
        f"({result['commits']} commits, {len(delays)} arrivals)"
    )
    print("  path: PostgreSQL commit -> Redis pub/sub -> one daphne process -> websocket clients")
    print(f"  p50 {statistics.median(delays):7.2f} ms")
    print(f"  p95 {cuts[94]:7.2f} ms")
    print(f"  p99 {cuts[98]:7.2f} ms")
    print(f"  max {max(delays):7.2f} ms")
    frames = result["frames"]
    print(
        f"  frames: {frames} ({frames / result['sockets']:.1f} per client: pushes that come "
        "while a round of frames goes out leave together)"
    )
    print(f"  daphne CPU per frame sent: {result['cpu_s'] / frames * 1e6:.0f} us")
    if result["sockets"] > TARGET_CLIENTS:
        print(f"(the target, p95 < {TARGET_P95_MS:g} ms, is for {TARGET_CLIENTS} clients)")
        return True
    passed = cuts[94] < TARGET_P95_MS
    print(f"{'PASS' if passed else 'FAIL'}: p95 {cuts[94]:.2f} ms (target < {TARGET_P95_MS:g} ms)")
    return passed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--clients", type=int, default=100, help="websocket clients (100)")
    parser.add_argument("--processes", type=int, default=4, help="client processes (4)")
    parser.add_argument("--steps", type=int, default=50, help="steps in the run (50)")
    parser.add_argument(
        "--delay-ms", type=int, default=0, help="each step's answer comes after this (0)"
    )
    parser.add_argument("--client", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(int(args.client[0]), args.client[1], int(args.client[2]))
        return

    with scratch_django(DATABASE), served() as server:
        result = measure(server, args.clients, args.processes, args.steps, args.delay_ms)
    sys.exit(0 if report(result, args.steps, args.delay_ms) else 1)


if __name__ == "__main__":
    main()
