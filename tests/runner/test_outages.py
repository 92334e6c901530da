"""A broker that is down or frozen: what was committed is a success, nothing waits on it for
long, and the reaper sends what could not leave. A retried task goes on with its own lease."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from config.celery import app as celery_app
from runner import advance, dispatch, maintenance, outages, services, store
from runner.models import Run
from runner.publisher import outbox
from runner.status import RunStatus
from runner.tasks import RETRY_MAX_S, advance_run, retry_delay
from tests.live_server import free_port
from tests.runner.conftest import STORY, wait_for
from workflows.models import Recipe

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("runs_settled")]

SCRIPT = {"writer": [STORY], "judge": ["2"]}  # the judge sends the story to the reviewers


@pytest.fixture(autouse=True)
def closed_breakers() -> Iterator[None]:
    outages.broker.reset()
    outages.channel_layer.reset()
    yield
    outbox.drain()  # a push that fails trips the breaker from the outbox's thread: first
    outages.broker.reset()
    outages.channel_layer.reset()


class BrokerSwitch:
    """Point the Celery app at another broker, and back at the configured one."""

    def __init__(self) -> None:
        self.configured = (celery_app.conf.broker_url, celery_app.conf.broker_write_url)

    def point_at(self, url: str) -> None:
        celery_app.conf.broker_url = celery_app.conf.broker_write_url = url
        self._forget_connections()

    def restore(self) -> None:
        celery_app.conf.broker_url, celery_app.conf.broker_write_url = self.configured
        self._forget_connections()

    @staticmethod
    def _forget_connections() -> None:
        # The connection pool and the producer pool built on it hold the old broker.
        celery_app._pool = None
        celery_app.amqp._producer_pool = None


@pytest.fixture
def broker() -> Iterator[BrokerSwitch]:
    switch = BrokerSwitch()
    yield switch
    switch.restore()


@pytest.fixture
def frozen_redis() -> Iterator[int]:
    """A port that accepts connections and never answers, as a Redis stopped with SIGSTOP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def client(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_run_start_is_a_success_when_the_broker_is_down(
    story_recipe: Recipe, owner: Any, broker: BrokerSwitch
) -> None:
    broker.point_at(f"redis://127.0.0.1:{free_port()}/0")

    answer = client(owner).post(
        f"/api/recipes/{story_recipe.slug}/runs", {"inputs": {"topic": "owls"}}, format="json"
    )

    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert (run.status, run.enqueued_at) == (RunStatus.QUEUED, None)  # left to the reaper


def test_a_run_start_does_not_wait_on_a_frozen_broker(
    story_recipe: Recipe, owner: Any, broker: BrokerSwitch, frozen_redis: int, settings: Any
) -> None:
    broker.point_at(f"redis://127.0.0.1:{frozen_redis}/0")
    api = client(owner)

    began = time.monotonic()
    answers = [
        api.post(f"/api/recipes/{story_recipe.slug}/runs", {"inputs": {"topic": t}}, format="json")
        for t in ("owls", "bats", "cats")
    ]
    took = time.monotonic() - began

    assert [a.status_code for a in answers] == [201, 201, 201]
    # One wait on the broker's timeout; the next starts skip it while it is known to be down.
    assert took < settings.BROKER_TIMEOUT_SECONDS * 2 + 2
    assert Run.objects.filter(enqueued_at=None).count() == 3


def test_the_reaper_sends_a_run_whose_message_did_not_leave(
    worker: Any, story_recipe: Recipe, owner: Any, broker: BrokerSwitch
) -> None:
    broker.point_at(f"redis://127.0.0.1:{free_port()}/0")
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "owls"}, script=SCRIPT
    )
    run.refresh_from_db()
    assert run.enqueued_at is None
    broker.restore()
    outages.broker.reset()

    assert maintenance.reap() == 1
    assert wait_for(run, RunStatus.WAITING_HUMAN).status == RunStatus.WAITING_HUMAN


def test_a_decision_is_a_success_when_the_broker_is_down(
    worker: Any, story_recipe: Recipe, owner: Any, reviewer: Any, broker: BrokerSwitch
) -> None:
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "owls"}, script=SCRIPT
    )
    task = wait_for(run, RunStatus.WAITING_HUMAN).tasks.get()
    broker.point_at(f"redis://127.0.0.1:{free_port()}/0")

    answer = client(reviewer).post(
        f"/api/tasks/{task.pk}/decide", {"decision": "approve"}, format="json"
    )

    assert answer.status_code == 200, answer.content
    run.refresh_from_db()
    assert (run.status, run.enqueued_at) == (RunStatus.RUNNING, None)


