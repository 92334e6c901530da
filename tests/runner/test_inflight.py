"""Many model calls in flight on one worker process: a step that waits on a model holds a
thread, not a database connection, so the process's pool bounds its connections whatever the
number of steps it runs at once.

One `celery worker` process (the threads pool, as `celery -A config worker` runs by default)
on PostgreSQL and Redis, and an OpenAI-compatible stub that answers every call after a few
seconds and counts how many it is answering at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.celery import app as celery_app
from runner import services
from runner.models import Run, StepRun
from runner.status import TERMINAL, RunStatus
from tests.factories import ActorFactory, chain_document
from tests.runner.providers.stub_server import StubServer, reply
from tests.runner.sessions import SessionSampler
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    purge_queue,
    require_services,
    wait_for_worker_sessions_to_close,
)
from workflows.models import Actor
from workflows.services import recipe_import, recipe_publish

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
def worker(
    transactional_db: None,
    tmp_path: Path,
    stub: StubServer,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> Iterator[WorkerProcess]:
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    settings.PROVIDER_URL_ALLOWLIST = [stub.address]
    purge_queue()
    process = WorkerProcess(
        "inflight",
        tmp_path,
        pool="threads",
        concurrency=RUNS,
        PROVIDER_URL_ALLOWLIST=stub.address,
        DATABASE_WORKER_POOL_MAX_SIZE=POOL_SIZE,
        RUN_LEASE_SECONDS=3,  # renewed (every second) while the calls wait
    ).start()
    try:
        yield process.wait_ready()
    finally:
        process.kill()
        purge_queue()
        wait_for_worker_sessions_to_close()


def test_200_calls_in_flight_on_one_worker_hold_no_more_connections_than_its_pool(
    worker: WorkerProcess, stub: StubServer, owner: Any
) -> None:
    ActorFactory(
        name="stub-writer",
        provider=Actor.Provider.OPENAI,
        model="stub",
        base_url=stub.base_url,
        config={},
    )
    document = chain_document(slug="waits", actor="stub-writer", steps=1, branches=[])
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)

    with SessionSampler() as sessions:
        began = time.monotonic()
        ids = [
            services.run_start(user=owner, recipe=recipe, inputs={"topic": f"lighthouse {i}"}).pk
            for i in range(RUNS)
        ]
        started = time.monotonic() - began
        pending = Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL)
        deadline = time.monotonic() + 120
        while pending.exists():
            assert time.monotonic() < deadline, f"runs left: {pending.count()}\n{worker.log_tail()}"
            time.sleep(0.2)
        wall = time.monotonic() - began

    print(
        f"{RUNS} runs of one {CALL_S:g} s call in {wall:.1f} s (started in {started:.1f} s); "
        f"most calls in flight "
        f"{stub.most_chats_in_flight}; most worker connections {sessions.worker_max} (pool {POOL_SIZE})"
    )
    statuses = set(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == {RunStatus.SUCCEEDED}, worker.log_tail()
    assert StepRun.objects.filter(run__in=ids, response=ANSWER).count() == RUNS
    # Nearly all the calls waited at the same time (the starts take a moment to queue)...
    assert stub.most_chats_in_flight >= RUNS * 0.9
    # ...and the worker's threads shared its pool meanwhile.
    assert 1 <= sessions.worker_max <= POOL_SIZE
    # No step waited long for a connection: the runs end a few calls' time after the starts.
    assert wall < 3 * CALL_S + 10
