"""A recipe's schedules: when its runs start by themselves.

A recipe may carry `schedules: [{"name", "cron", "timezone", "inputs", "active", "catch_up"}]`.
`cron` is a five-field expression (minute hour day-of-month month day-of-week, as Debian cron
reads it, `cronsim` computes it) in `timezone` (an IANA name, default UTC); `inputs` are the
run's inputs, checked as a run start checks them. A schedule is known by its `name`, or by its
place in the list when it has none: what the server keeps about it (a pause, its history)
follows that key from one published version to the next.

The clock is the caller's: `due_ticks` says which ticks between two instants start a run and
which were missed (the service had not looked in time), and `next_times` what comes next.
A tick `grace` late or more is missed, not run, unless the schedule asks to `catch_up` (then the
latest of them run, at most `catch_up_max`). DST follows Debian cron: a fixed time that does
not exist that day runs at the first minute that does, one that exists twice runs once;
expressions stepping through every hour (`*/30 * * * *`) follow real time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from workflows.engine.files import is_file_type
from workflows.engine.inputs import input_type_problem

MAX_SCHEDULES = 20
NAME = re.compile(r"[a-z][a-z0-9_-]{0,49}")
DEFAULT_TIMEZONE = "UTC"
# How many late ticks one round counts before it gives a lower bound ("at least N").
SCAN_MAX = 100_000
# Any instant: cron expressions are checked by building them from it.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """One schedule as the recipe declares it; `key` is its name, or its index as text."""

    key: str
    cron: str
    timezone: str = DEFAULT_TIMEZONE
    inputs: Mapping[str, Any] = field(default_factory=dict)
    active: bool = True
    catch_up: bool = False
    name: str = ""
    index: int = 0

    def as_json(self) -> dict[str, Any]:
        """Return the schedule as a recipe document writes it (defaults left out)."""
        doc: dict[str, Any] = {"name": self.name} if self.name else {}
        doc["cron"] = self.cron
        if self.timezone != DEFAULT_TIMEZONE:
            doc["timezone"] = self.timezone
        if self.inputs:
            doc["inputs"] = dict(self.inputs)
        if not self.active:
            doc["active"] = False
        if self.catch_up:
            doc["catch_up"] = True
        return doc


@dataclass(frozen=True, slots=True)
class Missed:
    """Ticks that were not run: how many (`at_least`: more were not counted), first, last."""

    count: int
    first: datetime
    last: datetime
    at_least: bool = False

    def summary(self) -> str:
        """Say what was missed: `3 ticks missed between 2026-12-03 14:01 UTC and 14:03 UTC`."""
        count = f"at least {self.count}" if self.at_least else str(self.count)
        noun = "tick" if self.count == 1 and not self.at_least else "ticks"
        when = (
            f"at {_minute(self.first)}"
            if self.first == self.last
            else f"between {_minute(self.first)} and {_minute(self.last)}"
        )
        return f"{count} {noun} missed {when}"


@dataclass(frozen=True, slots=True)
class Due:
    """What a round finds due: the ticks to run (oldest first) and those missed."""

    fire: tuple[datetime, ...] = ()
    missed: Missed | None = None


def next_times(spec: ScheduleSpec, after: datetime, count: int = 3) -> list[datetime]:
    """Return the schedule's next `count` ticks strictly after `after`, in UTC."""
    times = []
    for tick in _forward(spec, after):
        times.append(tick)
        if len(times) == count:
            break
    return times


def due_ticks(
    spec: ScheduleSpec,
    *,
    since: datetime,
    now: datetime,
    grace: timedelta,
    catch_up_max: int,
) -> Due:
    """Return the ticks in (since, now] to run, and those missed.

    A tick less than `grace` before `now` is on time and runs. An older one was missed; with
    `catch_up`, the latest `catch_up_max` of those run too (oldest first) and only the rest
    are missed.
    """
    on_time_from = max(since, now - grace)
    on_time = list(_between(spec, on_time_from, now))
    if on_time_from <= since:
        return Due(fire=tuple(on_time))
    wanted = catch_up_max + 1 if spec.catch_up and catch_up_max > 0 else 1
    late = _latest(spec, since, on_time_from, wanted)  # newest first
    replay = late[: wanted - 1] if spec.catch_up else []
    unrun = late[len(replay) :]
    fire = tuple(reversed(replay)) + tuple(on_time)
    if not unrun:
        return Due(fire=fire)
    last = unrun[0]
    count, first = 0, last
    for tick in _forward(spec, since):
        if tick > last:
            break
        if count == 0:
            first = tick
        count += 1
        if count == SCAN_MAX:
            return Due(fire=fire, missed=Missed(count, first, last, at_least=True))
    return Due(fire=fire, missed=Missed(count, first, last))


def describe(cron: str) -> str:
    """Return an expression in words (`At 09:00 on Monday through Friday`), or "" if unknown."""
    try:
        return CronSim(cron, _EPOCH).explain()
    except Exception:  # explain() covers most of cron, not every combination
        return ""


