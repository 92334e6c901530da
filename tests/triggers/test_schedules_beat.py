"""A schedule every minute, with two `celery beat` processes and a `celery worker` running for
real on PostgreSQL and Redis: each minute's tick starts exactly one run, on time, for three
minutes, although both beats ask for every round.

Both beats send the round every 2 s (SCHEDULE_TICK_SECONDS), so the worker works on rounds
of both at once all the time. The beats send to the test workers' own queue (`QUEUE`, see
`tests/runner/worker_process.py`), as `tests/runner/servers.Beat` does for the outage tests.
Takes 3-4 minutes: it waits for three whole minutes of the wall clock.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from config.celery import app as celery_app
from runner.models import Run
from runner.status import RunStatus
from tests.factories import WRITER, ActorFactory, UserFactory, recipe_document
from tests.runner.servers import Beat
from tests.runner.worker_process import (
    QUEUE,
    WorkerProcess,
    purge_queue,
    require_services,
    wait_for_worker_sessions_to_close,
    worker_env,
)
from triggers.models import MissedTicks, ScheduleTick
from workflows.services import recipe_import, recipe_publish

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(420),
]

ROUND_SECONDS = 2
MINUTES = 3
# How long after its minute a tick's run may start: a round is at most ROUND_SECONDS away,
# and a busy machine delays the worker by a few seconds more.
ON_TIME = timedelta(seconds=20)
SENT = "Sending due task schedules-tick (triggers.schedules_tick)"


class Processes:
    """The worker and the beats a test started; all are killed when it ends."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.env = worker_env(SCHEDULE_TICK_SECONDS=ROUND_SECONDS)
        self.worker = WorkerProcess(
            "schedules-worker",
            log_dir,
            pool="threads",
            concurrency=4,
            loglevel="info",
            SCHEDULE_TICK_SECONDS=ROUND_SECONDS,
        )
        self.beats: list[Beat] = []

    def start(self) -> None:
        self.worker.start().wait_ready()
        for name in ("beat1", "beat2"):
            directory = self.log_dir / name
            directory.mkdir()
            self.beats.append(Beat(directory, self.env).start())

    def kill(self) -> None:
        for process in [*self.beats, self.worker]:
            process.kill()

    def logs(self) -> str:
        parts = [f"--- worker ---\n{self.worker.log_tail()}"]
        parts += [f"--- beat {i} ---\n{beat.log_tail(10)}" for i, beat in enumerate(self.beats, 1)]
        return "\n".join(parts)


@pytest.fixture
def processes(
    transactional_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Processes]:
    require_services()
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    purge_queue()
    started = Processes(tmp_path)
    try:
        yield started
    finally:
        started.kill()
        purge_queue()
        wait_for_worker_sessions_to_close()


def wait_until(moment: datetime, processes: Processes) -> None:
    while (left := (moment - datetime.now(UTC)).total_seconds()) > 0:
        assert processes.worker.alive, processes.logs()
        assert all(beat.alive for beat in processes.beats), processes.logs()
        time.sleep(min(left, 1.0))


def test_a_schedule_every_minute_fires_once_a_minute_with_two_beats(
    processes: Processes,
) -> None:
    owner = UserFactory(username="olivia")
    ActorFactory(name=WRITER, config={"replies": ["A short digest of the day's news, in full."]})
    schedule = {"name": "every-minute", "cron": "* * * * *", "inputs": {"topic": "the news"}}
    document = recipe_document(slug="minutely", schedules=[schedule])
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)

    processes.start()
    # The first whole minute after both beats are up, and the two after it.
    first = (datetime.now(UTC) + timedelta(minutes=1)).replace(second=0, microsecond=0)
    minutes = [first + timedelta(minutes=i) for i in range(MINUTES)]
    wait_until(minutes[-1] + ON_TIME, processes)
    rounds = [beat.log_path.read_text(errors="replace").count(SENT) for beat in processes.beats]
    processes.kill()

    # Both beats kept asking: every minute saw several rounds of each.
    assert all(count >= MINUTES * 10 for count in rounds), (rounds, processes.logs())
    ticks = ScheduleTick.objects.filter(schedule__recipe=recipe, tick_at__gte=minutes[0])
    fired = ticks.filter(tick_at__lte=minutes[-1]).select_related("run")
    assert sorted(t.tick_at for t in fired) == minutes, processes.logs()
    runs = Run.objects.filter(recipe=recipe, trigger__startswith="schedule every-minute at ")
    per_minute = Counter(run.trigger for run in runs)
    for minute in minutes:
        trigger = f"schedule every-minute at {minute:%Y-%m-%dT%H:%MZ}"
        assert per_minute[trigger] == 1, (per_minute, processes.logs())
    for tick in fired:
        assert tick.run is not None and tick.run.trigger.endswith(f"{tick.tick_at:%H:%MZ}")
        assert tick.run.created_by == owner and not tick.late
        assert tick.run.created_at - tick.tick_at < ON_TIME, (tick.tick_at, tick.run.created_at)
    assert not MissedTicks.objects.exists()
    # The worker ran them through.
    done: Any = Run.objects.filter(pk__in=[t.run_id for t in fired], status=RunStatus.SUCCEEDED)
    assert done.count() == MINUTES, [(r.pk, r.status, r.error) for r in runs]
