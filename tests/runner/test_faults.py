"""Workers SIGKILLed in the middle of runs: no run is lost, no step result is committed twice.

The workers are separate `celery worker` processes on PostgreSQL and Redis (see
`worker_process.py`), with a 2 s lease so that a dead worker's lease runs out quickly. The
reaper (`runner.maintenance.reap`, beat's duty in production) runs in the test's loop.

Two ways a worker dies, both with SIGKILL, so that nothing of the worker gets to clean up:

- the whole worker (its process group): the machine or container went away. The message it
  was working on stays unacknowledged in Redis (for the visibility timeout, an hour), so only
  the lease running out and the reaper bring the run back;
- only the prefork pool process executing the task, as the kernel's OOM killer does: the main
  process sees it die and, with `reject_on_worker_lost`, requeues the message, which finds the
  dead process's lease still held; again the reaper brings the run back once it has run out.

And one that is not dead: a worker frozen (SIGSTOP) past its lease, which another worker takes
over, and which then wakes up and tries to commit the step the other one is running again.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.celery import app as celery_app
from runner import maintenance, services
from runner.models import BranchEvaluation, Run, RunEvent, StepRun
from runner.status import TERMINAL, RunStatus
from tests.factories import ActorFactory, chain_document
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    purge_queue,
    require_services,
    wait_for_worker_sessions_to_close,
)
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

# Each test takes 15-40 s; the bounds below leave room for a loaded machine.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

ANSWER = "The keeper climbed the stairs, lit the lamp and watched the ships come home safely."
BRANCHES_PER_STEP = 3  # the error pattern and the length check do not match; the default does
LEASE_SECONDS = 2


def fault_document(slug: str, actor: str, steps: int) -> dict[str, Any]:
    """A linear recipe of `steps` LLM steps, each with a regex, a length and a default branch."""
    too_short = {
        "name": "too_short",
        "priority": 2,
        "when": {"type": "length_check", "operator": "less_than", "value": 20},
        "action": "REQUEST_MORE_DETAIL",
        "target": "@repeat",
    }
    broken = {
        "name": "broken",
        "priority": 1,
        "when": {"type": "pattern_match", "operator": "regex_match", "value": "(error|failed)"},
        "action": "END_RECIPE",
        "target": "@end",
    }
    return chain_document(slug=slug, actor=actor, steps=steps, branches=[broken, too_short])


def published(owner: Any, document: dict[str, Any]) -> Recipe:
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


class Workers:
    """The worker processes a test started; all of them are killed when the test ends."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[WorkerProcess] = []

    def start(self, *, pool: str, **env: Any) -> WorkerProcess:
        env.setdefault("RUN_LEASE_SECONDS", LEASE_SECONDS)
        worker = WorkerProcess(f"worker{len(self.started) + 1}", self.log_dir, pool=pool, **env)
        self.started.append(worker.start())
        return worker

    @property
    def alive(self) -> list[WorkerProcess]:
        return [w for w in self.started if w.alive]

    def kill_all(self) -> None:
        for worker in self.started:
            worker.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {w.name} ---\n{w.log_tail()}" for w in self.started)


@pytest.fixture
def workers(
    transactional_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> Iterator[Workers]:
    require_services()
    # Runs the reaper hands back go to the fault workers' queue; a run whose message was lost
    # while it held no lease is handed back after a few seconds rather than a minute.
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    settings.RUN_REQUEUE_AFTER_SECONDS = 6
    purge_queue()
    started = Workers(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
        purge_queue()
        wait_for_worker_sessions_to_close()


def start_run(recipe: Recipe, owner: Any, topic: str = "a lighthouse") -> Run:
    return services.run_start(user=owner, recipe=recipe, inputs={"topic": topic})


def running_seq(run: Run) -> int | None:
    """Return the sequence number of the step the run is executing now, if any."""
    events = RunEvent.objects.filter(run=run, type__in=("step.started", "step.finished"))
    started, finished = set(), set()
    for type_, seq in events.values_list("type", "data__seq"):
        (started if type_ == "step.started" else finished).add(seq)
    return max(started - finished, default=None)


def wait_until(check: Callable[[], bool], timeout: float, what: str, workers: Workers) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}\n{workers.logs()}")
        time.sleep(0.05)


def reap_until_finished(runs: list[Run], workers: Workers, timeout: float) -> None:
    """Run the reaper every half second, as beat would, until every run has finished."""
    ids = [r.pk for r in runs]
    deadline = time.monotonic() + timeout
    while Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists():
        if time.monotonic() > deadline:
            stuck = Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
            described = [(r.pk, r.status, r.next, r.claims, r.lease_expires_at) for r in stuck]
            raise AssertionError(f"runs did not finish: {described}\n{workers.logs()}")
        maintenance.reap()
        time.sleep(0.5)


def assert_committed_once(run: Run, keys: list[str]) -> None:
    """Every step of the run was committed exactly once, with its evaluations and events."""
    run.refresh_from_db()
    assert (run.status, run.outcome, run.error) == (RunStatus.SUCCEEDED, "completed", "")
    assert (run.lease_token, run.claims) == ("", 0)
    steps = list(StepRun.objects.filter(run=run).order_by("seq", "attempt"))
    assert [(s.seq, s.step_key, s.attempt) for s in steps] == [
        (seq, key, 1) for seq, key in enumerate(keys, start=1)
    ]
    assert all(s.status == "succeeded" and s.response == ANSWER for s in steps)
    evaluations = Counter(
        BranchEvaluation.objects.filter(step_run__run=run).values_list("step_run__seq", "order")
    )
    assert sorted(evaluations) == [
        (seq, order) for seq in range(1, len(keys) + 1) for order in range(BRANCHES_PER_STEP)
    ]
    assert set(evaluations.values()) == {1}
    taken = BranchEvaluation.objects.filter(step_run__run=run, taken=True)
    assert list(taken.order_by("step_run__seq").values_list("branch", flat=True)) == [
        "onward"
    ] * len(keys)

    events = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "type"))
    assert [seq for seq, _ in events] == list(range(1, run.event_seq + 1))
    types = Counter(type_ for _, type_ in events)
    assert (types["run.queued"], types["run.started"], types["run.finished"]) == (1, 1, 1)
    assert types["step.finished"] == types["branch.taken"] == len(keys)
    assert types["branch.evaluated"] == BRANCHES_PER_STEP * len(keys)
    finished = RunEvent.objects.filter(run=run, type="step.finished")
    assert sorted(finished.values_list("data__seq", flat=True)) == list(range(1, len(keys) + 1))


