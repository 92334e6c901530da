"""Redis and PostgreSQL go away while runs are being started, executed, decided and watched.

The production topology runs for real: daphne, `celery worker` processes and `celery beat`
(the reaper every second), in production mode, on a Redis and a PostgreSQL cluster of the
test's own (`servers.py`), which it stops, freezes and restarts. Clients are what a browser and
an API user are: HTTP requests with a timeout, and websocket monitors that reconnect after the
last event they saw, as static/monitor/socket.js does.

- Redis, the broker and the channel layer, is stopped for 5 s three times and frozen (SIGSTOP)
  for 5 s once, while 50 runs are started and their reviewers decide: every start and decision
  is answered in time and none is a 5xx, every run finishes, and every monitor ends with every
  event of its run, once and in order, those of runs that finished during an outage included.
  Then it is stopped once and frozen once with at least 100 steps in flight (two threads-pool
  workers, each step handing its run back through the broker): every step goes on, is claimed
  and committed once, and every run finishes.
- PostgreSQL is restarted three times while 360 runs execute, more than 100 steps in flight at
  each restart (the workers run the threads pool, 100 steps each): the API answers JSON 503s
  while it is down, the workers live through it, the steps it interrupted are taken again
  within 15 s of its return, and every run finishes within 15 s of the last one, each step
  committed once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, WebSocketException

from tests.factories import chain_document
from tests.runner.conftest import STORY, story_document
from tests.runner.server_process import ServerProcess
from tests.runner.servers import (
    Beat,
    PostgresCluster,
    RedisServer,
    manage,
    require_binaries,
    seed,
    stack_env,
    wait_until,
    wait_worker_ready,
)
from tests.runner.worker_process import WorkerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TEMPLATE = "branchline_template"
HTTP_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of the module's own, with a migrated template database."""
    require_binaries(postgres=True, redis=True)
    cluster = PostgresCluster().init()
    try:
        cluster.start()
        cluster.execute(f"CREATE DATABASE {TEMPLATE}")
        env = stack_env(database_url=cluster.url(TEMPLATE), redis_url="")
        manage(env, "migrate", "--noinput", "-v", "0")
        yield cluster
    finally:
        cluster.destroy()


class Stack:
    """The production topology on throwaway services: daphne, worker processes and beat."""

    def __init__(self, cluster: PostgresCluster, log_dir: Path, name: str) -> None:
        self.cluster = cluster
        self.log_dir = log_dir
        self.database = name
        self.redis = RedisServer(log_dir)
        self.env: dict[str, str] = {}
        self.server: ServerProcess | None = None
        self.workers: list[WorkerProcess] = []
        self.beat: Beat | None = None

    def open(self) -> None:
        """Create the database (a copy of the migrated template) and start Redis."""
        self.cluster.execute(f"CREATE DATABASE {self.database} TEMPLATE {TEMPLATE}")
        self.redis.start()

    def start(self, *, spec: dict[str, Any], workers: int, **settings: Any) -> dict[str, Any]:
        """Seed the database with `spec`, start every process; return the seeded credentials."""
        self.env = stack_env(
            database_url=self.cluster.url(self.database, "branchline-outage"),
            redis_url=self.redis.url(),
            **settings,
        )
        credentials = seed(self.env, spec)
        self.beat = Beat(self.log_dir, self.env).start()
        for i in range(1, workers + 1):
            # As `celery -A config worker` runs by default: a hundred steps at once, in threads.
            worker = WorkerProcess(
                f"worker{i}", self.log_dir, pool="threads", concurrency=100, loglevel="info"
            )
            worker.env.update(self.env)
            self.workers.append(worker.start())
        self.server = ServerProcess(self.log_dir)
        self.server.env.update(self.env)
        self.server.start().wait_ready()
        for worker in self.workers:
            wait_worker_ready(worker, self.redis.url())
        return credentials

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        return self.cluster.execute(query, self.database)

    def stop(self) -> None:
        for process in [self.server, self.beat, *self.workers]:
            if process is not None:
                process.kill()
        self.redis.stop(signal.SIGKILL)

    def logs(self) -> str:
        parts = [f"--- daphne ---\n{self.server.log_tail(40)}"] if self.server else []
        parts += [f"--- {w.name} ---\n{w.log_tail(30)}" for w in self.workers]
        if self.beat:
            parts.append(f"--- beat ---\n{self.beat.log_tail(15)}")
        parts.append(f"--- redis ---\n{self.redis.log_tail(10)}")
        return "\n".join(parts)


