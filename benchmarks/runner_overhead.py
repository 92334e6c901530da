"""Print the runner's overhead per step next to LangGraph's, on the same PostgreSQL database.

    .venv/bin/pip install -r requirements-bench.txt
    createdb -h 127.0.0.1 -U postgres branchline_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python benchmarks/runner_overhead.py [--runs 30]

It migrates that database, starts ONE Celery worker (`celery -A config worker -c 1`, a separate
process, as deployed) and runs a 10-step recipe many times: a scripted actor answers at once and
every step has a regex, a length and a field branch that do not match and a default that does.
A step is then pure overhead: claim the run under its lease, call the actor, let the engine
decide, and commit the StepRun, its 4 evaluations (with reasons), the run's state and its events
in one transaction, then go on with the next step. Measured from the database's timestamps:

- per step: between two consecutive steps' commits in a run (claim, execute, commit, next);
- run wall / 10: a run's wall time (created -> finished: the API's start, the Celery hop to a
  worker and the first claim included);
- steps per second: all the runs queued at once and worked off by the one worker.

In the same process and on the same database, the same 10-step loop runs in LangGraph with its
PostgresSaver and `durability="sync"` (every step's checkpoint written before the next step),
each node doing the same work: the canned answer, then a regex, a length check, a field check
and the choice of the next node. Its per step is the time between two consecutive steps'
checkpoints (their own timestamps), its run wall the `invoke`. Target: our per step at most
LangGraph's; the run walls' ratio is printed beside it.

The benchmark recipe's runs are deleted at the start of each run of the script. Exit status 0
on PASS, 1 on FAIL.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
os.environ["EMBEDDED_WORKER"] = "0"

STEPS = 10
TARGET_RATIO = 1.0
WARMUP_RUNS = 3
REPLY = (
    "The keeper climbed the stairs, lit the lamp and watched the ships come home safely. "
    "Nobody on the shore knew how close the storm had come."
)
ERROR_PATTERN = "(error|traceback|failed)"
MIN_LENGTH = 20
MAX_IMAGES = 10


def recipe_document() -> dict[str, Any]:
    from tests.factories import chain_document

    broken = {"type": "pattern_match", "operator": "regex_match", "value": ERROR_PATTERN}
    too_short = {"type": "length_check", "operator": "less_than", "value": MIN_LENGTH}
    too_many = {"type": "field_compare", "operator": "greater_than", "value": MAX_IMAGES}
    return chain_document(
        slug="bench-overhead",
        name="Benchmark: runner overhead",
        actor="bench-writer",
        steps=STEPS,
        inputs={
            "topic": {"type": "string", "required": True},
            "image_count": {"type": "integer", "default": 2},
        },
        branches=[
            {
                "name": "broken",
                "priority": 1,
                "when": broken,
                "action": "END_RECIPE",
                "target": "@end",
            },
            {
                "name": "too_short",
                "priority": 2,
                "when": too_short,
                "action": "REQUEST_MORE_DETAIL",
                "target": "@repeat",
            },
            {
                "name": "too_many_images",
                "priority": 3,
                "when": {**too_many, "field": "image_count"},
                "action": "END_RECIPE",
                "target": "@end",
            },
        ],
    )


# --------------------------------------------------------------------------------------------
# Branchline


def setup_django() -> None:
    import django
    from django.conf import settings

    django.setup()
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        sys.exit("DATABASE_URL must point at a PostgreSQL database (see the top of this file)")
    if not settings.REDIS_URL:
        sys.exit("REDIS_URL must be set (see the top of this file)")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def bench_recipe() -> tuple[Any, Any]:
    """Return the benchmark recipe (imported and published once) and its user, without runs."""
    from django.contrib.auth import get_user_model

    from runner.models import Run
    from workflows.models import Actor, Recipe
    from workflows.services import recipe_import, recipe_publish

    user, _ = get_user_model().objects.get_or_create(username="benchmark")
    Actor.objects.update_or_create(
        name="bench-writer",
        defaults={
            "kind": Actor.Kind.LLM,
            "provider": Actor.Provider.SCRIPTED,
            "config": {"replies": [REPLY]},
        },
    )
    recipe = Recipe.objects.filter(slug="bench-overhead").first()
    if recipe is None:
        recipe = recipe_import(user=user, data=recipe_document()).recipe
        recipe_publish(recipe=recipe, user=user)
    Run.objects.filter(recipe=recipe).delete()
    return recipe, user


class Worker:
    """One `celery -A config worker -c 1` process, stopped (with its pool) on exit."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Worker:
        from config.celery import app

        app.control.purge()
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "1"]
        command += ["-l", "warning", "-n", f"bench-{os.getpid()}@%h"]
        self.log = tempfile.NamedTemporaryFile(prefix="bench-worker-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            command, cwd=ROOT, start_new_session=True, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        hostname = f"bench-{os.getpid()}@{socket.gethostname()}"
        while not app.control.ping(destination=[hostname], timeout=0.5):
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the Celery worker did not start: see {self.log.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()
        if exc[0] is None:
            os.unlink(self.log.name)
        else:
            print(f"the worker's log: {self.log.name}", file=sys.stderr)


def start(recipe: Any, user: Any, i: int) -> int:
    from runner.services import run_start

    return run_start(user=user, recipe=recipe, inputs={"topic": f"lighthouse {i}"}).pk


def wait_finished(ids: list[int], timeout: float = 120) -> None:
    from runner.models import Run
    from runner.status import TERMINAL

    deadline = time.monotonic() + timeout
    pending = Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
    while pending.exists():
        if time.monotonic() > deadline:
            sys.exit(f"runs did not finish: {list(pending.values_list('pk', 'status'))}")
        time.sleep(0.005)
    failed = Run.objects.filter(pk__in=ids).exclude(status="succeeded")
    if failed.exists():
        sys.exit(f"runs did not succeed: {list(failed.values_list('pk', 'status', 'error'))}")


def branchline_figures(ids: list[int], burst: list[int]) -> dict[str, float]:
    """Per step from the runs' and steps' timestamps; steps per second from the burst."""
    from runner.models import BranchEvaluation, Run, StepRun

    walls, cycles = [], []
    for run in Run.objects.filter(pk__in=ids):
        walls.append((run.finished_at - run.created_at).total_seconds() / STEPS)
        done = list(
            StepRun.objects.filter(run=run).order_by("seq").values_list("finished_at", flat=True)
        )
        assert len(done) == STEPS, f"run {run.pk} has {len(done)} steps"
        cycles += [(b - a).total_seconds() for a, b in itertools.pairwise(done)]
    evaluations = BranchEvaluation.objects.filter(step_run__run_id__in=ids).count()
    assert evaluations == len(ids) * STEPS * 4, evaluations
    burst_runs = Run.objects.filter(pk__in=burst)
    first = min(r.created_at for r in burst_runs)
    last = max(r.finished_at for r in burst_runs)
    return {
        "wall": statistics.median(walls),
        "cycle": statistics.median(cycles),
        "steps_per_s": len(burst) * STEPS / (last - first).total_seconds(),
    }


# --------------------------------------------------------------------------------------------
# LangGraph


class PeerState(TypedDict):
    topic: str
    image_count: int
    responses: list[dict[str, str]]


class Peer:
    """The same 10-step loop in LangGraph, checkpointed by PostgresSaver on the same database."""

    def __enter__(self) -> Peer:
        from django.conf import settings
        from langgraph.checkpoint.postgres import PostgresSaver

        db = settings.DATABASES["default"]
        conninfo = (
            f"host={db['HOST'] or 'localhost'} port={db['PORT'] or 5432} dbname={db['NAME']} "
            f"user={db['USER']}" + (f" password={db['PASSWORD']}" if db["PASSWORD"] else "")
        )
        self.saver_context = PostgresSaver.from_conn_string(conninfo)
        self.saver = self.saver_context.__enter__()
        self.saver.setup()
        self.graph = self.build().compile(checkpointer=self.saver)
        self.threads: list[str] = []
        return self

    def __exit__(self, *exc: Any) -> None:
        for thread in self.threads:
            self.saver.delete_thread(thread)
        self.saver_context.__exit__(*exc)

    @staticmethod
    def build() -> Any:
        from langgraph.graph import END, START, StateGraph

        error = re.compile(ERROR_PATTERN)
        builder = StateGraph(PeerState)

        def node(key: str) -> Any:
            def answer(state: PeerState) -> dict[str, Any]:
                return {"responses": [*state["responses"], {"step": key, "response": REPLY}]}

            return answer

        def router(i: int) -> Any:
            def choose(state: PeerState) -> str:
                text = state["responses"][-1]["response"]
                if error.search(text):
                    return END
                if len(text) < MIN_LENGTH:
                    return f"s{i}"
                if state["image_count"] > MAX_IMAGES:
                    return END
                return f"s{i + 1}" if i < STEPS else END

            return choose

        for i in range(1, STEPS + 1):
            builder.add_node(f"s{i}", node(f"s{i}"))
            targets = [f"s{i}", END] + ([f"s{i + 1}"] if i < STEPS else [])
            builder.add_conditional_edges(f"s{i}", router(i), targets)
        builder.add_edge(START, "s1")
        return builder

    def run(self, i: int) -> tuple[float, list[float]]:
        """Run the loop once; return its wall time per step and the times between the
        checkpoints of consecutive steps (as Branchline's commit to next commit)."""
        thread = f"bench-{uuid.uuid4()}"
        self.threads.append(thread)
        config = {"configurable": {"thread_id": thread}}
        began = time.perf_counter()
        state = self.graph.invoke(
            {"topic": f"lighthouse {i}", "image_count": 2, "responses": []},
            config,
            durability="sync",
        )
        elapsed = time.perf_counter() - began
        assert len(state["responses"]) == STEPS, state
        # A checkpoint per step (metadata step 1..10), stamped when it is taken.
        stamps = sorted(
            datetime.fromisoformat(c.checkpoint["ts"])
            for c in self.saver.list(config)
            if c.metadata.get("step", -1) >= 1
        )
        assert len(stamps) == STEPS, stamps
        return elapsed / STEPS, [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)]


def measure(runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Alternate one run of each, so that both see the same load on the machine."""
    recipe, user = bench_recipe()
    with Worker(), Peer() as peer:
        for i in range(WARMUP_RUNS):
            wait_finished([start(recipe, user, i)])
            peer.run(i)
        ids, peer_walls, peer_cycles = [], [], []
        for i in range(runs):
            ids.append(start(recipe, user, i))
            wait_finished(ids[-1:])
            wall, cycles = peer.run(i)
            peer_walls.append(wall)
            peer_cycles += cycles
        burst = [start(recipe, user, i) for i in range(runs)]  # all at once: throughput
        wait_finished(burst)
    peer_figures = {"wall": statistics.median(peer_walls), "cycle": statistics.median(peer_cycles)}
    return branchline_figures(ids, burst), peer_figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each (default 30)")
    args = parser.parse_args()
    setup_django()

    ours, peer = measure(args.runs)
    ratio = ours["cycle"] / peer["cycle"]
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    rows = [
        ("Branchline, per step (commit to next commit)", ms(ours["cycle"])),
        ("LangGraph + PostgresSaver, per step (checkpoint to next)", ms(peer["cycle"])),
        (f"Branchline / LangGraph per step (target <= {TARGET_RATIO}x)", f"{ratio:.3f}x {verdict}"),
        (f"Branchline, run wall / {STEPS} (API start + Celery hop included)", ms(ours["wall"])),
        (f"LangGraph, run wall / {STEPS} (invoke)", ms(peer["wall"])),
        ("Branchline / LangGraph, run wall", f"{ours['wall'] / peer['wall']:.3f}x"),
        (
            f"Branchline, steps per second ({args.runs} runs queued at once)",
            f"{ours['steps_per_s']:.0f}",
        ),
        ("LangGraph, steps per second (one run at a time)", f"{1 / peer['wall']:.0f}"),
    ]
    width = max(len(label) for label, _ in rows)
    load = os.getloadavg()[0]
    print(
        f"{args.runs} runs of {STEPS} scripted steps with 4 branches each, one Celery worker "
        f"(load average {load:.1f} on {os.cpu_count()} CPUs):"
    )
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    return 0 if verdict == "PASS" else 1


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


if __name__ == "__main__":
    raise SystemExit(main())