def test_a_run_survives_its_worker_killed_while_a_step_runs(workers: Workers, owner: Any) -> None:
    ActorFactory(name="slow-writer", config={"replies": [ANSWER], "delay_ms": 1500})
    recipe = published(owner, fault_document("slow-story", "slow-writer", steps=3))
    first = workers.start(pool="solo").wait_ready()

    run = start_run(recipe, owner)
    wait_until(lambda: running_seq(run) == 2, 60, "the run's second step runs", workers)
    time.sleep(0.3)  # the actor is "thinking"; the worker renews its lease meanwhile
    first.kill()
    run.refresh_from_db()
    assert (run.status, run.next_seq, StepRun.objects.filter(run=run).count()) == ("running", 2, 1)
    assert run.lease_token  # the dead worker's lease, still held until it runs out

    workers.start(pool="solo").wait_ready()
    reap_until_finished([run], workers, timeout=60)

    assert_committed_once(run, ["s1", "s2", "s3"])
    started = RunEvent.objects.filter(run=run, type="step.started")
    # The second step was started twice: once by the killed worker, once after the reaper.
    assert sorted(started.values_list("data__seq", flat=True)) == [1, 2, 2, 3]


def test_a_frozen_worker_that_comes_back_commits_nothing(workers: Workers, owner: Any) -> None:
    ActorFactory(name="slow-writer", config={"replies": [ANSWER], "delay_ms": 1500})
    recipe = published(owner, fault_document("slow-story", "slow-writer", steps=3))
    frozen = workers.start(pool="solo", loglevel="info").wait_ready()

    run = start_run(recipe, owner)
    wait_until(lambda: running_seq(run) == 2, 60, "the run's second step runs", workers)
    time.sleep(0.3)
    frozen.freeze()  # its lease runs out while it "thinks"
    workers.start(pool="solo").wait_ready()
    started = RunEvent.objects.filter(run=run, type="step.started", data__seq=2)

    def taken_over() -> bool:
        maintenance.reap()
        return started.count() == 2

    wait_until(taken_over, 60, "another worker runs the second step again", workers)
    # Back while the other worker runs the same step: its result must not be committed.
    frozen.thaw()
    wait_until(
        # Refused at its commit, or stopped before it by its lease keeper, which finds the
        # lease taken over once the worker runs again.
        lambda: any(word in frozen.log_tail(200) for word in ("result discarded", "abandoned")),
        60,
        "the worker that came back has its result refused",
        workers,
    )
    reap_until_finished([run], workers, timeout=60)

    assert_committed_once(run, ["s1", "s2", "s3"])
    all_started = RunEvent.objects.filter(run=run, type="step.started")
    assert sorted(all_started.values_list("data__seq", flat=True)) == [1, 2, 2, 3]


# The figure to hold: 100 runs of 5 steps, a worker SIGKILLed 20 times (whole workers and
# pool processes in turn), every run complete with each step and event committed once.
RUNS = 100
STEPS = 5
KILLS = ("whole worker", "pool process") * 10


