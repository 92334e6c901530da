"""The production topology under concurrent load: database connections stay within the pool.

daphne serves `config.asgi:application` in its own process with the README's production settings
(DEBUG=0, EMBEDDED_WORKER=0, PostgreSQL and Redis) and a pool of `POOL_MAX_SIZE` connections; a
`celery worker` process (its threads pool, with a pool of `WORKER_POOL_MAX_SIZE` connections)
runs the runs. The clients are asyncio tasks
with httpx and token auth, all on 127.0.0.1. A thread samples the test database's sessions in
`pg_stat_activity` throughout, by the application name each process connects with.

Before the pool, 50 concurrent requests made PostgreSQL refuse connections ("too many clients
already"): the server kept a persistent connection in each request's thread.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import connect as websockets_connect
from websockets.typing import Origin

from config.celery import app as celery_app
from runner import services
from runner.models import HumanTask, Run
from runner.status import RunStatus, TaskStatus
from tests.factories import GroupFactory, UserFactory
from tests.runner.server_process import SERVER_APPLICATION_NAME, ServerProcess
from tests.runner.sessions import SAMPLER_APPLICATION_NAME, Sessions, SessionSampler
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    database_url,
    purge_queue,
    require_services,
    wait_for_worker_sessions_to_close,
)
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
]

POOL_MAX_SIZE = 10
WORKER_POOL_MAX_SIZE = 3
REQUEST_TIMEOUT_S = 30.0
LOCKER_APPLICATION_NAME = "branchline-load-locker"


def review_document() -> dict[str, Any]:
    """A recipe whose only step asks the reviewers; approve completes the run."""
    return {
        "format": "branchline.recipe/v1",
        "slug": "load-review",
        "name": "Review under load",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"editors": "@human:load-reviewers"},
        "steps": [
            {
                "key": "review",
                "name": "Review",
                "kind": "human",
                "actor": "editors",
                "prompt": "Approve a story about {topic}?",
                "timeout_s": 3600,
                "branches": [
                    {
                        "name": "approved",
                        "priority": 1,
                        "when": {
                            "type": "human_decision",
                            "operator": "user_choice",
                            "value": "approve",
                        },
                        "action": "QUALITY_APPROVED",
                        "target": "@complete",
                    },
                    {
                        "name": "otherwise",
                        "priority": 2,
                        "when": {"type": "default"},
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                ],
            }
        ],
    }


def review_setup() -> tuple[Recipe, Any, dict[str, str]]:
    """Publish the review recipe of the owner `olivia`, whose reviewers are `rita` and `ross`;
    return it, the owner and everyone's API token."""
    reviewers = GroupFactory(name="load-reviewers")
    owner = UserFactory(username="olivia")
    users = [owner, UserFactory(username="rita"), UserFactory(username="ross")]
    for reviewer in users[1:]:
        reviewer.groups.add(reviewers)
    recipe = recipe_import(user=owner, data=review_document()).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe, owner, {u.username: Token.objects.create(user=u).key for u in users}


@dataclass
class Site:
    """The server and worker processes, the recipe and the users' API tokens."""

    server: ServerProcess
    worker: WorkerProcess
    recipe: Recipe
    owner: Any
    tokens: dict[str, str]

    def logs(self) -> str:
        return f"--- daphne ---\n{self.server.log_tail()}\n--- worker ---\n{self.worker.log_tail()}"


