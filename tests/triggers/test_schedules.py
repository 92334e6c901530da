"""Schedules on the database with a clock the test holds: publishing makes them the recipe's,
a round starts each due tick's run once, missed ticks are recorded (and run only to catch up),
a pause holds across versions."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

from runner.models import Run
from tests.factories import recipe_document
from triggers.models import MissedTicks, Schedule, ScheduleTick
from triggers.schedules import selectors, services
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_publish, recipe_update

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 3, 14, 0, 30, tzinfo=UTC)


class Clock:
    """The time the schedules go by, moved on by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, hh_mm_ss: str) -> datetime:
        self.now = datetime.fromisoformat(f"2026-12-03 {hh_mm_ss}").replace(tzinfo=UTC)
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    held = Clock(T0)
    monkeypatch.setattr(services, "clock", held)
    return held


def scheduled(*schedules: dict[str, Any], slug: str = "digest") -> dict[str, Any]:
    return recipe_document(slug=slug, schedules=list(schedules))


def every_minute(**fields: Any) -> dict[str, Any]:
    return {"cron": "* * * * *", "inputs": {"topic": "the news"}, **fields}


def published(user: Any, doc: dict[str, Any]) -> Recipe:
    recipe = recipe_import(user=user, data=doc).recipe
    recipe_publish(recipe=recipe, user=user)
    return recipe


def republish(recipe: Recipe, user: Any, doc: dict[str, Any]) -> None:
    recipe_update(recipe=recipe, document=doc)
    recipe_publish(recipe=recipe, user=user)


def tick(clock: Clock, hh_mm_ss: str) -> int:
    return services.schedules_tick(now=clock.at(hh_mm_ss))