def test_a_hundred_runs_survive_workers_killed_twenty_times(workers: Workers, owner: Any) -> None:
    seed = int(os.environ.get("FAULTS_SEED") or random.randrange(1_000_000))
    print(f"FAULTS_SEED={seed}")  # shown on failure: rerun with it to replay the same kills
    rng = random.Random(seed)
    ActorFactory(name="quick-writer", config={"replies": [ANSWER], "delay_ms": 60})
    recipe = published(owner, fault_document("quick-story", "quick-writer", steps=STEPS))
    # Half-second slices: runs are handed back to the queue between steps as well.
    pool = {"pool": "prefork", "RUN_TIME_SLICE_SECONDS": 0.5}
    for worker in [workers.start(**pool), workers.start(**pool), workers.start(**pool)]:
        worker.wait_ready()

    runs = [start_run(recipe, owner, topic=f"lighthouse {i}") for i in range(RUNS)]
    ids = [r.pk for r in runs]
    deadline = time.monotonic() + 150
    # The k-th kill once k/21 of the steps are committed: all of them land while runs go on,
    # however fast this machine works through them.
    step_kills_at = [round(RUNS * STEPS * k / (len(KILLS) + 1)) for k in range(1, len(KILLS) + 1)]
    kills: list[str] = []
    handed_back = 0
    while Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists():
        assert time.monotonic() < deadline, f"runs did not finish after {kills}\n{workers.logs()}"
        committed = StepRun.objects.filter(run__in=ids).count()
        if len(kills) < len(KILLS) and committed >= step_kills_at[len(kills)]:
            victim = rng.choice(workers.alive)
            how = KILLS[len(kills)]
            if how == "pool process" and victim.kill_pool_process():
                kills.append(f"{victim.name}: {how}")
            elif how == "whole worker":
                victim.kill()
                workers.start(**pool)  # its replacement joins once it has started
                kills.append(f"{victim.name}: {how}")
        handed_back += maintenance.reap()
        time.sleep(0.1)

    assert len(kills) == len(KILLS), f"the runs finished before all the kills: {kills}"
    for run in runs:
        assert_committed_once(run, [f"s{i}" for i in range(1, STEPS + 1)])
    assert StepRun.objects.filter(run__in=ids).count() == RUNS * STEPS
    retried = RunEvent.objects.filter(run__in=ids, type="step.started").count() - RUNS * STEPS
    assert retried >= 1, f"no kill interrupted a step: {kills}"
    print(f"kills: {kills}; steps started again: {retried}; runs handed back: {handed_back}")


# Many calls in flight: two threads-pool workers of 100 threads, 150 runs of 3 one-second
# calls, a whole worker SIGKILLed three times with its calls in the middle of their answers.
IN_FLIGHT_RUNS = 150
IN_FLIGHT_KILLS = 3  # fewer than RUN_MAX_STEP_CLAIMS: a step may be lost at every kill


def steps_in_flight(ids: list[int]) -> int:
    """Return how many of the runs' steps have started and not finished (before any kill)."""
    events = RunEvent.objects.filter(run__in=ids)
    started = events.filter(type="step.started").count()
    return started - events.filter(type="step.finished").count()


def test_runs_with_a_hundred_calls_in_flight_survive_threads_workers_killed(
    workers: Workers, owner: Any
) -> None:
    seed = int(os.environ.get("FAULTS_SEED") or random.randrange(1_000_000))
    print(f"FAULTS_SEED={seed}")
    rng = random.Random(seed)
    ActorFactory(name="thinking-writer", config={"replies": [ANSWER], "delay_ms": 1000})
    recipe = published(owner, fault_document("thinking-story", "thinking-writer", steps=3))
    pool = {"pool": "threads", "concurrency": 100}
    for worker in [workers.start(**pool), workers.start(**pool)]:
        worker.wait_ready()

    runs = [start_run(recipe, owner, topic=f"lighthouse {i}") for i in range(IN_FLIGHT_RUNS)]
    ids = [r.pk for r in runs]
    kills_at = [round(IN_FLIGHT_RUNS * 3 * k / (IN_FLIGHT_KILLS + 1)) for k in (1, 2, 3)]
    kills: list[str] = []
    most_in_flight = 0
    deadline = time.monotonic() + 150
    while Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists():
        assert time.monotonic() < deadline, f"runs did not finish after {kills}\n{workers.logs()}"
        if not kills:
            most_in_flight = max(most_in_flight, steps_in_flight(ids))
        committed = StepRun.objects.filter(run__in=ids).count()
        if len(kills) < IN_FLIGHT_KILLS and committed >= kills_at[len(kills)]:
            victim = rng.choice(workers.alive)
            victim.kill()
            workers.start(**pool)
            kills.append(f"{victim.name} with {steps_in_flight(ids)} steps begun")
        maintenance.reap()
        time.sleep(0.1)

    print(f"most calls in flight before the kills: {most_in_flight}; kills: {kills}")
    assert most_in_flight >= 100
    assert len(kills) == IN_FLIGHT_KILLS
    for run in runs:
        assert_committed_once(run, ["s1", "s2", "s3"])
