"""Many model calls in flight on one worker process: a step that waits on a model holds a
thread, not a database connection, so the process's pool bounds its connections whatever the
number of steps it runs at once.

One `celery worker` process (the threads pool, as `celery -A config worker` runs by default)
on PostgreSQL and Redis, and an OpenAI-compatible stub that answers every call after a few
seconds and counts how many it is answering at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.celery import app as celery_app
from runner import services
from runner.models import Run, StepRun
from runner.status import TERMINAL, RunStatus
from tests.factories import ActorFactory, chain_document
from tests.runner.providers.stub_server import StubServer, reply
from tests.runner.recipes import publish_document, stub_actor
from tests.runner.sessions import SessionSampler
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    purge_queue,
    require_services,
    wait_for_worker_sessions_to_close,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

RUNS = 200
CALL_S = 4.0
POOL_SIZE = 4
ANSWER = "The keeper climbed the stairs, lit the lamp and watched the ships come home."


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        server.default = reply(ANSWER, delay_s=CALL_S)
        yield server


@pytest.fixture
def workers(
    transactional_db: None,
    tmp_path: Path,
    stub: StubServer,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start threads-pool worker processes on the fault workers' queue; kill them at the end."""
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    settings.PROVIDER_URL_ALLOWLIST = [stub.address]
    purge_queue()
    started: list[WorkerProcess] = []

    def start(*, concurrency: int, loglevel: str = "warning", **env: Any) -> WorkerProcess:
        process = WorkerProcess(
            f"inflight{len(started) + 1}",
            tmp_path,
            pool="threads",
            concurrency=concurrency,
            loglevel=loglevel,
            PROVIDER_URL_ALLOWLIST=stub.address,
            **env,
        )
        started.append(process.start())
        return process.wait_ready()

    try:
        yield start
    finally:
        for process in started:
            process.kill()
        purge_queue()
        wait_for_worker_sessions_to_close()


def wait_finished(ids: list[int], worker: WorkerProcess, timeout: float) -> None:
    pending = Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
    deadline = time.monotonic() + timeout
    while pending.exists():
        assert time.monotonic() < deadline, f"runs left: {pending.count()}\n{worker.log_tail()}"
        time.sleep(0.02)


def test_200_calls_in_flight_on_one_worker_hold_no_more_connections_than_its_pool(
    workers: Callable[..., WorkerProcess], stub: StubServer, owner: Any
) -> None:
    worker = workers(
        concurrency=RUNS,
        DATABASE_WORKER_POOL_MAX_SIZE=POOL_SIZE,
        RUN_LEASE_SECONDS=3,  # renewed (every second) while the calls wait
    )
    # Every call waits its 4 s and then until all of them are in: on a slow day the starts
    # alone take longer than a call, and the count must not depend on that.
    all_in = threading.Event()
    stub.default = reply(ANSWER, delay_s=CALL_S, gate=all_in)
    stub_actor(stub, "stub-writer", timeout_s=120)
    document = chain_document(slug="waits", actor="stub-writer", steps=1, branches=[])
    recipe = publish_document(owner, document)

    with SessionSampler() as sessions:
        began = time.monotonic()
        ids = [
            services.run_start(user=owner, recipe=recipe, inputs={"topic": f"lighthouse {i}"}).pk
            for i in range(RUNS)
        ]
        started = time.monotonic() - began
        deadline = time.monotonic() + 60
        while stub.chats_in_flight < RUNS and time.monotonic() < deadline:
            time.sleep(0.02)
        in_flight = stub.chats_in_flight
        all_in.set()
        released = time.monotonic()
        wait_finished(ids, worker, timeout=120)
        after_release = time.monotonic() - released

    print(
        f"{RUNS} runs of one {CALL_S:g} s call: started in {started:.1f} s, all {in_flight} "
        f"calls in flight {released - began:.1f} s after the first start, finished "
        f"{after_release:.1f} s after; most worker connections {sessions.worker_max} "
        f"(pool {POOL_SIZE})"
    )
    # All the calls waited at the same time...
    assert in_flight == RUNS, worker.log_tail()
    statuses = set(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == {RunStatus.SUCCEEDED}, worker.log_tail()
    assert StepRun.objects.filter(run__in=ids, response=ANSWER).count() == RUNS
    # ...and the worker's threads shared its pool meanwhile.
    assert 1 <= sessions.worker_max <= POOL_SIZE
    # No step waited long for a connection: the last call's own wait, then the commits.
    assert after_release < CALL_S + 15


def test_a_threads_pool_worker_takes_a_run_handed_back_at_once(
    workers: Callable[..., WorkerProcess], owner: Any
) -> None:
    # One thread and no time slice: each of the 20 steps hands the run back to the queue, and
    # the worker's event loop must take its message as soon as the thread is free (it slept
    # up to its next timer before: about 0.1 s a step, over 2 s in all).
    worker = workers(concurrency=1, RUN_TIME_SLICE_SECONDS=0)
    ActorFactory(name="quick-writer", config={"replies": [ANSWER]})
    document = chain_document(slug="hops", actor="quick-writer", steps=20, branches=[])
    recipe = publish_document(owner, document)
    warm_up = services.run_start(user=owner, recipe=recipe, inputs={"topic": "warm-up"})
    wait_finished([warm_up.pk], worker, timeout=30)

    run = services.run_start(user=owner, recipe=recipe, inputs={"topic": "a lighthouse"})
    began = time.monotonic()
    wait_finished([run.pk], worker, timeout=30)
    wall = time.monotonic() - began

    print(f"20 steps, each handed back to the queue, in {wall:.2f} s")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert StepRun.objects.filter(run=run).count() == 20
    assert wall < 1.5


def test_a_cancelled_runs_call_in_flight_is_abandoned_within_seconds_and_never_committed(
    workers: Callable[..., WorkerProcess], stub: StubServer, owner: Any
) -> None:
    # A 20 s answer, streamed a word every 0.25 s: the cancel comes in its middle.
    words = [f"word{i} " for i in range(80)]
    stub.default = reply(chunks=words, interval_s=0.25)
    worker = workers(concurrency=4, loglevel="info")
    stub_actor(stub, "stub-writer", timeout_s=60)
    document = chain_document(slug="long", actor="stub-writer", steps=1, branches=[])
    recipe = publish_document(owner, document)
    run = services.run_start(user=owner, recipe=recipe, inputs={"topic": "a lighthouse"})
    deadline = time.monotonic() + 30
    while stub.chats_in_flight == 0:
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.02)
    time.sleep(1)  # a few words in

    services.run_cancel(run=run)
    cancelled = time.monotonic()
    while stub.chats_in_flight:
        assert time.monotonic() - cancelled < 10, worker.log_tail()
        time.sleep(0.02)
    stopped_after = time.monotonic() - cancelled

    print(f"the call was abandoned {stopped_after:.2f} s after the cancel")
    assert stopped_after < 3
    time.sleep(0.5)  # anything the worker would still write
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert not StepRun.objects.filter(run=run).exists()
    assert "abandoned" in worker.log_tail(200)
