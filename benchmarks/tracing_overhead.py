"""Print what tracing costs a step: the runner's per-step time with tracing off and with
tracing on, exporting over OTLP/HTTP to a local receiver, in one run of this script.

    .venv/bin/python benchmarks/tracing_overhead.py [--runs 40] [--steps 20] [--content]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    .venv/bin/python benchmarks/tracing_overhead.py

Without DATABASE_URL it runs on a throwaway SQLite file; with it, on that PostgreSQL database
(migrated; the benchmark's recipe and its runs are replaced on each run of the script).

The recipe is `--steps` scripted llm steps in a row, each with a regex, a length and a field
branch that do not match and a default that does, so a step is the runner's own work: claim,
render, the scripted answer, the engine's decision, the commit of the StepRun, its four
evaluations and its events. Runs execute in this process, one step after another in one
`advance` (as a worker's time slice). Traced, each step makes a step span with four
`branch.evaluated` events and a `chat` span, and each run its own span, all exported by the
batch processor to a receiver in another process (`tests/runner/otlp_receiver.py`, standing
in for a collector) that decodes every request. `--content` puts prompts and answers in them.

Runs go in pairs, one off and one on (which goes first alternates), so both see the same
load. Printed: per step (a run's wall time over its steps) p50 and mean for each mode; what
tracing costs inside the step, measured two ways: the median over the pairs of the wall time
on / off - 1 (each pair ran at nearly the same moment, so a machine busy with other work moves
both alike), and the median over the pairs of the CPU time the runs' own thread spent more
traced than untraced, over the untraced run's wall time (other processes do not move it);
what the export thread costs (its CPU time encoding and sending the batches, per traced step,
over an untraced step's p50); the mean wall time on / off - 1 (it also holds the runs during
which the export thread held the interpreter, and the receiver's own work, which a collector
elsewhere would not do on this machine); and `overhead:`, as percentages.

`overhead:` is the larger of the two in-step figures plus the export thread's: the export
thread's CPU time is counted in full although, with another CPU free, part of it overlaps the
steps, and the few traced runs during which it exported are slower by about that time again
(the medians leave them out; the mean shows them). The receiver's span count is checked
against what the traced runs made. Exit status 0 when the overhead is under the target (10%),
else 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.runner.otlp_receiver import receiver_process, spans_received  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
os.environ["EMBEDDED_WORKER"] = "0"
# Tracing is switched on and off by the script itself, not by the environment it runs in.
for _name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
    os.environ.pop(_name, None)

SLUG = "bench-tracing"
ACTOR = "bench-tracing-writer"
TARGET_PERCENT = 10.0
WARMUP_RUNS = 3
REPLY = (
    "The keeper climbed the stairs, lit the lamp and watched the ships come home safely. "
    "Nobody on the shore knew how close the storm had come."
)


def setup_django() -> None:
    """Point Django at the database to use and migrate it."""
    if "DATABASE_URL" not in os.environ:
        folder = tempfile.mkdtemp(prefix="branchline-bench-")
        import atexit

        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/tracing.sqlite3"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def bench_recipe(steps: int) -> tuple[Any, Any]:
    """Return the benchmark recipe (imported and published afresh) and its user, without runs."""
    from django.contrib.auth import get_user_model

    from runner.models import Run
    from tests.factories import chain_document
    from workflows.models import Actor, Recipe
    from workflows.services import recipe_import, recipe_publish

    user, _ = get_user_model().objects.get_or_create(username="bench-tracing")
    Actor.objects.update_or_create(
        name=ACTOR,
        defaults={
            "kind": Actor.Kind.LLM,
            "provider": Actor.Provider.SCRIPTED,
            "config": {"replies": [REPLY]},
        },
    )
    Run.objects.filter(recipe__slug=SLUG).delete()
    Recipe.objects.filter(slug=SLUG).delete()
    document = chain_document(
        slug=SLUG,
        name="Benchmark: tracing overhead",
        actor=ACTOR,
        steps=steps,
        inputs={
            "topic": {"type": "string", "required": True},
            "image_count": {"type": "integer", "default": 2},
        },
        branches=[
            {
                "name": "broken",
                "priority": 1,
                "when": {"type": "pattern_match", "operator": "regex_match", "value": "(error)"},
                "action": "END_RECIPE",
                "target": "@end",
            },
            {
                "name": "too_short",
                "priority": 2,
                "when": {"type": "length_check", "operator": "less_than", "value": 20},
                "action": "REQUEST_MORE_DETAIL",
                "target": "@repeat",
            },
            {
                "name": "too_many_images",
                "priority": 3,
                "when": {
                    "type": "field_compare",
                    "operator": "greater_than",
                    "field": "image_count",
                    "value": 10,
                },
                "action": "END_RECIPE",
                "target": "@end",
            },
        ],
    )
    recipe = recipe_import(user=user, data=document).recipe
    recipe_publish(recipe=recipe, user=user)
    return recipe, user


def run_once(recipe: Any, user: Any, i: int, steps: int) -> tuple[float, float]:
    """Run the recipe to its end in this process; return its wall time and its thread's CPU
    time per step (seconds)."""
    from runner import advance
    from runner.models import Run
    from runner.services import run_start
    from runner.status import RUNNABLE

    run = run_start(user=user, recipe=recipe, inputs={"topic": f"lighthouse {i}"})
    began, began_cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps + 5):
        advance.advance(run.pk, time_slice=600)
        status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
        if status not in RUNNABLE:
            break
    elapsed, cpu = time.perf_counter() - began, time.thread_time() - began_cpu
    run.refresh_from_db()
    if run.status != "succeeded":
        raise SystemExit(f"benchmark run {run.pk} ended {run.status}: {run.error}")
    return elapsed / steps, cpu / steps


class TimedExporter:
    """The OTLP/HTTP exporter, counting the CPU time its thread spends in each export
    (encoding the batch, sending it): work a traced process does besides its steps."""

    def __init__(self) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.inner = OTLPSpanExporter()  # reads OTEL_EXPORTER_OTLP_ENDPOINT, as in production
        self.cpu_s = 0.0

    def export(self, spans: Any) -> Any:
        began = time.thread_time()
        try:
            return self.inner.export(spans)
        finally:
            self.cpu_s += time.thread_time() - began

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=40, help="runs of each mode (default 40)")
    parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
    parser.add_argument("--content", action="store_true", help="prompts and answers in spans")
    args = parser.parse_args()
    setup_django()

    from django.conf import settings
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from runner import tracing

    settings.TRACE_CONTENT = args.content
    recipe, user = bench_recipe(args.steps)
    samples: dict[str, list[float]] = {"off": [], "on": []}
    cpu_samples: dict[str, list[float]] = {"off": [], "on": []}
    with receiver_process() as endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        exporter = TimedExporter()
        # As tracing.exporting_provider() makes it, with the exporter timed.
        provider = tracing.make_provider(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
        try:
            for i in range(WARMUP_RUNS * 2 + args.runs * 2):
                # Pairs alternate which mode goes first: off-on, on-off, …
                mode = ("off", "on")[(i + (i // 2)) % 2]
                tracing.configure(provider if mode == "on" else None)
                per_step, cpu_per_step = run_once(recipe, user, i, args.steps)
                if i >= WARMUP_RUNS * 2:
                    samples[mode].append(per_step)
                    cpu_samples[mode].append(cpu_per_step)
        finally:
            tracing.configure(None)
            flushed = provider.force_flush(timeout_millis=30_000)
            provider.shutdown()
        count = spans_received(endpoint)
    traced_runs = WARMUP_RUNS + args.runs
    expected = traced_runs * (2 * args.steps + 1)  # a step and a chat span a step, the run's
    if not flushed or count != expected:
        print(f"the receiver got {count} spans, not {expected}", file=sys.stderr)
        return 1

    off_step = statistics.median(samples["off"])
    pairs = list(zip(samples["off"], samples["on"], strict=True))
    in_step = statistics.median(on / off - 1 for off, on in pairs) * 100
    # What the traced run's thread spent more than its pair's, over the untraced wall time.
    cpu_pairs = zip(samples["off"], cpu_samples["off"], cpu_samples["on"], strict=True)
    in_step_cpu = statistics.median((on - off) / wall for wall, off, on in cpu_pairs) * 100
    export_step = exporter.cpu_s / (traced_runs * args.steps)
    in_export = export_step / off_step * 100
    mean_wall = (statistics.fmean(samples["on"]) / statistics.fmean(samples["off"]) - 1) * 100
    overhead = max(in_step, in_step_cpu) + in_export
    verdict = "PASS" if overhead < TARGET_PERCENT else "FAIL"
    database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    load = os.getloadavg()[0]
    print(
        f"{args.runs} runs of each, {args.steps} scripted steps with 4 branches each, on "
        f"{database} (load average {load:.1f} on {os.cpu_count()} CPUs)"
        + (", prompts and answers in spans" if args.content else "")
        + ":"
    )
    for label, mode in (("tracing off", "off"), ("tracing on (OTLP/HTTP, batched)", "on")):
        values = samples[mode]
        print(
            f"  {label:<36} per step p50 {statistics.median(values) * 1000:7.3f} ms   "
            f"mean {statistics.fmean(values) * 1000:7.3f} ms"
        )
    print(f"  {'in the step (median of pairs)':<36} {in_step:+.1f}%")
    print(f"  {'in the step (its thread CPU, pairs)':<36} {in_step_cpu:+.1f}%")
    print(
        f"  {'export thread (CPU per traced step)':<36} {export_step * 1e6:.0f} us = "
        f"{in_export:+.1f}% ({count} spans received from {traced_runs} traced runs)"
    )
    print(f"  {'mean wall time per step, on / off':<36} {mean_wall:+.1f}% (with the receiver's)")
    print(f"overhead: {overhead:.1f}% (target < {TARGET_PERCENT:g}%) {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
