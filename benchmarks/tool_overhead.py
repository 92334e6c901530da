"""Print what a tool call costs: the SDK called directly, our client, and a tool step run by
the runner, against the demo MCP server over streamable HTTP and over stdio.

    .venv/bin/python benchmarks/tool_overhead.py [--calls 50] [--runs 20]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    .venv/bin/python benchmarks/tool_overhead.py

Without DATABASE_URL it runs on a throwaway SQLite file; with it, on that PostgreSQL database
(migrated; the benchmark's recipe and its runs are replaced on each run of the script).

- sdk, one session: `mcp.Client` held open, `--calls` calls of `add`: the floor (the server's
  own work and one round trip).
- sdk, session per call: a new `mcp.Client` (handshake; for stdio a new process) per call.
- tools.client.call: ours, which opens a session per call (the SSRF check, env headers, the
  hard deadline, result capping and parsing on top of the above).
- tool step via the runner: a one-step recipe (`kind: tool`, `demo.add` with templated
  arguments) run `--runs` times in this process (claim, render, type the arguments, check
  them against the schema, call, commit the StepRun and its events).

Printed: p50 and p95 per line, in milliseconds, and each line's overhead over the one before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
os.environ["EMBEDDED_WORKER"] = "0"

SLUG = "bench-tool-overhead"
SERVER_HTTP = "bench-http"
SERVER_STDIO = "bench-stdio"


def setup_django() -> None:
    """Point Django at the database to use and migrate it."""
    if "DATABASE_URL" not in os.environ:
        folder = tempfile.mkdtemp(prefix="branchline-bench-")
        import atexit

        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/tools.sqlite3"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


@contextmanager
def demo_over_http() -> Iterator[str]:
    """Run the demo server with --http on a free port; yield its endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.demo_server", "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the demo server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def timed(count: int, once: Callable[[int], object]) -> list[float]:
    """Return the milliseconds of `count` calls of `once(i)`, after one warm-up call."""
    once(-1)
    samples = []
    for i in range(count):
        started = time.perf_counter()
        once(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def sdk_one_session(target: Any, count: int) -> list[float]:
    import anyio
    from mcp import Client

    async def main() -> list[float]:
        async with Client(target, cache=None) as client:
            await client.call_tool("add", {"a": 1, "b": 2})
            samples = []
            for i in range(count):
                started = time.perf_counter()
                await client.call_tool("add", {"a": i, "b": 2})
                samples.append((time.perf_counter() - started) * 1000)
            return samples

    return anyio.run(main)


def sdk_session_per_call(make_target: Callable[[], Any], count: int) -> list[float]:
    import anyio
    from mcp import Client

    async def once(i: int) -> None:
        async with Client(make_target(), cache=None) as client:
            await client.call_tool("add", {"a": i, "b": 2})

    return timed(count, lambda i: anyio.run(once, i))


def ours(server: Any, count: int) -> list[float]:
    from tools import client

    return timed(count, lambda i: client.call(server, "add", {"a": i, "b": 2}))


def runner_step(server_name: str, count: int) -> list[float] | None:
    """Run a one-tool-step recipe `count` times in this process; None if there are no tool
    steps in this checkout."""
    if not (ROOT / "runner" / "steps" / "tool.py").exists():
        return None
    from django.contrib.auth import get_user_model

    from runner import advance
    from runner.models import Run
    from runner.services import run_start
    from runner.status import RUNNABLE
    from workflows.models import Recipe
    from workflows.services import recipe_import, recipe_publish

    user, _ = get_user_model().objects.get_or_create(username="bench-tools")
    Run.objects.filter(recipe__slug=SLUG).delete()
    Recipe.objects.filter(slug=SLUG).delete()
    document = {
        "format": "branchline.recipe/v1",
        "slug": SLUG,
        "name": "Tool overhead",
        "inputs": {"a": {"type": "string", "required": True}},
        "actors": {},
        "steps": [
            {
                "key": "add",
                "name": "Add",
                "kind": "tool",
                "tool": f"{server_name}.add",
                "arguments": {"a": "{a}", "b": "2"},
                "branches": [],
            }
        ],
    }
    recipe = recipe_import(user=user, data=document).recipe
    recipe_publish(recipe=recipe, user=user)

    def once(i: int) -> None:
        run = run_start(user=user, recipe=recipe, inputs={"a": str(i)})
        for _ in range(10):
            run.refresh_from_db()
            if run.status not in RUNNABLE:
                break
            advance.advance(run.pk, time_slice=60)
        if run.status != "succeeded":
            raise SystemExit(f"benchmark run {run.pk} ended {run.status}: {run.error}")

    return timed(count, once)


def line(label: str, samples: list[float] | None, floor: float | None) -> float | None:
    if samples is None:
        print(f"  {label:<34} (not available: no tool step kind in this checkout)")
        return floor
    p50 = statistics.median(samples)
    p95 = sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]
    extra = f"  (+{p50 - floor:.1f} ms over the line above)" if floor is not None else ""
    print(f"  {label:<34} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms{extra}")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    setup_django()

    from django.conf import settings
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tools.models import ToolServer

    settings.PROVIDER_URL_ALLOWLIST = [*settings.PROVIDER_URL_ALLOWLIST, "127.0.0.1"]
    argv = settings.MCP_STDIO_COMMANDS["demo"]

    def stdio_target() -> Any:
        return stdio_client(
            StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT)),
            errlog=open(os.devnull, "w"),
        )

    with demo_over_http() as url:
        ToolServer.objects.filter(name__in=[SERVER_HTTP, SERVER_STDIO]).delete()
        http = ToolServer.objects.create(name=SERVER_HTTP, transport="http", url=url)
        stdio = ToolServer.objects.create(name=SERVER_STDIO, transport="stdio", command="demo")
        from tools import client

        client.discover(http)
        client.discover(stdio)

        print(f"streamable HTTP ({args.calls} calls, {args.runs} runs)")
        floor = line("sdk, one session", sdk_one_session(url, args.calls), None)
        floor = line("sdk, session per call", sdk_session_per_call(lambda: url, args.calls), floor)
        floor = line("tools.client.call", ours(http, args.calls), floor)
        line("tool step via the runner", runner_step(SERVER_HTTP, args.runs), floor)

        stdio_calls = max(3, args.calls // 5)  # each starts a Python process
        print(f"stdio ({stdio_calls} calls per session-per-call line, {args.runs // 2} runs)")
        floor = line("sdk, one session", sdk_one_session(stdio_target(), args.calls), None)
        floor = line(
            "sdk, session per call", sdk_session_per_call(stdio_target, stdio_calls), floor
        )
        floor = line("tools.client.call", ours(stdio, stdio_calls), floor)
        line("tool step via the runner", runner_step(SERVER_STDIO, max(2, args.runs // 2)), floor)


if __name__ == "__main__":
    main()