@pytest.fixture
def site(transactional_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    purge_queue()
    server = ServerProcess(
        tmp_path,
        DATABASE_POOL_MIN_SIZE=2,
        DATABASE_POOL_MAX_SIZE=POOL_MAX_SIZE,
        DATABASE_POOL_TIMEOUT=10,
    )
    worker = WorkerProcess(
        "load-worker",
        tmp_path,
        pool="threads",
        concurrency=20,
        DATABASE_WORKER_POOL_MAX_SIZE=WORKER_POOL_MAX_SIZE,
    )
    try:
        server.start()
        worker.start()
        recipe, owner, tokens = review_setup()
        server.wait_ready()
        worker.wait_ready()
        yield Site(server, worker, recipe, owner, tokens)
    finally:
        server.kill()
        worker.kill()
        purge_queue()
        wait_for_worker_sessions_to_close(application_name=SERVER_APPLICATION_NAME)
        wait_for_worker_sessions_to_close()


@dataclass
class Call:
    kind: str
    method: str
    path: str
    user: str
    body: dict[str, Any] | None = None


@dataclass
class Answer:
    call: Call
    status: int
    seconds: float
    text: str


async def send_all(site: Site, calls: list[Call]) -> list[Answer]:
    """Send every call at once, each on its own connection, and wait for every answer."""
    limits = httpx.Limits(max_connections=len(calls), max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=site.server.url, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:

        async def send(call: Call) -> Answer:
            started = time.monotonic()
            try:
                response = await client.request(
                    call.method,
                    call.path,
                    json=call.body,
                    headers={"Authorization": f"Token {site.tokens[call.user]}"},
                )
            except httpx.TransportError as exc:  # a hang or a refused connection: no answer
                return Answer(call, 0, time.monotonic() - started, repr(exc))
            return Answer(call, response.status_code, time.monotonic() - started, response.text)

        return await asyncio.gather(*(send(call) for call in calls))


def open_tasks(site: Site, count: int, timeout: float = 40) -> list[HumanTask]:
    """Start `count` runs and wait until the worker has opened each one's review task."""
    runs = [
        services.run_start(user=site.owner, recipe=site.recipe, inputs={"topic": f"story {i}"})
        for i in range(count)
    ]
    deadline = time.monotonic() + timeout
    while True:
        tasks = list(HumanTask.objects.filter(run__in=runs, status=TaskStatus.OPEN))
        if len(tasks) == count:
            return tasks
        if time.monotonic() > deadline:
            statuses = Counter(
                Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)
            )
            raise AssertionError(
                f"{len(tasks)} of {count} tasks opened; runs {statuses}\n{site.logs()}"
            )
        time.sleep(0.1)


def wait_for_status(site: Site, run_id: int, status: str, timeout: float = 30) -> Run:
    deadline = time.monotonic() + timeout
    while (run := Run.objects.get(pk=run_id)).status != status:
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run.status}, not {status}\n{site.logs()}")
        time.sleep(0.1)
    return run


def server_errors(answers: list[Answer]) -> list[str]:
    """Each answer that is a 5xx, or none at all (status 0), by kind: how often, and what."""
    failed = Counter(
        f"{a.call.kind}: {a.status} {a.text[:300]}"
        for a in answers
        if a.status >= 500 or a.status == 0
    )
    return [f"{count} x {what}" for what, count in failed.most_common()]


def describe(label: str, answers: list[Answer], sessions: Sessions) -> str:
    milliseconds = sorted(a.seconds * 1000 for a in answers)
    cuts = statistics.quantiles(milliseconds, n=100, method="inclusive")
    return (
        f"{label}: {len(answers)} requests, "
        f"{sum(a.status >= 500 or a.status == 0 for a in answers)} x 5xx, "
        f"p50 {cuts[49]:.0f} ms, p95 {cuts[94]:.0f} ms, max {milliseconds[-1]:.0f} ms; "
        f"sessions at most: server {sessions.server_max} (pool {POOL_MAX_SIZE}), "
        f"worker {sessions.worker_max} ({sessions.samples} samples)"
    )