def test_a_retried_task_takes_back_its_own_live_lease(story_recipe: Recipe, owner: Any) -> None:
    # No message is sent: the module's worker must not take the run.
    run = Run.objects.create(
        recipe=story_recipe,
        version=story_recipe.latest_version,
        created_by=owner,
        inputs={"topic": "owls"},
        status=RunStatus.RUNNING,
        next={"step": "write"},
        lease_token="held-by-the-interrupted-task",
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )

    assert store.claim(run.pk) is None
    assert store.claim(run.pk, resume_token="another-workers-token") is None
    claim = store.claim(run.pk, resume_token="held-by-the-interrupted-task")
    assert claim is not None
    assert claim.step.key == "write"
    release(run)


def release(run: Run) -> None:
    """Drop the lease a test took by hand: no worker is running the step."""
    Run.objects.filter(pk=run.pk).update(lease_token="", lease_expires_at=None)


def test_retries_back_off_to_a_few_seconds() -> None:
    delays = [retry_delay(n) for n in range(8)]

    assert 0.5 <= delays[0] < 1.0
    assert all(d <= RETRY_MAX_S + 0.5 for d in delays)
    assert delays[-1] >= RETRY_MAX_S


def test_a_recovered_run_is_served_before_the_runs_queued_ahead_of_it(settings: Any) -> None:
    if not settings.REDIS_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("REDIS_URL is not set: message priorities need Redis")
        pytest.skip("message priorities need Redis (REDIS_URL)")
    queue = "branchline-priorities"
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)
        for run_id in (1, 2, 3):  # ordinary messages, queued first
            advance_run.apply_async((run_id,), queue=queue, connection=conn)
        advance_run.apply_async(
            (99,), queue=queue, connection=conn, priority=dispatch.RECOVERY_PRIORITY
        )
        served = []
        with conn.SimpleQueue(queue) as messages:
            for _ in range(4):
                message = messages.get(timeout=2)
                served.append(message.payload[0][0])
                message.ack()

    assert served == [99, 1, 2, 3]


def test_the_reaper_sends_every_waiting_run_once_redis_lost_its_queues(
    story_recipe: Recipe, owner: Any, settings: Any
) -> None:
    if not settings.REDIS_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("REDIS_URL is not set: the broker's data needs Redis")
        pytest.skip("the broker's data needs Redis (REDIS_URL)")
    with celery_app.connection_for_write() as conn:
        conn.default_channel.client.set(maintenance.QUEUES_INTACT_KEY, "1")
    # Queued a moment ago, its message in the queue (a worker of an earlier test may be alive:
    # no message is sent here, so that none takes the run before the reaper does).
    queued = Run.objects.create(
        recipe=story_recipe,
        version=story_recipe.latest_version,
        created_by=owner,
        inputs={"topic": "owls"},
        next={"step": "write"},
        enqueued_at=timezone.now(),
    )
    assert maintenance.reap() == 0  # nothing to do while the queues are intact

    with celery_app.connection_for_write() as conn:  # Redis restarted empty
        conn.default_channel.client.delete(maintenance.QUEUES_INTACT_KEY)

    assert maintenance.reap() == 1
    assert Run.objects.get(pk=queued.pk).enqueued_at is not None
    assert maintenance.reap() == 0


def test_a_retry_that_meets_the_outage_again_keeps_the_lease_it_may_take_back(
    story_recipe: Recipe, owner: Any, request: pytest.FixtureRequest
) -> None:
    run = Run.objects.create(
        recipe=story_recipe,
        version=story_recipe.latest_version,
        created_by=owner,
        inputs={"topic": "owls"},
        status=RunStatus.RUNNING,
        next={"step": "write"},
        lease_token="held-by-the-interrupted-task",
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )
    request.addfinalizer(lambda: release(run))  # runs once the database is back
    request.getfixturevalue("database_down")

    with pytest.raises(advance.Interrupted) as interrupted:
        advance.advance(run.pk, resume_token="held-by-the-interrupted-task")

    # The next retry, once the database is back, still takes the step at once.
    assert interrupted.value.token == "held-by-the-interrupted-task"
