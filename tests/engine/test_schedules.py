"""A recipe's schedules: read with clear errors, and their ticks on a clock the test holds
(due ticks, missed ones, catching up, DST)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import (
    RecipeInvalid,
    ScheduleSpec,
    describe_cron,
    due_schedule_ticks,
    next_schedule_times,
    parse_recipe,
)

GRACE = timedelta(seconds=120)


def at(text: str) -> datetime:
    """An instant in UTC: `at("2026-12-03 14:00")`, seconds optional."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def errors_of(schedules: object, **fields: Any) -> list[str]:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("s"), schedules=schedules, **fields))
    return caught.value.errors


# -- reading ---------------------------------------------------------------------------------


def test_it_reads_schedules_with_their_defaults_and_keys() -> None:
    parsed = graph(
        step("s"),
        schedules=[
            {"cron": "0  9 * * MON-FRI", "inputs": {"topic": "news"}},
            {
                "name": "nightly",
                "cron": "30 2 * * *",
                "timezone": "Europe/Paris",
                "inputs": {"topic": "night"},
                "active": False,
                "catch_up": True,
            },
        ],
    )
    first, nightly = parsed.schedules
    assert first == ScheduleSpec(key="0", cron="0 9 * * MON-FRI", inputs={"topic": "news"})
    assert (nightly.key, nightly.index, nightly.timezone) == ("nightly", 1, "Europe/Paris")
    assert (nightly.active, nightly.catch_up) == (False, True)
    assert graph(step("s")).schedules == ()


def test_an_input_with_a_default_may_be_left_out() -> None:
    parsed = graph(
        step("s"),
        inputs={"topic": {"type": "string", "required": True, "default": "weather"}},
        schedules=[{"cron": "0 * * * *"}],
    )
    assert parsed.schedules[0].inputs == {}


def test_a_schedule_gives_no_file_input() -> None:
    # A run's files are uploaded when it starts: a schedule has none, and a ref made by hand
    # would name another run's file.
    ref = {"file": "0b7c", "name": "a.pdf", "media_type": "application/pdf", "size": 1}
    ref |= {"pages": 1, "image_count": 0}
    inputs = {"doc": {"type": "file"}, "scan": {"type": "file", "required": True}}
    errors = errors_of([{"cron": "0 * * * *", "inputs": {"doc": ref}}], inputs=inputs)
    assert errors == [
        "schedules[0].inputs.doc: a schedule gives no file input: its runs upload none",
        "schedules[0].inputs.scan: is a required file input: a schedule uploads no file",
    ]


@pytest.mark.parametrize(
    ("schedules", "expected"),
    [
        ({"cron": "* * * * *"}, "schedules: must be a list of schedules, got dict"),
        (["* * * * *"], "schedules[0]: must be an object, got str"),
        ([{"inputs": {"topic": "x"}}], "schedules[0].cron: is required (e.g. '0 9 * * MON-FRI')"),
        (
            [{"cron": "*/5 * * *", "inputs": {"topic": "x"}}],
            "schedules[0].cron: must have five fields (minute hour day-of-month month "
            "day-of-week), got 4 in '*/5 * * *'",
        ),
        (
            [{"cron": "0 0 * * * *", "inputs": {"topic": "x"}}],
            "schedules[0].cron: must have five fields (minute hour day-of-month month "
            "day-of-week), got 6 in '0 0 * * * *'",
        ),
        (
            [{"cron": "61 * * * *", "inputs": {"topic": "x"}}],
            "schedules[0].cron: Bad minute in '61 * * * *'",
        ),
        (
            [{"cron": "0 0 30 2 *", "inputs": {"topic": "x"}}],
            "schedules[0].cron: Bad day-of-month in '0 0 30 2 *'",
        ),
        (
            [{"cron": 5, "inputs": {"topic": "x"}}],
            "schedules[0].cron: must be a cron expression (text), got 5",
        ),
        (
            [{"cron": "0 9 * * *", "timezone": "Mars/Olympus", "inputs": {"topic": "x"}}],
            "schedules[0].timezone: unknown time zone 'Mars/Olympus'; use an IANA name such "
            "as 'Europe/Paris' or 'UTC'",
        ),
        (
            [{"cron": "0 9 * * *", "timezone": "", "inputs": {"topic": "x"}}],
            "schedules[0].timezone: must be an IANA time zone name such as 'Europe/Paris', got ''",
        ),
        (
            [{"cron": "0 9 * * *", "active": "yes", "inputs": {"topic": "x"}}],
            "schedules[0].active: must be true or false, got 'yes'",
        ),
        (
            [{"cron": "0 9 * * *", "catch_up": 1, "inputs": {"topic": "x"}}],
            "schedules[0].catch_up: must be true or false, got 1",
        ),
        (
            [{"cron": "0 9 * * *"}],
            "schedules[0].inputs.topic: is required (the recipe has no default for it)",
        ),
        (
            [{"cron": "0 9 * * *", "inputs": {"topic": 3}}],
            "schedules[0].inputs.topic: must be a string, got 3",
        ),
        (
            [{"cron": "0 9 * * *", "inputs": {"topic": "x", "tone": "dry"}}],
            "schedules[0].inputs.tone: not an input of this recipe; declared: topic",
        ),
        (
            [{"cron": "0 9 * * *", "inputs": ["x"]}],
            "schedules[0].inputs: must be an object of name: value, got ['x']",
        ),
        (
            [{"name": "Nightly", "cron": "0 9 * * *", "inputs": {"topic": "x"}}],
            "schedules[0].name: must be a lowercase letter then up to 49 of a-z, 0-9, _ and -, "
            "got 'Nightly'",
        ),
        (
            [
                {"name": "daily", "cron": "0 9 * * *", "inputs": {"topic": "x"}},
                {"name": "daily", "cron": "0 10 * * *", "inputs": {"topic": "y"}},
            ],
            "schedules[1].name: duplicate schedule name 'daily' (also schedules[0])",
        ),
        (
            [{"cron": "0 9 * * *", "inputs": {"topic": "x"}}] * 21,
            "schedules: a recipe has at most 20 schedules, got 21",
        ),
    ],
)
def test_it_refuses_a_bad_schedule_naming_its_field(schedules: object, expected: str) -> None:
    assert expected in errors_of(schedules)