@pytest.fixture
def stack(
    cluster: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    stack = Stack(cluster, tmp_path, f"outage_{request.node.name[5:40]}".lower())
    try:
        stack.open()
        yield stack
    finally:
        stack.stop()
        cluster.execute(f"DROP DATABASE IF EXISTS {stack.database} WITH (FORCE)")


# --- what the clients saw -----------------------------------------------------------------------


@dataclass
class Answer:
    """One HTTP request: what it asked, and what came back (status None: no answer in time)."""

    what: str
    status: int | None
    seconds: float
    at: float
    detail: str = ""

    def __str__(self) -> str:
        status = self.status if self.status is not None else "no answer"
        return f"{self.what}: {status} after {self.seconds:.1f} s {self.detail}".strip()


@dataclass
class Api:
    """HTTP calls to daphne with a token and a timeout; every answer is kept."""

    client: httpx.AsyncClient
    answers: list[Answer] = field(default_factory=list)

    async def call(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response | None:
        started = time.monotonic()
        try:
            response = await self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.answers.append(
                Answer(what, None, time.monotonic() - started, time.time(), repr(exc))
            )
            return None
        detail = "" if response.is_success else response.text[:300]
        self.answers.append(
            Answer(what, response.status_code, time.monotonic() - started, time.time(), detail)
        )
        return response


@dataclass
class Monitor:
    """A run monitor: `/ws/runs/{id}/?after=N`, reconnecting after the last event seen."""

    run_id: int
    events: list[tuple[int, str]] = field(default_factory=list)  # as received, every frame
    connections: int = 0
    failures: list[str] = field(default_factory=list)
    finished: bool = False

    async def follow(
        self, ws_url: str, cookie: str, on_event: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> None:
        last = 0
        delay = 0.25
        origin = ws_url.replace("ws://", "http://")
        while not self.finished:
            try:
                async with connect(
                    f"{ws_url}/ws/runs/{self.run_id}/?after={last}",
                    origin=origin,  # type: ignore[arg-type]
                    additional_headers={"Cookie": cookie},
                    proxy=None,
                    open_timeout=5,
                    close_timeout=1,
                ) as websocket:
                    self.connections += 1
                    delay = 0.25
                    async for frame in websocket:
                        message = json.loads(frame)
                        if message["type"] != "events":
                            continue
                        for event in message["events"]:
                            self.events.append((event["seq"], event["type"]))
                            last = max(last, event["seq"])
                            await on_event(event)
                            self.finished = self.finished or event["type"] == "run.finished"
                        if self.finished:
                            return
            except (OSError, TimeoutError, InvalidHandshake, WebSocketException) as exc:
                self.failures.append(f"{time.time():.1f} {exc!r}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


def event_log(stack: Stack, run_ids: list[int]) -> dict[int, list[tuple[int, str]]]:
    ids = ",".join(str(i) for i in run_ids)
    rows = stack.sql(
        f"SELECT run_id, seq, type FROM runner_runevent WHERE run_id IN ({ids}) ORDER BY run_id, seq"
    )
    log: dict[int, list[tuple[int, str]]] = {i: [] for i in run_ids}
    for run_id, seq, type_ in rows:
        log[run_id].append((seq, type_))
    return log


def statuses(stack: Stack, run_ids: list[int]) -> dict[int, str]:
    ids = ",".join(str(i) for i in run_ids)
    return dict(stack.sql(f"SELECT id, status FROM runner_run WHERE id IN ({ids})"))


def start_chain(
    stack: Stack, *, steps: int, delay_ms: int, workers: int, **settings: Any
) -> httpx.Client:
    """Start the stack on a recipe of `steps` scripted steps answering after `delay_ms`, with
    5 s leases and the reaper every second; return an API client of its user."""
    spec = {
        "user": "olivia",
        "actors": [{"name": "chain-writer", "config": {"replies": [STORY], "delay_ms": delay_ms}}],
        "recipes": [chain_document(slug="chain", actor="chain-writer", steps=steps, branches=[])],
    }
    credentials = stack.start(
        spec=spec, workers=workers, RUN_LEASE_SECONDS=5, RUN_BEAT_INTERVAL_SECONDS=1, **settings
    )
    headers = {"Authorization": f"Token {credentials['token']}"}
    return httpx.Client(
        base_url=stack.url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
    )


def wait_all_ended(stack: Stack, run_ids: list[int], since: float, timeout: float) -> float:
    """Wait until every run has succeeded or failed, at most `timeout` s after the monotonic
    time `since`; return how long after `since` that was."""
    while time.monotonic() < since + timeout:
        if all(s in ("succeeded", "failed") for s in statuses(stack, run_ids).values()):
            break
        time.sleep(0.1)
    return time.monotonic() - since


def start_runs(http: httpx.Client, count: int) -> list[int]:
    """Start `count` runs of the chain recipe through the API; return their ids."""
    ids = []
    for i in range(count):
        response = http.post("/api/recipes/chain/runs", json={"inputs": {"topic": f"t{i}"}})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


# --- Redis ----------------------------------------------------------------------------------------

REDIS_RUNS = 50
# (what happens to Redis, for how long): stopped three times, frozen once.
REDIS_OUTAGES = [("stop", 5.0), ("stop", 5.0), ("freeze", 5.0), ("stop", 5.0)]
FIRST_OUTAGE_AT_S = 2.0
BETWEEN_OUTAGES_S = 4.0
REVISE_MS = 1500  # the last step: a run revising when Redis goes finishes during the outage


def reviewed_document() -> dict[str, Any]:
    """The story recipe (write, review, revise), its revision by a slow actor of its own."""
    document = story_document()
    document["actors"]["reviser"] = "slow-reviser"
    revise = next(step for step in document["steps"] if step["key"] == "revise")
    revise["actor"] = "reviser"
    return document


def test_runs_started_decided_and_watched_through_redis_outages_all_finish_and_are_seen_whole(
    stack: Stack,
) -> None:
    spec = {
        "user": "olivia",
        "groups": ["test-editors"],
        "actors": [
            {"name": "test-writer", "config": {"replies": [STORY], "delay_ms": 300}},
            {"name": "test-judge", "config": {"replies": ["3"]}},  # to the reviewers
            {"name": "slow-reviser", "config": {"replies": [STORY], "delay_ms": REVISE_MS}},
        ],
        "recipes": [reviewed_document()],
    }
    credentials = stack.start(
        spec=spec, workers=4, RUN_LEASE_SECONDS=5, RUN_BEAT_INTERVAL_SECONDS=1
    )
    outages: list[tuple[str, float, float]] = []  # (what, from, to) in time.time()
    revising = asyncio.Event()  # a monitor saw a run's last step start

    async def break_redis() -> None:
        await asyncio.sleep(FIRST_OUTAGE_AT_S)
        for how, seconds in REDIS_OUTAGES:
            # Cut when a run has just started its last step: it ends while Redis is away.
            revising.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(revising.wait(), timeout=REVISE_MS / 1000 * 4)
            began = time.time()
            if how == "freeze":
                stack.redis.freeze()
                await asyncio.sleep(seconds)
                stack.redis.thaw()
            else:
                stack.redis.stop()
                await asyncio.sleep(seconds)
                await asyncio.to_thread(stack.redis.start)
            outages.append((how, began, time.time()))
            await asyncio.sleep(BETWEEN_OUTAGES_S)

    span = FIRST_OUTAGE_AT_S + sum(s for _, s in REDIS_OUTAGES) + BETWEEN_OUTAGES_S * 3
    ws_url = stack.url.replace("http://", "ws://")
    monitors: list[Monitor] = []

    async def main(api: Api) -> None:
        decided: set[int] = set()

        async def one_run(i: int) -> None:
            await asyncio.sleep(span * i / REDIS_RUNS)
            response = await api.call(
                "POST", "/api/recipes/story/runs", f"start {i}", json={"inputs": {"topic": f"t{i}"}}
            )
            if response is None or response.status_code != 201:
                return
            monitor = Monitor(response.json()["id"])
            monitors.append(monitor)

            async def on_event(event: dict[str, Any]) -> None:
                if event["type"] == "step.started" and event["data"]["step"] == "revise":
                    revising.set()
                task = event["data"].get("id") if event["type"] == "human_task.created" else None
                if task is not None and task not in decided:
                    decided.add(task)
                    await api.call(
                        "POST",
                        f"/api/tasks/{task}/decide",
                        f"decide task {task} of run {monitor.run_id}",
                        json={"decision": "revise", "comment": "Give the keeper a name."},
                    )

            await monitor.follow(ws_url, credentials["cookie"], on_event)

        runs = asyncio.gather(*(one_run(i) for i in range(REDIS_RUNS)))
        await asyncio.gather(break_redis(), asyncio.wait_for(runs, timeout=span + 60))

    async def drive() -> list[Answer]:
        headers = {"Authorization": f"Token {credentials['token']}"}
        async with httpx.AsyncClient(
            base_url=stack.url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
        ) as client:
            api = Api(client)
            with contextlib.suppress(TimeoutError):  # reported below, run by run
                await main(api)
            return api.answers

    answers = asyncio.run(drive())

    failed = [a for a in answers if a.status is None or a.status >= 500]
    starts = [a for a in answers if a.what.startswith("start")]
    decisions = [a for a in answers if a.what.startswith("decide")]
    assert not failed, "\n".join(map(str, failed)) + f"\n{stack.logs()}"
    assert [a.status for a in starts] == [201] * REDIS_RUNS, "\n".join(map(str, starts))
    assert [a.status for a in decisions] == [200] * REDIS_RUNS, "\n".join(map(str, decisions))
    assert max(a.seconds for a in answers) < HTTP_TIMEOUT_S

    run_ids = [m.run_id for m in monitors]
    unfinished = {i: s for i, s in statuses(stack, run_ids).items() if s != "succeeded"}
    assert not unfinished, f"runs not succeeded: {unfinished}\n{stack.logs()}"
    log = event_log(stack, run_ids)
    for monitor in monitors:
        expected = log[monitor.run_id]
        assert [seq for seq, _ in expected] == list(range(1, len(expected) + 1))
        assert monitor.events == expected, (
            f"run {monitor.run_id}: the monitor saw {monitor.events}, the log holds {expected}; "
            f"connections {monitor.connections}, failures {monitor.failures}"
        )

    # The figure is about runs that finished while Redis was away: each outage had some.
    ids = ",".join(map(str, run_ids))
    finished_at = stack.sql(
        "SELECT run_id, extract(epoch FROM at) FROM runner_runevent "
        f"WHERE type = 'run.finished' AND run_id IN ({ids})"
    )
    during = {
        (how, began): [run for run, at in finished_at if began <= at <= ended]
        for how, began, ended in outages
    }
    assert all(during.values()), f"an outage during which no run finished: {during}"
    processes = [stack.server, stack.beat, *stack.workers]
    assert all(p is not None and p.alive for p in processes), stack.logs()
    reconnected = sum(1 for m in monitors if m.connections > 1)
    refused = [m for m in monitors if m.failures]
    print(
        f"runs finished during each outage: {[(how, len(r)) for (how, _), r in during.items()]}; "
        f"monitors that reconnected: {reconnected}; monitors refused at first "
        f"{len(refused)} ({sum(len(m.failures) for m in refused)} tries); "
        f"slowest answer: {max(answers, key=lambda a: a.seconds)}"
    )


REDIS_BUSY_RUNS = 120  # a batch before each cut, with 2.5 s calls: more than 100 in flight
REDIS_BUSY_STEPS = 3
REDIS_BUSY_CUTS = [("stop", 5.0), ("freeze", 5.0)]
REDIS_MOST_IN_FLIGHT = 100
REDIS_FINISH_S = 60.0


def test_a_hundred_steps_in_flight_go_on_through_redis_stopped_and_frozen_each_committed_once(
    stack: Stack,
) -> None:
    # Slices shorter than a step: each step ends by handing its run back through the broker, so
    # the steps that end during a cut need their messages sent again once Redis is back.
    http = start_chain(
        stack, steps=REDIS_BUSY_STEPS, delay_ms=2500, workers=2, RUN_TIME_SLICE_SECONDS=2
    )
    pids = {w.name: w.process.pid for w in stack.workers if w.process}
    run_ids: list[int] = []
    in_flight_at_cuts: list[int] = []
    for how, seconds in REDIS_BUSY_CUTS:
        batch = start_runs(http, REDIS_BUSY_RUNS)
        run_ids += batch
        ids = ",".join(map(str, batch))
        in_flight = 0
        deadline = time.monotonic() + 20
        while in_flight < REDIS_MOST_IN_FLIGHT and time.monotonic() < deadline:
            in_flight = stack.sql(
                f"SELECT count(*) FROM runner_run WHERE id IN ({ids}) "
                "AND lease_token <> '' AND status = 'running'"
            )[0][0]
            time.sleep(0.05)
        in_flight_at_cuts.append(in_flight)
        if how == "freeze":
            stack.redis.freeze()
            time.sleep(seconds)
            stack.redis.thaw()
        else:
            stack.redis.stop()
            time.sleep(seconds)
            stack.redis.start()
    http.close()
    finished_after = wait_all_ended(stack, run_ids, time.monotonic(), REDIS_FINISH_S)

    assert min(in_flight_at_cuts) >= REDIS_MOST_IN_FLIGHT, (
        f"steps in flight: {in_flight_at_cuts}\n{stack.logs()}"
    )
    unfinished = {i: s for i, s in statuses(stack, run_ids).items() if s != "succeeded"}
    assert not unfinished, f"not succeeded: {unfinished}\n{stack.logs()}"
    ids = ",".join(map(str, run_ids))
    steps = stack.sql(f"SELECT run_id, seq, attempt FROM runner_steprun WHERE run_id IN ({ids})")
    assert sorted(steps) == [
        (r, s, 1) for r in sorted(run_ids) for s in range(1, REDIS_BUSY_STEPS + 1)
    ]
    for run_id, events in event_log(stack, run_ids).items():
        assert [seq for seq, _ in events] == list(range(1, len(events) + 1)), (run_id, events)
        types = Counter(type_ for _, type_ in events)
        # Each step claimed once: none was taken over and run again.
        steps_seen = (types["run.finished"], types["step.started"], types["step.finished"])
        assert steps_seen == (1, REDIS_BUSY_STEPS, REDIS_BUSY_STEPS), (run_id, events)
    for worker in stack.workers:  # the same processes throughout, each started once
        assert worker.alive and worker.process and worker.process.pid == pids[worker.name]
        assert worker.log_path.read_text(errors="replace").count(" ready.") == 1
    print(
        f"steps in flight at the cuts ({[how for how, _ in REDIS_BUSY_CUTS]}): "
        f"{in_flight_at_cuts}; all {len(run_ids)} runs finished {finished_after:.1f} s after "
        "the last"
    )


# --- PostgreSQL -----------------------------------------------------------------------------------

PG_STEPS = 5
# How each restart stops the server: `fast` disconnects everyone, `immediate` is a crash.
PG_RESTARTS = ["fast", "immediate", "fast"]
# Runs started before each restart, so that it finds runs in the middle of their work however
# long the wait for the steps the restart before it interrupted took (the others go on
# meanwhile, and a fixed pool of runs could be done by the next restart).
PG_RUNS_PER_RESTART = 120  # with 1.5 s calls: more than 100 of them in flight at each restart
PG_MOST_IN_FLIGHT = 100
PG_RUNS = PG_RUNS_PER_RESTART * len(PG_RESTARTS)
PG_DOWN_S = 4.0
RECOVERY_S = 15.0
# Once PostgreSQL accepts connections again, the API answers within this (it took up to
# 2.8 s while the pool's background reconnection waited 1, 2, 4 s between its attempts).
API_BACK_S = 2.0


def test_runs_through_postgres_restarts_resume_within_seconds_and_commit_each_step_once(
    stack: Stack,
) -> None:
    http = start_chain(
        stack,
        steps=PG_STEPS,
        delay_ms=1500,
        workers=3,
        DATABASE_POOL_TIMEOUT=2,  # a request waits that long for a connection, then gets a 503
    )
    pids = {w.name: w.process.pid for w in stack.workers if w.process}

    run_ids: list[int] = []

    def committed_steps(ids: str) -> int:
        return stack.sql(f"SELECT count(*) FROM runner_steprun WHERE run_id IN ({ids})")[0][0]

    outage_answers: list[Answer] = []
    resumed: list[str] = []
    stalls: list[str] = []
    api_back: list[float] = []
    recovered_at = 0.0
    most_in_flight = 0
    for mode in PG_RESTARTS:
        batch = start_runs(http, PG_RUNS_PER_RESTART)
        run_ids += batch
        ids = ",".join(map(str, run_ids))
        wait_until(
            lambda: committed_steps(",".join(map(str, batch))) >= PG_STEPS,  # noqa: B023
            60,
            "the new runs are under way",
            stack.logs,
        )
        in_flight: dict[int, int] = {}
        deadline = time.monotonic() + 10
        while not in_flight and time.monotonic() < deadline:  # a worker is running a step
            in_flight = dict(
                stack.sql(
                    f"SELECT id, next_seq FROM runner_run WHERE id IN ({ids}) "
                    "AND lease_token <> '' AND status = 'running'"
                )
            )
        assert in_flight, f"no run was in the middle of a step before the {mode} restart"
        most_in_flight = max(most_in_flight, len(in_flight))
        stack.cluster.stop(mode)
        down_until = time.monotonic() + PG_DOWN_S
        while time.monotonic() < down_until:
            outage_answers += probe(http)
        stack.cluster.start()
        recovered_at = time.monotonic()
        api_back.append(seconds_until_answered(http))
        # The steps the outage interrupted are taken again and committed, without waiting for
        # their leases to run out.
        interrupted = len(in_flight)
        while in_flight and time.monotonic() < recovered_at + RECOVERY_S:
            rows = stack.sql(f"SELECT id, next_seq, status FROM runner_run WHERE id IN ({ids})")
            moved = {i for i, seq, status in rows if seq != in_flight.get(i) or status != "running"}
            in_flight = {i: s for i, s in in_flight.items() if i not in moved}
            time.sleep(0.1)
        if in_flight or not interrupted:
            stalls.append(f"{mode} restart: of {interrupted} runs, {sorted(in_flight)} stalled")
        resumed.append(
            f"{mode}: {interrupted} steps again in {time.monotonic() - recovered_at:.1f} s"
        )

    finished_after = wait_all_ended(stack, run_ids, recovered_at, RECOVERY_S)
    http.close()

    assert not stalls, "\n".join(stalls) + f"\n{stack.logs()}"
    assert most_in_flight >= PG_MOST_IN_FLIGHT, f"at most {most_in_flight} steps in flight"
    assert max(api_back) <= API_BACK_S, f"the API answered again after {api_back} s"
    unfinished = {i: s for i, s in statuses(stack, run_ids).items() if s != "succeeded"}
    assert not unfinished, (
        f"not succeeded {RECOVERY_S:g} s after the last restart: {unfinished}\n{stack.logs()}"
    )

    wrong = [a for a in outage_answers if not answered_unavailable(a)]
    assert outage_answers and not wrong, "\n".join(map(str, wrong or outage_answers))
    assert any(a.status == 503 for a in outage_answers), "\n".join(map(str, outage_answers))

    steps = Counter(
        stack.sql(f"SELECT run_id, seq, attempt FROM runner_steprun WHERE run_id IN ({ids})")
    )
    assert set(steps.values()) == {1}
    assert sorted(steps) == [(r, s, 1) for r in sorted(run_ids) for s in range(1, PG_STEPS + 1)]
    log = event_log(stack, run_ids)
    for run_id, events in log.items():
        assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
        types = Counter(type_ for _, type_ in events)
        assert (types["run.finished"], types["step.finished"]) == (1, PG_STEPS), (run_id, events)

    # No worker went down and came back: the same processes, each started once.
    for worker in stack.workers:
        assert worker.alive and worker.process and worker.process.pid == pids[worker.name]
        log_text = worker.log_path.read_text(errors="replace")
        assert log_text.count(" ready.") == 1, worker.log_tail(60)
        assert "exited with" not in log_text, worker.log_tail(60)
    assert stack.beat and stack.beat.alive and stack.server and stack.server.alive
    print(
        f"most steps in flight at a restart: {most_in_flight}; interrupted runs resumed: {resumed}; "
        f"all runs finished {finished_after:.1f} s after the last restart; "
        f"the API answered again after {[round(s, 1) for s in api_back]} s; "
        f"answers during the outages: {Counter(a.status for a in outage_answers)}"
    )


def seconds_until_answered(http: httpx.Client) -> float:
    """Ask for the runs list until it is answered with a 200; return how long that took."""
    started = time.monotonic()
    while time.monotonic() < started + RECOVERY_S:
        with contextlib.suppress(httpx.HTTPError):
            if http.get("/api/runs").status_code == 200:
                break
        time.sleep(0.1)
    return time.monotonic() - started


def probe(http: httpx.Client) -> list[Answer]:
    """Ask the API what a client would while the database is down: a list and a run start."""
    answers = []
    for method, path, body in [
        ("GET", "/api/runs", None),
        ("POST", "/api/recipes/chain/runs", {"inputs": {"topic": "x"}}),
    ]:
        started = time.monotonic()
        try:
            response = http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            answers.append(
                Answer(f"{method} {path}", None, time.monotonic() - started, time.time(), repr(exc))
            )
            continue
        detail = json.dumps(
            {
                "type": response.headers.get("content-type"),
                "retry-after": response.headers.get("retry-after"),
                "body": response.text[:200],
            }
        )
        answers.append(
            Answer(
                f"{method} {path}",
                response.status_code,
                time.monotonic() - started,
                time.time(),
                detail,
            )
        )
    return answers


def answered_unavailable(answer: Answer) -> bool:
    """A request during the outage is served (it waited until the database was back) or gets
    a JSON 503 that says when to try again."""
    if answer.status is None:
        return False
    if answer.status < 500:
        return True
    detail = json.loads(answer.detail)
    return (
        answer.status == 503
        and (detail["type"] or "").startswith("application/json")
        and bool(detail["retry-after"])
    )