def test_200_concurrent_api_requests_get_no_5xx_and_stay_within_the_pool(site: Site) -> None:
    tasks = open_tasks(site, 40)
    runs = [task.run_id for task in tasks]
    calls = (
        [Call("recipe list", "GET", "/api/recipes/", "olivia") for _ in range(30)]
        + [Call("run list", "GET", "/api/runs/", "olivia") for _ in range(30)]
        + [Call("run detail", "GET", f"/api/runs/{runs[i % 40]}/", "olivia") for i in range(30)]
        + [
            Call("events", "GET", f"/api/runs/{runs[i % 40]}/events?after=0", "olivia")
            for i in range(30)
        ]
        + [
            Call(
                "run start",
                "POST",
                f"/api/recipes/{site.recipe.slug}/runs",
                "olivia",
                {"inputs": {"topic": f"load {i}"}},
            )
            for i in range(40)
        ]
        + [
            Call(
                "decision",
                "POST",
                f"/api/tasks/{task.pk}/decide",
                "rita" if i % 2 else "ross",
                {"decision": "approve", "comment": "fine"},
            )
            for i, task in enumerate(tasks)
        ]
    )
    assert len(calls) == 200

    with SessionSampler() as sessions:
        answers = asyncio.run(send_all(site, calls))
    print(describe("200 mixed requests", answers, sessions))

    errors = server_errors(answers)
    assert errors == [], "\n".join([*errors, site.logs()])
    expected = {"run start": 201}
    wrong = [
        f"{a.call.kind} {a.call.path}: {a.status} {a.text[:200]}"
        for a in answers
        if a.status != expected.get(a.call.kind, 200)
    ]
    assert wrong == []
    assert 0 < sessions.server_max <= POOL_MAX_SIZE
    assert sessions.worker_max <= WORKER_POOL_MAX_SIZE
    # The worker's pool kept its connections instead of opening one per task.
    assert len(sessions.worker_sessions) <= WORKER_POOL_MAX_SIZE, sessions.worker_sessions
    started = Run.objects.filter(inputs__topic__startswith="load ")
    assert started.count() == 40
    decided = HumanTask.objects.filter(pk__in=[t.pk for t in tasks])
    assert set(decided.values_list("status", flat=True)) == {TaskStatus.DECIDED}
    for run_id in runs:  # the worker took every decision up
        wait_for_status(site, run_id, RunStatus.SUCCEEDED)


def test_50_concurrent_decisions_on_one_task_from_two_reviewers_give_one_200(site: Site) -> None:
    (task,) = open_tasks(site, 1)
    calls = [
        Call(
            "decision",
            "POST",
            f"/api/tasks/{task.pk}/decide",
            reviewer,
            {"decision": "approve" if i % 2 else "reject", "comment": f"{reviewer} {i}"},
        )
        for i in range(25)
        for reviewer in ("rita", "ross")
    ]

    with SessionSampler() as sessions:
        answers = asyncio.run(send_all(site, calls))
    print(describe("50 decisions on one task", answers, sessions))

    errors = server_errors(answers)
    assert errors == [], "\n".join([*errors, site.logs()])
    assert Counter(a.status for a in answers) == {200: 1, 409: 49}
    (accepted,) = [a for a in answers if a.status == 200]
    assert accepted.call.body is not None
    task.refresh_from_db()
    assert (task.status, task.decided_by.username, task.comment) == (
        TaskStatus.DECIDED,
        accepted.call.user,
        accepted.call.body["comment"],
    )
    assert sessions.server_max <= POOL_MAX_SIZE
    # The one decision resumed the run, once: approve completes it, reject ends it.
    approved = accepted.call.body["decision"] == "approve"
    wanted = RunStatus.SUCCEEDED if approved else RunStatus.ENDED
    run = wait_for_status(site, task.run_id, wanted)
    assert run.events.filter(type="human_task.decided").count() == 1


