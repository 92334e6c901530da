"""Print whether a step costs the same at the end of a long run as at its start.

    createdb -h 127.0.0.1 -U postgres branchline_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python benchmarks/run_length.py [--steps 1900]

It migrates that database, starts ONE Celery worker (as `benchmarks/runner_overhead.py` does)
and runs one scripted run of a two-step loop: `draft` writes, `review` reads the draft and
asks for more detail once (a bounded repeat), then sends the run back to `draft`. Every answer
is 5 KB, and each prompt names the other step's latest answer, so every step renders an earlier
answer. The run goes on until the step limit (`RUN_MAX_STEPS`, set to `--steps`) stops it.

Per step is the time between two consecutive steps' commits (the StepRuns' `finished_at`).
Printed: the mean over the first 250 steps and over the last 250 (with their medians), the
ratio of the means, and the size of the run's state at the end. Exit status 0 when the ratio
is at most 1.2x (PASS), 1 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.runner_overhead import Worker, ms, setup_django  # noqa: E402

WINDOW = 250
TARGET_RATIO = 1.2
ACTOR = "bench-long-writer"
SLUG = "bench-run-length"
ANSWER = ("The keeper climbed the stairs and lit the lamp for the ships coming home. " * 68)[:5000]


def recipe_document() -> dict[str, Any]:
    more_detail = {"type": "length_check", "operator": "greater_than", "value": 100}
    return {
        "format": "branchline.recipe/v1",
        "slug": SLUG,
        "name": "Benchmark: run length",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": ACTOR},
        "steps": [
            {
                "key": "draft",
                "name": "Draft",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write about {topic}. The last review said: {steps.review.response}",
                "branches": [],
            },
            {
                "key": "review",
                "name": "Review",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Review this draft: {steps.draft.response}",
                "branches": [
                    {
                        "name": "more_detail",
                        "priority": 1,
                        "when": more_detail,
                        "action": "REQUEST_MORE_DETAIL",
                        "target": "@repeat",
                        "params": {"max_retries": 1, "retry_suffix": "Say more."},
                    },
                    {
                        "name": "again",
                        "priority": 2,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "draft",
                    },
                ],
            },
        ],
    }


def bench_recipe() -> tuple[Any, Any]:
    """Return the benchmark recipe (imported and published once) and its user, without runs."""
    from django.contrib.auth import get_user_model

    from runner.models import Run
    from workflows.models import Actor, Recipe
    from workflows.services import recipe_import, recipe_publish

    user, _ = get_user_model().objects.get_or_create(username="benchmark")
    Actor.objects.update_or_create(
        name=ACTOR,
        defaults={
            "kind": Actor.Kind.LLM,
            "provider": Actor.Provider.SCRIPTED,
            "config": {"replies": [ANSWER]},
        },
    )
    recipe = Recipe.objects.filter(slug=SLUG).first()
    if recipe is None:
        recipe = recipe_import(user=user, data=recipe_document()).recipe
        recipe_publish(recipe=recipe, user=user)
    Run.objects.filter(recipe=recipe).delete()
    return recipe, user


def run_once(steps: int) -> Any:
    """Start the run, wait until the step limit stops it, and return it."""
    from runner.models import Run
    from runner.services import run_start
    from runner.status import TERMINAL

    recipe, user = bench_recipe()
    with Worker():
        run = run_start(user=user, recipe=recipe, inputs={"topic": "a lighthouse"})
        deadline = time.monotonic() + steps  # a second per step is far beyond any regression
        while run.status not in TERMINAL:
            if time.monotonic() > deadline:
                sys.exit(f"run {run.pk} did not finish: {run.status}, step {run.next_seq}")
            time.sleep(0.5)
            run = Run.objects.get(pk=run.pk)
    expected = f"step limit {steps} reached"
    if run.error != expected:
        sys.exit(f"run {run.pk} ended with {run.status} {run.error!r}, not {expected!r}")
    return run


def step_times(run: Any, steps: int) -> list[float]:
    """Return the seconds between consecutive steps' commits, in order."""
    from runner.models import StepRun

    done = list(
        StepRun.objects.filter(run=run).order_by("seq").values_list("finished_at", flat=True)
    )
    assert len(done) == steps, f"run {run.pk} has {len(done)} steps, not {steps}"
    return [(b - a).total_seconds() for a, b in itertools.pairwise(done)]


def state_size(run: Any) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT octet_length(state::text) FROM runner_run WHERE id = %s", [run.pk])
        return int(cursor.fetchone()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1900, help="steps in the run (default 1900)")
    args = parser.parse_args()
    if args.steps < 2 * WINDOW + 1:
        parser.error(f"--steps must be at least {2 * WINDOW + 1}")
    os.environ["RUN_MAX_STEPS"] = str(args.steps)
    setup_django()

    run = run_once(args.steps)
    times = step_times(run, args.steps)
    first, last = statistics.mean(times[:WINDOW]), statistics.mean(times[-WINDOW:])
    ratio = last / first
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    # The medians show whether a mean was moved by a burst of load from other processes.
    medians = statistics.median(times[:WINDOW]), statistics.median(times[-WINDOW:])
    rows = [
        (f"per step, mean over the first {WINDOW} steps", f"{ms(first)} (median {ms(medians[0])})"),
        (f"per step, mean over the last {WINDOW} steps", f"{ms(last)} (median {ms(medians[1])})"),
        (f"last / first (target <= {TARGET_RATIO}x)", f"{ratio:.2f}x {verdict}"),
        ("the run's state at the end, as JSON text", f"{state_size(run) / 1024:.1f} KB"),
    ]
    width = max(len(label) for label, _ in rows)
    load = os.getloadavg()[0]
    print(
        f"one run of {args.steps} scripted steps with {len(ANSWER) // 1000} KB answers, "
        f"one Celery worker (load average {load:.1f} on {os.cpu_count()} CPUs):"
    )
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