def test_publishing_makes_the_versions_schedules_the_recipes(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = recipe_import(user=user, data=scheduled(every_minute(name="news"))).recipe
    assert not Schedule.objects.exists()  # a draft's schedules run nothing
    recipe_publish(recipe=recipe, user=user)
    schedule = Schedule.objects.get()
    assert (schedule.recipe, schedule.key, schedule.cron, schedule.version.number) == (
        recipe,
        "news",
        "* * * * *",
        1,
    )
    assert schedule.checked_until == T0
    assert schedule.next_at == datetime(2026, 12, 3, 14, 1, tzinfo=UTC)


def test_a_due_tick_starts_one_run_of_the_latest_version_as_the_owner(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(user, scheduled(every_minute(name="news")))
    assert tick(clock, "14:00:50") == 0  # nothing due yet
    assert tick(clock, "14:01:02") == 1
    run = Run.objects.get()
    assert (run.recipe, run.version.number, run.created_by, run.inputs) == (
        recipe,
        1,
        user,
        {"topic": "the news"},
    )
    assert run.trigger == "schedule news at 2026-12-03T14:01Z"
    assert ScheduleTick.objects.get().run == run
    # Another round of the same minute, or a second beat's message: nothing more.
    assert tick(clock, "14:01:10") == 0
    assert services.schedules_tick(now=clock.now) == 0
    assert Run.objects.count() == 1
    assert tick(clock, "14:02:01") == 1
    assert Run.objects.count() == 2


def test_a_schedule_whose_tick_fails_does_not_keep_the_others_from_firing(
    user: Any, actors: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    broken = published(user, scheduled(every_minute(), slug="broken"))
    working = published(user, scheduled(every_minute(), slug="working"))
    spec_of = services.spec_of

    def failing(schedule: Schedule) -> Any:
        if schedule.recipe_id == broken.pk:
            raise RuntimeError("a fault of this schedule")
        return spec_of(schedule)

    monkeypatch.setattr(services, "spec_of", failing)

    assert tick(clock, "14:01:02") == 1
    assert Run.objects.get().recipe == working
    assert "its tick failed" in caplog.text and "a fault of this schedule" in caplog.text
    # The broken one's round rolled back: it is tried again, and fires once it is mended.
    monkeypatch.setattr(services, "spec_of", spec_of)
    assert tick(clock, "14:01:30") == 1
    assert Run.objects.filter(recipe=broken).count() == 1


def test_a_tick_already_claimed_starts_nothing(user: Any, actors: Any, clock: Clock) -> None:
    published(user, scheduled(every_minute()))
    schedule = Schedule.objects.get()
    ScheduleTick.objects.create(schedule=schedule, tick_at=datetime(2026, 12, 3, 14, 1, tzinfo=UTC))
    assert tick(clock, "14:01:05") == 0
    assert not Run.objects.exists()
    assert Schedule.objects.get().next_at == datetime(2026, 12, 3, 14, 2, tzinfo=UTC)


def test_runs_follow_the_latest_published_version(user: Any, actors: Any, clock: Clock) -> None:
    recipe = published(user, scheduled(every_minute(name="news")))
    tick(clock, "14:01:01")
    republish(recipe, user, scheduled(every_minute(name="news", inputs={"topic": "sports"})))
    tick(clock, "14:02:01")
    first, second = Run.objects.order_by("pk")
    assert (first.version.number, first.inputs) == (1, {"topic": "the news"})
    assert (second.version.number, second.inputs) == (2, {"topic": "sports"})


def test_missed_ticks_are_recorded_and_not_run(user: Any, actors: Any, clock: Clock) -> None:
    recipe = published(user, scheduled(every_minute()))
    # Nothing looked from 14:00:30 until 14:10:05: 14:01-14:08 are two minutes late or more.
    assert tick(clock, "14:10:05") == 2
    missed = MissedTicks.objects.get()
    assert (missed.count, missed.first_at, missed.last_at) == (
        8,
        datetime(2026, 12, 3, 14, 1, tzinfo=UTC),
        datetime(2026, 12, 3, 14, 8, tzinfo=UTC),
    )
    (view,) = selectors.schedule_views(recipe=recipe)
    assert view.missed_summary == (
        "8 ticks missed between 2026-12-03 14:01 UTC and 2026-12-03 14:08 UTC"
    )
    assert sorted(t.tick_at.minute for t in ScheduleTick.objects.all()) == [9, 10]


def test_a_schedule_that_catches_up_runs_its_missed_ticks_up_to_the_bound(
    user: Any, actors: Any, clock: Clock, settings: Any
) -> None:
    settings.SCHEDULE_CATCH_UP_MAX = 5
    published(user, scheduled(every_minute(catch_up=True)))
    assert tick(clock, "14:10:05") == 7  # 14:04-14:08 late, 14:09 and 14:10 on time
    assert ScheduleTick.objects.filter(late=True).count() == 5
    assert MissedTicks.objects.get().count == 3  # 14:01-14:03
    assert {r.trigger for r in Run.objects.all()} >= {"schedule 0 at 2026-12-03T14:04Z"}


def test_a_paused_schedule_starts_nothing_and_resumes_from_its_next_tick(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(user, scheduled(every_minute(name="news")))
    schedule = Schedule.objects.get()
    services.schedule_pause(schedule=schedule, user=user)
    assert tick(clock, "14:05:01") == 0
    (view,) = selectors.schedule_views(recipe=recipe)
    assert (view.state, view.next_runs, view.schedule.paused_by) == ("paused", [], user)
    services.schedule_resume(schedule=schedule, now=clock.at("14:05:30"))
    # The ticks while it was paused are neither run nor missed.
    assert tick(clock, "14:06:01") == 1
    assert not MissedTicks.objects.exists()
    assert Run.objects.get().trigger == "schedule news at 2026-12-03T14:06Z"


def test_a_pause_survives_a_new_version(user: Any, actors: Any, clock: Clock) -> None:
    recipe = published(user, scheduled(every_minute(name="news")))
    services.schedule_pause(schedule=Schedule.objects.get(), user=user)
    republish(recipe, user, scheduled(every_minute(name="news", cron="*/5 * * * *")))
    schedule = Schedule.objects.get()
    assert (schedule.cron, schedule.version.number) == ("*/5 * * * *", 2)
    assert schedule.paused_at is not None and schedule.next_at is None
    assert tick(clock, "14:05:01") == 0


def test_a_schedule_taken_out_retires_and_comes_back_with_its_pause(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(user, scheduled(every_minute(name="news"), every_minute(name="extra")))
    services.schedule_pause(schedule=Schedule.objects.get(key="extra"), user=user)
    republish(recipe, user, scheduled(every_minute(name="news")))
    assert [v.schedule.key for v in selectors.schedule_views(recipe=recipe)] == ["news"]
    assert Schedule.objects.get(key="extra").retired
    republish(recipe, user, scheduled(every_minute(name="news"), every_minute(name="extra")))
    extra = Schedule.objects.get(key="extra")
    assert not extra.retired and extra.paused_at is not None


def test_an_inactive_schedule_is_shown_and_runs_nothing(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(user, scheduled(every_minute(active=False)))
    assert tick(clock, "14:01:01") == 0
    (view,) = selectors.schedule_views(recipe=recipe)
    assert (view.state, view.next_runs) == ("inactive", [])


def test_a_schedule_made_active_counts_its_ticks_from_then(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(user, scheduled(every_minute(active=False)))
    clock.at("14:20:30")
    republish(recipe, user, scheduled(every_minute()))
    assert tick(clock, "14:21:01") == 1
    assert not MissedTicks.objects.exists()


def test_next_runs_are_three_in_the_schedules_own_zone(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = published(
        user, scheduled({"cron": "0 9 * * *", "timezone": "Asia/Tokyo", "inputs": {"topic": "x"}})
    )
    (view,) = selectors.schedule_views(recipe=recipe)
    # 09:00 in Tokyo is 00:00 UTC.
    assert view.next_runs == [datetime(2026, 12, d, 0, 0, tzinfo=UTC) for d in (4, 5, 6)]
    assert view.description == "At 09:00 every day"


def test_a_recipe_without_schedules_publishes_as_before(
    user: Any, actors: Any, clock: Clock
) -> None:
    published(user, recipe_document(slug="plain"))
    assert not Schedule.objects.exists()
    assert services.schedules_tick() == 0


@pytest.mark.django_db(transaction=True)
def test_rounds_racing_on_postgresql_start_each_tick_once(
    user: Any, actors: Any, clock: Clock
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks: SQLite runs one writer at a time anyway")
    published(user, scheduled(every_minute(), every_minute(inputs={"topic": "b"})))
    clock.at("14:01:05")
    results: list[int] = []
    barrier = threading.Barrier(4)

    def round_() -> None:
        barrier.wait()
        try:
            results.append(services.schedules_tick(now=clock.now))
        finally:
            connection.close()

    threads = [threading.Thread(target=round_) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(results) == 2
    assert Run.objects.count() == 2 and ScheduleTick.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_version_written_outside_a_transaction_brings_its_schedules(
    user: Any, actors: Any, clock: Clock
) -> None:
    recipe = recipe_import(user=user, data=scheduled(every_minute(name="news"))).recipe
    document = recipe_document(slug="digest", schedules=[every_minute(name="news")])
    RecipeVersion.objects.create(recipe=recipe, number=1, document=document)
    assert Schedule.objects.get().key == "news"