def test_a_request_that_finds_the_pool_busy_gets_a_503_instead_of_waiting_on(
    transactional_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    server = one_connection_server(tmp_path)
    locker = None
    try:
        server.start()
        _, owner, tokens = review_setup()
        # No worker: the run stays queued, a row to lock.
        run = services.run_start(user=owner, recipe=Recipe.objects.get(), inputs={"topic": "x"})
        server.wait_ready()
        headers = {"Authorization": f"Token {tokens['olivia']}"}
        locker = psycopg.connect(database_url(LOCKER_APPLICATION_NAME))
        locker.execute(f"SELECT 1 FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE", [run.pk])
        with httpx.Client(
            base_url=server.url, timeout=REQUEST_TIMEOUT_S, headers=headers
        ) as client:
            with ThreadPoolExecutor(1) as pool:
                # The cancel waits for the run's row lock, holding the server's one connection.
                cancel = pool.submit(client.post, f"/api/runs/{run.pk}/cancel")
                try:
                    wait_until_a_server_session_waits_for_a_lock(server)
                    started = time.monotonic()
                    busy = client.get("/api/runs/")
                    waited = time.monotonic() - started
                finally:
                    locker.rollback()
                cancelled = cancel.result(timeout=REQUEST_TIMEOUT_S)
            after = client.get("/api/runs/")
    finally:
        if locker is not None:
            locker.close()
        server.kill()
        purge_queue()
        wait_for_worker_sessions_to_close(application_name=SERVER_APPLICATION_NAME)

    assert busy.status_code == 503, busy.text[:500]
    assert busy.headers["content-type"] == "application/json"
    assert busy.json()["errors"], busy.text
    assert "Retry-After" in busy.headers
    assert 0.5 <= waited < 5
    assert (cancelled.status_code, after.status_code) == (200, 200)


def one_connection_server(log_dir: Path) -> ServerProcess:
    """A server whose pool holds one connection, and whose requests wait half a second for it."""
    return ServerProcess(
        log_dir, DATABASE_POOL_MIN_SIZE=1, DATABASE_POOL_MAX_SIZE=1, DATABASE_POOL_TIMEOUT=0.5
    )


def test_a_pool_of_one_connection_serves_requests_and_websocket_monitors_in_turn(
    transactional_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request and every consumer call hands its connection back when it ends: a request
    or a websocket that kept it would leave the next ones a 503."""
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    server = one_connection_server(tmp_path)
    try:
        server.start()
        _, owner, tokens = review_setup()
        run = services.run_start(user=owner, recipe=Recipe.objects.get(), inputs={"topic": "x"})
        client = Client()
        client.force_login(owner)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        server.wait_ready()
        statuses = asyncio.run(
            requests_and_monitors(server, run.pk, tokens["olivia"], cookie, rounds=5)
        )
    finally:
        server.kill()
        purge_queue()
        wait_for_worker_sessions_to_close(application_name=SERVER_APPLICATION_NAME)

    assert statuses == [(200, ["run.queued"], 200, 200)] * 5, server.log_tail()


async def requests_and_monitors(
    server: ServerProcess, run_id: int, token: str, cookie: str, rounds: int
) -> list[tuple[int, list[str], int, int]]:
    """Per round: a request; a monitor that replays the run's events and, while it stays open,
    another request; then, once it closed, a third."""
    headers = {"Authorization": f"Token {token}"}
    ws_url = f"ws://127.0.0.1:{server.port}/ws/runs/{run_id}/?after=0"
    ws_headers = {"Cookie": cookie}
    statuses = []
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, timeout=REQUEST_TIMEOUT_S
    ) as client:
        for _ in range(rounds):
            before = (await client.get(f"/api/runs/{run_id}/")).status_code
            async with websockets_connect(
                ws_url, origin=Origin(server.url), additional_headers=ws_headers, open_timeout=10
            ) as monitor:
                message = json.loads(await asyncio.wait_for(monitor.recv(), REQUEST_TIMEOUT_S))
                replayed = [event["type"] for event in message["events"]]
                during = (await client.get("/api/runs/")).status_code
            after = (await client.get(f"/api/runs/{run_id}/events")).status_code
            statuses.append((before, replayed, during, after))
    return statuses


def wait_until_a_server_session_waits_for_a_lock(
    server: ServerProcess, timeout: float = 15
) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url(SAMPLER_APPLICATION_NAME), autocommit=True) as conn:
        while True:
            (waiting,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = %s AND wait_event_type = 'Lock'",
                [SERVER_APPLICATION_NAME],
            ).fetchone() or (0,)
            if waiting:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no request of the server waits for the lock\n{server.log_tail()}"
                )
            time.sleep(0.05)