def _forward(spec: ScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Yield the ticks strictly after `after`, in UTC."""
    iterator = CronSim(spec.cron, after.astimezone(ZoneInfo(spec.timezone)))
    for tick in iterator:
        yield tick.astimezone(UTC)


def _between(spec: ScheduleSpec, start: datetime, end: datetime) -> Iterator[datetime]:
    """Yield the ticks in (start, end], oldest first."""
    for tick in _forward(spec, start):
        if tick > end:
            return
        yield tick


def _latest(spec: ScheduleSpec, start: datetime, end: datetime, count: int) -> list[datetime]:
    """Return up to `count` ticks in (start, end], newest first."""
    # Reverse iteration yields ticks before its start: begin one second past `end`, whole.
    begin = end.replace(microsecond=0) + timedelta(seconds=1)
    iterator = CronSim(spec.cron, begin.astimezone(ZoneInfo(spec.timezone)), reverse=True)
    found: list[datetime] = []
    for tick in iterator:
        moment = tick.astimezone(UTC)
        if moment <= start:
            break
        if moment <= end:
            found.append(moment)
            if len(found) == count:
                break
    return found


def _minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


# -- reading ------------------------------------------------------------------------------


def parse_schedules(
    value: object,
    error: Callable[[str, str], None],
    inputs: Mapping[str, Mapping[str, Any]],
) -> tuple[ScheduleSpec, ...]:
    """Read a recipe's `schedules`; report each problem through `error(path, message)`.

    `inputs` is the recipe's parsed input schema, which each schedule's inputs must fit.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        error("schedules", f"must be a list of schedules, got {type(value).__name__}")
        return ()
    if len(value) > MAX_SCHEDULES:
        error("schedules", f"a recipe has at most {MAX_SCHEDULES} schedules, got {len(value)}")
        return ()
    specs: list[ScheduleSpec] = []
    names: dict[str, int] = {}
    for index, doc in enumerate(value):
        path = f"schedules[{index}]"
        if not isinstance(doc, Mapping):
            error(path, f"must be an object, got {type(doc).__name__}")
            continue
        spec = _schedule(doc, index, path, error, inputs)
        if spec is None:
            continue
        if spec.name:
            if spec.name in names:
                error(
                    f"{path}.name",
                    f"duplicate schedule name '{spec.name}' (also schedules[{names[spec.name]}])",
                )
                continue
            names[spec.name] = index
        specs.append(spec)
    return tuple(specs)


def _schedule(
    doc: Mapping[str, Any],
    index: int,
    path: str,
    error: Callable[[str, str], None],
    inputs: Mapping[str, Mapping[str, Any]],
) -> ScheduleSpec | None:
    problems = _Counter(error)
    name = doc.get("name") or ""
    if not isinstance(name, str) or (name and not NAME.fullmatch(name)):
        problems(
            f"{path}.name",
            f"must be a lowercase letter then up to 49 of a-z, 0-9, _ and -, got {name!r}",
        )
    cron = doc.get("cron")
    if cron is None:
        problems(f"{path}.cron", "is required (e.g. '0 9 * * MON-FRI')")
    elif (problem := cron_problem(cron)) is not None:
        problems(f"{path}.cron", problem)
    zone = doc.get("timezone", DEFAULT_TIMEZONE)
    if (problem := timezone_problem(zone)) is not None:
        problems(f"{path}.timezone", problem)
    for flag in ("active", "catch_up"):
        if flag in doc and not isinstance(doc[flag], bool):
            problems(f"{path}.{flag}", f"must be true or false, got {doc[flag]!r}")
    run_inputs = doc.get("inputs", {})
    if run_inputs is None:
        run_inputs = {}
    if not isinstance(run_inputs, Mapping):
        problems(f"{path}.inputs", f"must be an object of name: value, got {run_inputs!r}")
    else:
        for where, message in inputs_problems(inputs, run_inputs):
            problems(f"{path}.inputs{where}", message)
    if problems.count:
        return None
    return ScheduleSpec(
        key=name or str(index),
        cron=" ".join(str(cron).split()),
        timezone=str(zone),
        inputs=dict(run_inputs),
        active=doc.get("active", True),
        catch_up=doc.get("catch_up", False),
        name=name,
        index=index,
    )


class _Counter:
    """Pass errors on, counting them."""

    def __init__(self, error: Callable[[str, str], None]) -> None:
        self.error = error
        self.count = 0

    def __call__(self, path: str, message: str) -> None:
        self.count += 1
        self.error(path, message)


def cron_problem(cron: object) -> str | None:
    """Return why `cron` is not a five-field cron expression that ever fires, or None."""
    if not isinstance(cron, str):
        return f"must be a cron expression (text), got {cron!r}"
    fields = cron.split()
    if len(fields) != 5:
        return (
            "must have five fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)} in {cron!r}"
        )
    try:
        next(CronSim(cron, _EPOCH))
    except CronSimError as exc:
        return f"{exc} in {cron!r}"
    except StopIteration:
        return f"never matches a date: {cron!r}"
    return None


def timezone_problem(zone: object) -> str | None:
    """Return why `zone` is not an IANA time zone name, or None."""
    if not isinstance(zone, str) or not zone:
        return f"must be an IANA time zone name such as 'Europe/Paris', got {zone!r}"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {zone!r}; use an IANA name such as 'Europe/Paris' or 'UTC'"
    return None


def inputs_problems(
    schema: Mapping[str, Mapping[str, Any]], inputs: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """Return what a run start would refuse in `inputs`, as (`.NAME`, message) pairs."""
    problems = [
        (f".{name}", f"not an input of this recipe; declared: {', '.join(schema) or 'none'}")
        for name in inputs
        if name not in schema
    ]
    for name, spec in schema.items():
        value = inputs.get(name)
        kind = str(spec.get("type", "string"))
        if value is None:
            if spec.get("default") is None and spec.get("required"):
                reason = (
                    "is a required file input: a schedule uploads no file"
                    if is_file_type(kind)
                    else "is required (the recipe has no default for it)"
                )
                problems.append((f".{name}", reason))
            continue
        if is_file_type(kind):
            # A run's files are uploaded when it starts; a schedule has none to upload.
            problems.append((f".{name}", "a schedule gives no file input: its runs upload none"))
            continue
        problem = input_type_problem(kind, value)
        if problem:
            problems.append((f".{name}", problem))
    return problems
