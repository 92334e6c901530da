"""Actors' workload limits: slots shared by every worker through the database, and a step whose
actor is full waiting in the queue instead of failing (runner/capacity.py)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from config.celery import app as celery_app
from runner import advance, capacity, maintenance, services
from runner.models import ActorSlot, Run, StepRun
from runner.status import RUNNABLE, TERMINAL, RunStatus, StepStatus
from tests.factories import admin_form_data, chain_document, openai_actor
from tests.runner.conftest import wait_for
from tests.runner.providers.stub_server import CHAT_PATH, RecordedRequest, StubServer, reply
from tests.runner.recipes import branch, drive, publish_document, stub_actor
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    purge_queue,
    wait_for_worker_sessions_to_close,
)
from workflows.models import Actor, Recipe

LIMITED = capacity.Limits(max_concurrency=2)
ANSWER = "The keeper lit the lamp and the ships came home."


class CountingStub(StubServer):
    """The stub model server, counting per model the chat requests it is answering.

    A request counts from its arrival until the stub starts writing the answer (it holds it
    for the answer's `delay_s` meanwhile): within the client's call, so the count never shows
    more calls in flight than there were.
    """

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: Counter[str] = Counter()
        self.most_in_flight: Counter[str] = Counter()
        self.arrivals: list[tuple[str, float]] = []  # (model, monotonic time)
        self._arriving = threading.local()

    def _record(self, request: RecordedRequest) -> None:
        super()._record(request)
        self._arriving.model = request.model if request.path == CHAT_PATH else None

    def _wait(self, seconds: float) -> bool:
        # The first wait of a chat request is its answer's delay (the handler's first step).
        model, self._arriving.model = getattr(self._arriving, "model", None), None
        if model is None:
            return super()._wait(seconds)
        with self._lock:
            self.in_flight[model] += 1
            self.most_in_flight[model] = max(self.most_in_flight[model], self.in_flight[model])
            self.arrivals.append((model, time.monotonic()))
        try:
            return super()._wait(seconds)
        finally:
            with self._lock:
                self.in_flight[model] -= 1


@pytest.fixture
def stub(settings: Any) -> Iterator[CountingStub]:
    with CountingStub() as server:
        settings.PROVIDER_URL_ALLOWLIST = [server.address]
        server.default = reply(ANSWER, delay_s=0.15)
        yield server


def limited_recipe(owner: Any, stub: StubServer, **limits: int) -> Recipe:
    """A one-step recipe whose model (`stub-capped`, actor `capped`) has `limits`."""
    stub_actor(stub, "capped", model="stub-capped", **limits)
    return publish_document(
        owner, chain_document(slug="capped", actor="capped", steps=1, branches=[])
    )


def start(recipe: Recipe, owner: Any, n: int = 1) -> list[Run]:
    return [
        services.run_start(user=owner, recipe=recipe, inputs={"topic": f"ship {i}"})
        for i in range(n)
    ]


# -- slots ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_refuses_a_slot_beyond_max_concurrency_until_one_is_released() -> None:
    first = capacity.acquire("a", LIMITED, timeout_s=10)
    capacity.acquire("a", LIMITED, timeout_s=10)

    with pytest.raises(capacity.ActorFull, match="actor 'a' is full: 2 of 2 calls in flight"):
        capacity.acquire("a", LIMITED, timeout_s=10)
    capacity.acquire("b", LIMITED, timeout_s=10)  # another actor's slots are its own

    capacity.release(first)
    capacity.acquire("a", LIMITED, timeout_s=10)


@pytest.mark.django_db
def test_it_counts_every_call_started_in_the_rate_window(settings: Any) -> None:
    settings.ACTOR_RATE_WINDOW_SECONDS = 2
    limits = capacity.Limits(max_calls_per_minute=2)
    for _ in range(2):
        capacity.release(capacity.acquire("a", limits, timeout_s=10))

    # Released, they still count: the rate is of calls started.
    with pytest.raises(capacity.ActorFull, match="2 of 2 calls in 2 s") as full:
        capacity.acquire("a", limits, timeout_s=10)
    assert 0 < full.value.retry_after_s <= 2

    time.sleep(full.value.retry_after_s + 0.01)
    capacity.acquire("a", limits, timeout_s=10)


@pytest.mark.django_db
def test_a_slot_of_a_worker_that_died_stops_counting_after_its_calls_time_budget() -> None:
    limits = capacity.Limits(max_concurrency=1)
    held = capacity.acquire("a", limits, timeout_s=10)
    slot = ActorSlot.objects.get(pk=held)
    assert slot.expires_at == slot.acquired_at + timedelta(seconds=10 + capacity.STALE_MARGIN_S)
    with pytest.raises(capacity.ActorFull):
        capacity.acquire("a", limits, timeout_s=10)

    # Never released: its worker died. Once its budget and the margin are over, it is free.
    ActorSlot.objects.filter(pk=held).update(expires_at=timezone.now() - timedelta(seconds=1))

    capacity.acquire("a", limits, timeout_s=10)


@pytest.mark.django_db
def test_a_held_slot_is_released_when_its_block_raises() -> None:
    with pytest.raises(RuntimeError), capacity.held("a", LIMITED, timeout_s=10):
        raise RuntimeError("the call failed")

    assert ActorSlot.objects.get().released_at is not None


@pytest.mark.django_db
def test_an_actor_without_limits_never_touches_the_slots(
    django_assert_num_queries: Any,
) -> None:
    with django_assert_num_queries(0), capacity.held("free", capacity.NO_LIMITS, timeout_s=10):
        pass


def release_later(slot_id: int, delay_s: float) -> None:
    """Release the slot from another thread (another worker) after `delay_s`."""

    def release() -> None:
        try:
            capacity.release(slot_id)
        finally:
            connection.close()

    threading.Timer(delay_s, release).start()


@pytest.mark.django_db
def test_a_run_of_actors_without_limits_sends_no_query_about_slots(
    owner: Any, stub: CountingStub
) -> None:
    stub_actor(stub, "free", model="stub-free")
    recipe = publish_document(
        owner, chain_document(slug="free", actor="free", steps=2, branches=[])
    )
    (run,) = start(recipe, owner)

    with CaptureQueriesContext(connection) as queries:
        run = drive(run)

    assert run.status == RunStatus.SUCCEEDED
    assert len(stub.chat_requests) == 2
    slot_table = ActorSlot._meta.db_table
    assert not [q["sql"] for q in queries.captured_queries if slot_table in q["sql"]]


@pytest.mark.django_db
def test_a_run_of_a_limited_actor_takes_and_releases_a_slot_per_call(
    owner: Any, stub: CountingStub
) -> None:
    (run,) = start(limited_recipe(owner, stub, max_concurrency=1), owner)

    run = drive(run)

    assert run.status == RunStatus.SUCCEEDED
    slot = ActorSlot.objects.get()
    assert (slot.actor, slot.run_id, slot.seq) == ("capped", run.pk, 1)
    assert slot.released_at is not None


@pytest.mark.django_db(transaction=True)
def test_waiting_in_the_worker_takes_a_slot_freed_meanwhile() -> None:
    limits = capacity.Limits(max_concurrency=1)
    held = capacity.acquire("a", limits, timeout_s=10)
    release_later(held, 0.2)

    began = time.monotonic()
    capacity.acquire_waiting("a", limits, timeout_s=10, wait_s=5)

    assert 0.15 < time.monotonic() - began < 3
    with pytest.raises(capacity.ActorFull):  # and the wait is bounded
        capacity.acquire_waiting("a", limits, timeout_s=10, wait_s=0.2)


@pytest.mark.django_db
def test_available_tells_which_actors_have_a_free_slot_in_one_query(
    django_assert_num_queries: Any,
) -> None:
    Actor.objects.create(
        name="busy", provider="scripted", config={"replies": ["x"]}, max_concurrency=1
    )
    Actor.objects.create(
        name="spent", provider="scripted", config={"replies": ["x"]}, max_calls_per_minute=1
    )
    Actor.objects.create(
        name="idle", provider="scripted", config={"replies": ["x"]}, max_concurrency=1
    )
    Actor.objects.create(name="free", provider="scripted", config={"replies": ["x"]})
    capacity.acquire("busy", capacity.Limits(max_concurrency=1), timeout_s=10)
    capacity.release(
        capacity.acquire("spent", capacity.Limits(max_calls_per_minute=1), timeout_s=10)
    )

    with django_assert_num_queries(1):
        found = capacity.available(["busy", "spent", "idle", "free", "@human:editors"])

    assert found == {
        "busy": False,
        "spent": False,
        "idle": True,
        "free": True,
        "@human:editors": True,
    }


@pytest.mark.django_db
def test_the_reaper_deletes_the_slots_that_count_for_nothing_any_more(settings: Any) -> None:
    settings.ACTOR_RATE_WINDOW_SECONDS = 60
    now = timezone.now()
    long_ago = now - timedelta(minutes=5)

    def slot(name: str, acquired_at: Any, *, released: bool, expires_in_s: float) -> None:
        ActorSlot.objects.create(
            actor=name,
            acquired_at=acquired_at,
            expires_at=now + timedelta(seconds=expires_in_s),
            released_at=acquired_at if released else None,
        )

    slot("ended", long_ago, released=True, expires_in_s=-200)
    slot("dead-worker", long_ago, released=False, expires_in_s=-100)
    slot("long-call", long_ago, released=False, expires_in_s=100)  # still in flight
    slot("in-window", now - timedelta(seconds=10), released=True, expires_in_s=100)

    maintenance.reap(now=now)

    assert sorted(ActorSlot.objects.values_list("actor", flat=True)) == ["in-window", "long-call"]


# -- actors' fields ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_sets_and_shows_an_actors_limits(staff_api: APIClient) -> None:
    body = openai_actor(max_concurrency=2, max_calls_per_minute=30)

    created = staff_api.post("/api/actors/", body, format="json")

    assert created.status_code == 201, created.content
    assert (created.json()["max_concurrency"], created.json()["max_calls_per_minute"]) == (2, 30)
    unlimited = staff_api.post("/api/actors/", openai_actor(name="other"), format="json").json()
    assert (unlimited["max_concurrency"], unlimited["max_calls_per_minute"]) == (None, None)


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["max_concurrency", "max_calls_per_minute"])
def test_the_api_refuses_a_limit_of_zero_with_the_field(staff_api: APIClient, field: str) -> None:
    response = staff_api.post("/api/actors/", openai_actor(**{field: 0}), format="json")

    assert response.status_code == 400, response.content
    assert any(
        field in error and "greater than or equal to 1" in error
        for error in response.json()["errors"]
    )


@pytest.mark.django_db
def test_the_admin_edits_an_actors_limits(admin_client: Client) -> None:
    actor = Actor.objects.create(name="w", provider="scripted", config={"replies": ["x"]})
    data = {**admin_form_data(actor), "max_concurrency": "3", "max_calls_per_minute": ""}

    response = admin_client.post(f"/admin/workflows/actor/{actor.pk}/change/", data)

    assert response.status_code == 302, response.content.decode()[:2000]
    actor.refresh_from_db()
    assert (actor.max_concurrency, actor.max_calls_per_minute) == (3, None)


@pytest.mark.django_db
def test_the_actor_page_shows_its_limits(client: Client, user: Any) -> None:
    Actor.objects.create(
        name="capped",
        provider="scripted",
        config={"replies": ["x"]},
        max_concurrency=2,
        max_calls_per_minute=1,
    )
    Actor.objects.create(name="free", provider="scripted", config={"replies": ["x"]})
    client.force_login(user)

    capped = client.get("/actors/capped/").content.decode()
    free = client.get("/actors/free/").content.decode()

    assert "at most 2 calls at once · at most 1 call a minute" in capped
    assert "at most" not in free


# -- steps of a full actor --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_step_whose_actor_is_full_waits_in_the_queue_then_succeeds(
    worker: Any,
    runs_settled: None,
    owner: Any,
    stub: CountingStub,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given back a dozen times while it waits: were it counted as a lost claim, the run would
    # fail after two.
    settings.ACTOR_FULL_RETRY_SECONDS = 0.05
    settings.RUN_MAX_STEP_CLAIMS = 2
    recipe = limited_recipe(owner, stub, max_concurrency=1)
    held = capacity.acquire("capped", capacity.Limits(max_concurrency=1), timeout_s=30)
    free = stub_actor(stub, "free", model="stub-free")
    other = publish_document(
        owner, chain_document(slug="free", actor=free.name, steps=1, branches=[])
    )

    caplog.set_level(logging.INFO, logger="runner.advance")
    (waiting,) = start(recipe, owner)
    time.sleep(1.0)
    # The worker is not held by the waiting step: another run goes through meanwhile.
    (passing,) = start(other, owner)
    wait_for(passing, RunStatus.SUCCEEDED)

    waiting.refresh_from_db()
    assert waiting.status in RUNNABLE
    assert not StepRun.objects.filter(run=waiting).exists()
    assert [r.model for r in stub.chat_requests] == ["stub-free"]

    capacity.release(held)
    wait_for(waiting, RunStatus.SUCCEEDED)
    assert [s.status for s in waiting.steps.all()] == [StepStatus.SUCCEEDED]
    given_back = [
        r for r in caplog.records if "waits" in r.getMessage() and "queue" in r.getMessage()
    ]
    assert len(given_back) > 2, "it was claimed, found its actor full and given back, again"
    # However often it was claimed, the monitor was told once that the step started.
    assert waiting.events.filter(type="step.started").count() == 1
    # The actor without limits took no slot (its calls never touch the table).
    assert set(ActorSlot.objects.values_list("actor", flat=True)) == {"capped"}


@pytest.mark.django_db(transaction=True)
def test_an_evaluator_of_a_full_actor_is_waited_for_in_the_worker(
    worker: Any, runs_settled: None, owner: Any, stub: CountingStub
) -> None:
    stub_actor(stub, "writer", model="stub-writer")
    stub_actor(stub, "judge", model="stub-judge", max_concurrency=1)
    stub.default = reply("9")
    great = {
        "type": "ai_evaluation",
        "operator": "greater_equal",
        "value": 8,
        "evaluator": "judge",
        "prompt": "Rate it 1-10",
    }
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "judged",
            "name": "Judged",
            "inputs": {"topic": {"type": "string", "required": True}},
            "actors": {"writer": "writer", "judge": "judge"},
            "steps": [
                {
                    "key": "write",
                    "name": "Write",
                    "kind": "llm",
                    "actor": "writer",
                    "prompt": "Write about {topic}",
                    "branches": [
                        branch("great", 1, great, "@complete", action="QUALITY_APPROVED"),
                        branch("meh", 2, {"type": "default"}, "@end", action="END_RECIPE"),
                    ],
                }
            ],
        },
    )
    held = capacity.acquire("judge", capacity.Limits(max_concurrency=1), timeout_s=30)
    release_later(held, 1.0)

    (run,) = start(recipe, owner)

    wait_for(run, RunStatus.SUCCEEDED)
    assert [r.model for r in stub.chat_requests] == ["stub-writer", "stub-judge"]
    assert run.events.filter(type="step.started").count() == 1  # never given back


# -- the rate limit ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_no_more_calls_than_the_rate_limit_start_in_any_window(
    worker: Any, runs_settled: None, owner: Any, stub: CountingStub, settings: Any
) -> None:
    window, limit = 1.0, 2
    settings.ACTOR_RATE_WINDOW_SECONDS = window
    stub.default = reply(ANSWER)  # no delay: only the rate holds the calls back
    recipe = limited_recipe(owner, stub, max_calls_per_minute=limit)

    runs = start(recipe, owner, 7)

    for run in runs:
        wait_for(run, RunStatus.SUCCEEDED, timeout=30)
    starts = sorted(t for model, t in stub.arrivals if model == "stub-capped")
    assert len(starts) == 7
    # A slot is taken a moment before its request arrives: a little slack for that delay.
    span = window - 0.1
    most = max(sum(1 for t in starts if s <= t < s + span) for s in starts)
    assert most <= limit, starts
    assert starts[-1] - starts[0] >= (7 // limit - 1) * window


# -- under load: 50 concurrent runs -----------------------------------------------------------

RUNS = 50


def assert_never_more_than_the_limit_in_flight(stub: CountingStub, runs: list[Run]) -> None:
    statuses = Counter(
        Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)
    )
    assert statuses == {RunStatus.SUCCEEDED: RUNS}, statuses
    assert len([r for r in stub.chat_requests if r.model == "stub-capped"]) == RUNS
    assert stub.most_in_flight["stub-capped"] == 2, stub.most_in_flight
    assert not ActorSlot.objects.filter(released_at__isnull=True).exists()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_runs_on_worker_processes_never_pass_the_actors_concurrency(
    owner: Any, stub: CountingStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four `celery worker` processes on PostgreSQL and Redis, as in production."""
    if connection.vendor != "postgresql":
        pytest.skip(
            "worker processes cannot share the SQLite test database's in-memory broker; "
            "the threaded test below covers SQLite"
        )
    if not os.environ.get("REDIS_URL"):
        reason = "worker processes need REDIS_URL for their broker"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    purge_queue()
    recipe = limited_recipe(owner, stub, max_concurrency=2)
    workers = [
        WorkerProcess(
            f"capacity{i}", tmp_path, pool="solo", PROVIDER_URL_ALLOWLIST=stub.address
        ).start()
        for i in range(4)
    ]
    try:
        for process in workers:
            process.wait_ready()
        runs = start(recipe, owner, RUNS)
        deadline = time.monotonic() + 150
        pending = {r.pk for r in runs}
        while pending and time.monotonic() < deadline:
            finished = Run.objects.filter(pk__in=pending, status__in=TERMINAL)
            pending -= set(finished.values_list("pk", flat=True))
            time.sleep(0.2)
        logs = "\n".join(f"--- {w.name} ---\n{w.log_tail()}" for w in workers)
        assert not pending, f"{len(pending)} runs unfinished\n{logs}"
        assert_never_more_than_the_limit_in_flight(stub, runs)
    finally:
        for process in workers:
            process.kill()
        purge_queue()
        wait_for_worker_sessions_to_close()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_runs_on_worker_threads_never_pass_the_actors_concurrency(
    owner: Any, stub: CountingStub
) -> None:
    """Four threads, each a worker with its own database connection, advance the runs; on
    SQLite as on PostgreSQL (the embedded default runs one worker, the slots still hold
    between it and `run_recipe`'s, or any process sharing the file)."""
    recipe = limited_recipe(owner, stub, max_concurrency=2)
    runs = start(recipe, owner, RUNS)
    celery_app.control.purge()  # the threads are the workers here
    ids = [r.pk for r in runs]
    failures: list[BaseException] = []
    deadline = time.monotonic() + 150

    def work(offset: int) -> None:
        try:
            while time.monotonic() < deadline:
                open_ids = list(
                    Run.objects.filter(pk__in=ids)
                    .exclude(status__in=TERMINAL)
                    .values_list("pk", flat=True)
                )
                if not open_ids:
                    return
                for run_id in open_ids[offset:] + open_ids[:offset]:
                    advance.advance(run_id, time_slice=0)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i * 12,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not failures, failures
    assert_never_more_than_the_limit_in_flight(stub, runs)