def test_every_problem_of_a_schedule_is_listed() -> None:
    errors = errors_of([{"cron": "nope", "timezone": "Nowhere", "inputs": {"topic": 1}}])
    assert [e.split(":")[0] for e in errors] == [
        "schedules[0].cron",
        "schedules[0].timezone",
        "schedules[0].inputs.topic",
    ]


def test_it_writes_a_schedule_back_as_a_document_does() -> None:
    doc = {"name": "n", "cron": "0 9 * * *", "timezone": "Asia/Tokyo", "inputs": {"topic": "x"}}
    (spec,) = graph(step("s"), schedules=[doc]).schedules
    assert spec.as_json() == doc


def test_it_says_a_cron_expression_in_words() -> None:
    assert describe_cron("0 9 * * MON-FRI") == "At 09:00 on Monday through Friday"


# -- the clock ---------------------------------------------------------------------------------


def every_minute(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec(key="0", cron="* * * * *", **fields)


def test_next_runs_are_the_following_ticks_in_utc() -> None:
    spec = ScheduleSpec(key="0", cron="0 9 * * *", timezone="Europe/Paris")
    times = next_schedule_times(spec, at("2026-12-03 08:30"), 3)
    assert times == [at("2026-12-04 08:00"), at("2026-12-05 08:00"), at("2026-12-06 08:00")]


def test_a_tick_due_now_fires_once_and_not_again() -> None:
    spec = every_minute()
    due = due_schedule_ticks(
        spec,
        since=at("2026-12-03 14:00:10"),
        now=at("2026-12-03 14:01:05"),
        grace=GRACE,
        catch_up_max=10,
    )
    assert due.fire == (at("2026-12-03 14:01"),) and due.missed is None
    again = due_schedule_ticks(
        spec,
        since=at("2026-12-03 14:01:05"),
        now=at("2026-12-03 14:01:20"),
        grace=GRACE,
        catch_up_max=10,
    )
    assert again.fire == () and again.missed is None


def test_a_tick_exactly_at_now_is_due_and_one_at_since_is_not() -> None:
    due = due_schedule_ticks(
        every_minute(),
        since=at("2026-12-03 14:00"),
        now=at("2026-12-03 14:01"),
        grace=GRACE,
        catch_up_max=0,
    )
    assert due.fire == (at("2026-12-03 14:01"),)


def test_ticks_later_than_the_grace_are_missed_not_run() -> None:
    # Down from 14:00:30 to 14:10:05: the ticks 14:01 .. 14:07 are over two minutes late.
    due = due_schedule_ticks(
        every_minute(),
        since=at("2026-12-03 14:00:30"),
        now=at("2026-12-03 14:10:05"),
        grace=GRACE,
        catch_up_max=10,
    )
    assert due.fire == (at("2026-12-03 14:09"), at("2026-12-03 14:10"))
    assert due.missed is not None
    assert (due.missed.count, due.missed.first, due.missed.last) == (
        8,
        at("2026-12-03 14:01"),
        at("2026-12-03 14:08"),
    )
    assert due.missed.summary() == (
        "8 ticks missed between 2026-12-03 14:01 UTC and 2026-12-03 14:08 UTC"
    )


def test_a_daily_tick_missed_by_hours_is_reported_once_and_nothing_runs() -> None:
    spec = ScheduleSpec(key="0", cron="0 9 * * *")
    due = due_schedule_ticks(
        spec, since=at("2026-12-03 08:00"), now=at("2026-12-03 13:00"), grace=GRACE, catch_up_max=10
    )
    assert due.fire == ()
    assert (
        due.missed is not None and due.missed.summary() == "1 tick missed at 2026-12-03 09:00 UTC"
    )


def test_catch_up_runs_the_latest_missed_ticks_oldest_first_up_to_its_bound() -> None:
    spec = every_minute(catch_up=True)
    due = due_schedule_ticks(
        spec,
        since=at("2026-12-03 14:00:30"),
        now=at("2026-12-03 14:10:05"),
        grace=GRACE,
        catch_up_max=3,
    )
    assert due.fire == tuple(at(f"2026-12-03 14:{m:02}") for m in (6, 7, 8, 9, 10))
    assert due.missed is not None
    assert (due.missed.count, due.missed.first, due.missed.last) == (
        5,
        at("2026-12-03 14:01"),
        at("2026-12-03 14:05"),
    )


def test_catch_up_within_its_bound_misses_nothing() -> None:
    spec = every_minute(catch_up=True)
    due = due_schedule_ticks(
        spec,
        since=at("2026-12-03 14:00:30"),
        now=at("2026-12-03 14:10:05"),
        grace=GRACE,
        catch_up_max=100,
    )
    assert len(due.fire) == 10 and due.missed is None


def test_a_very_long_outage_is_counted_as_a_lower_bound() -> None:
    due = due_schedule_ticks(
        every_minute(),
        since=at("2026-01-01 00:00"),
        now=at("2026-12-01 00:00"),
        grace=GRACE,
        catch_up_max=0,
    )
    assert due.missed is not None and due.missed.at_least
    assert due.missed.summary().startswith("at least 100000 ticks missed between 2026-01-01 00:01")
    assert due.missed.last == at("2026-11-30 23:58")  # exactly the grace late: missed


# -- daylight saving time (Europe/Berlin: 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00)


def test_a_fixed_time_that_does_not_exist_runs_at_the_first_minute_that_does() -> None:
    spec = ScheduleSpec(key="0", cron="30 2 * * *", timezone="Europe/Berlin")
    times = next_schedule_times(spec, at("2026-03-28 12:00"), 2)
    # 03:00 CEST is 01:00 UTC; the next day's 02:30 CEST is 00:30 UTC.
    assert times == [at("2026-03-29 01:00"), at("2026-03-30 00:30")]


def test_a_fixed_time_that_happens_twice_runs_once() -> None:
    spec = ScheduleSpec(key="0", cron="30 2 * * *", timezone="Europe/Berlin")
    times = next_schedule_times(spec, at("2026-10-24 12:00"), 2)
    # The first 02:30 (CEST, 00:30 UTC), then 02:30 CET the next day (01:30 UTC).
    assert times == [at("2026-10-25 00:30"), at("2026-10-26 01:30")]


def test_a_step_through_the_hours_follows_real_time_across_the_change() -> None:
    spec = ScheduleSpec(key="0", cron="0 * * * *", timezone="Europe/Berlin")
    times = next_schedule_times(spec, at("2026-10-24 23:30"), 4)
    # 02:00 CEST, 02:00 CET, 03:00 CET... one hour apart each.
    assert times == [
        at("2026-10-25 00:00"),
        at("2026-10-25 01:00"),
        at("2026-10-25 02:00"),
        at("2026-10-25 03:00"),
    ]


def test_due_ticks_across_a_dst_change_in_the_schedules_zone() -> None:
    spec = ScheduleSpec(key="0", cron="30 2 * * *", timezone="Europe/Berlin")
    due = due_schedule_ticks(
        spec,
        since=at("2026-03-29 00:59"),
        now=at("2026-03-29 01:00:10"),
        grace=GRACE,
        catch_up_max=0,
    )
    assert due.fire == (at("2026-03-29 01:00"),)
