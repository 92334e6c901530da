"""The runner's hot statements on PostgreSQL, each one prepared SQL statement: a step's
commit (or a claim), a run's start, and the reads a claim needs.

Through the ORM a step's commit is four statements inside its transaction: the fenced UPDATE of
the run, the StepRun INSERT, the branch evaluations' INSERT and the events' INSERT. Each is a
round trip to the database plus the ORM's work to build it, and on a fast step they are most of
the runner's overhead. Here they are one data-modifying CTE: the fenced UPDATE, then the inserts
reading the run's id from it (so a fenced-out worker inserts nothing). A claim is the same
without the step's rows.

The UPDATE adds the new events to the run's `event_seq` instead of matching it, so events
another writer added since the claim are numbered after, as the ORM path's retry does; the
statement returns the count the new events are numbered from.

The statement's text is built once per process for each set of run fields it changes, and it is
sent with server-side parameters as a prepared statement: PostgreSQL plans it once per
connection, and no parameter is quoted into SQL text on our side. Columns come from the models'
`_meta`, and values go through the fields' own `pre_save` and `get_db_prep_save`, so a field
added to StepRun, BranchEvaluation or RunEvent is written here as the ORM would write it. SQLite
(the embedded default) and human steps take the ORM path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

import psycopg
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models, transaction

from workflows.models import RecipeVersion

from .models import BranchEvaluation, Run, RunEvent, StepRun

ModelT = TypeVar("ModelT", bound=models.Model)

ORDER = "_ord"  # a recordset row's position, from 1 (not a column of any table)


class _Encoder(DjangoJSONEncoder):
    """DjangoJSONEncoder, but datetimes keep their microseconds (as the ORM stores them)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        return super().default(o)


class _PreparedCursor(psycopg.Cursor[Any]):
    """A server-side binding cursor whose statements are prepared on first use.

    Django's own cursors bind on the client and prepare nothing (for connection poolers); this
    one runs this module's statements only.
    """

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        return super().execute(query, params, prepare=True)


@cache
def _inserted_fields(
    model: type[models.Model], exclude: frozenset[str] = frozenset()
) -> tuple[models.Field[Any, Any], ...]:
    return tuple(
        f for f in model._meta.concrete_fields if not f.primary_key and f.name not in exclude
    )


@cache
def _statement(changed: tuple[str, ...], with_step: bool, exact_events: bool) -> str:
    """The SQL for an UPDATE of the run that sets the `changed` fields, with the events' INSERT
    and, `with_step`, the StepRun's and its evaluations' INSERTs; `exact_events` fences on the
    run's event count too."""
    quote = connection.ops.quote_name

    def col(model: type[models.Model], name: str) -> str:
        return quote(model._meta.get_field(name).column)

    sets = [f"{col(Run, name)} = %s" for name in changed]
    sets.append(f"{col(Run, 'event_seq')} = {col(Run, 'event_seq')} + %s")
    parts = [
        f"fence AS (UPDATE {quote(Run._meta.db_table)} SET {', '.join(sets)} "
        f"WHERE {col(Run, 'id')} = %s AND {col(Run, 'lease_token')} = %s "
        f"AND {col(Run, 'next_seq')} = %s AND {col(Run, 'status')} = ANY(%s) "
        + (f"AND {col(Run, 'event_seq')} = %s " if exact_events else "")
        + f"RETURNING {col(Run, 'id')} AS id, {col(Run, 'event_seq')} - %s AS base)"
    ]
    if with_step:
        step_fields = _inserted_fields(StepRun)
        step_columns = ", ".join(quote(f.column) for f in step_fields)
        step_values = ", ".join(f"%s::{f.cast_db_type(connection)}" for f in step_fields)
        eval_columns, eval_definition = _recordset_columns(BranchEvaluation, EVALUATION_EXCLUDED)
        parts += [
            f"step AS (INSERT INTO {quote(StepRun._meta.db_table)} ({step_columns}) "
            f"SELECT {step_values} FROM fence RETURNING id)",
            f"evals AS (INSERT INTO {quote(BranchEvaluation._meta.db_table)} "
            f"({col(BranchEvaluation, 'step_run')}, {', '.join(eval_columns)}) "
            f"SELECT step.id, {', '.join('e.' + c for c in eval_columns)} "
            f"FROM step, jsonb_to_recordset(%s::jsonb) AS e({eval_definition}))",
        ]
    event_columns, event_definition = _recordset_columns(RunEvent, EVENT_EXCLUDED)
    parts.append(
        f"evts AS (INSERT INTO {quote(RunEvent._meta.db_table)} "
        f"({col(RunEvent, 'run')}, {col(RunEvent, 'seq')}, {', '.join(event_columns)}) "
        f"SELECT fence.id, fence.base + e.{ORDER}, {', '.join('e.' + c for c in event_columns)} "
        f"FROM fence, jsonb_to_recordset(%s::jsonb) AS e({event_definition}))"
    )
    return f"WITH {', '.join(parts)} SELECT base FROM fence"


EVALUATION_EXCLUDED = frozenset({"step_run"})
EVENT_EXCLUDED = frozenset({"run", "seq"})


def _recordset_columns(model: type[models.Model], exclude: frozenset[str]) -> tuple[list[str], str]:
    """Quoted columns and the `e(column type, ...)` definition of a jsonb_to_recordset."""
    quote = connection.ops.quote_name
    fields = _inserted_fields(model, exclude)
    definition = ", ".join(
        [f"{ORDER} integer"] + [f"{quote(f.column)} {f.cast_db_type(connection)}" for f in fields]
    )
    return [quote(f.column) for f in fields], definition


def _recordset_json(
    model: type[models.Model], objs: Sequence[models.Model], exclude: frozenset[str]
) -> str:
    """`objs` as the JSON array their jsonb_to_recordset reads (columns as in `_statement`)."""
    fields = _inserted_fields(model, exclude)
    rows = [
        {ORDER: i, **{f.column: f.pre_save(obj, True) for f in fields}}
        for i, obj in enumerate(objs, start=1)
    ]
    return json.dumps(rows, cls=_Encoder)


def commit_step(
    *,
    run_id: int,
    token: str,
    seq: int,
    statuses: Sequence[str],
    changes: dict[str, Any],
    run_events: Sequence[RunEvent],
    step_run: StepRun | None = None,
    evaluations: Sequence[BranchEvaluation] = (),
    event_seq: int | None = None,
) -> int | None:
    """Write the step if the run is still leased to `token` at `seq` in one of `statuses`
    (and, with `event_seq`, still has that many events: nothing happened to it since it was
    read).

    Without `step_run`, only the run's changes and the events are written (a claim).
    Returns the run's event_seq the `run_events` are numbered after (their `seq` is set), or
    None if the fence refused the commit (nothing was written). A unique violation (the step was
    committed already) raises IntegrityError as the ORM would.
    """
    run_meta = Run._meta
    n_events = len(run_events)
    params = [
        *(
            run_meta.get_field(name).get_db_prep_save(value, connection)
            for name, value in changes.items()
        ),
        n_events,
        run_id,
        token,
        seq,
        list(statuses),
        *([] if event_seq is None else [event_seq]),
        n_events,
    ]
    if step_run is not None:
        params += [
            f.get_db_prep_save(f.pre_save(step_run, True), connection)
            for f in _inserted_fields(StepRun)
        ]
        params.append(_recordset_json(BranchEvaluation, evaluations, EVALUATION_EXCLUDED))
    params.append(_recordset_json(RunEvent, run_events, EVENT_EXCLUDED))
    statement = _statement(tuple(changes), step_run is not None, event_seq is not None)
    row = _execute(statement, params)
    if row is None:
        return None
    base: int = row[0]
    for number, event in enumerate(run_events, start=base + 1):
        event.seq = number
    return base


@cache
def _start_statement() -> str:
    """The SQL that inserts a run and its first events."""
    quote = connection.ops.quote_name
    run_fields = _inserted_fields(Run)
    event_columns, event_definition = _recordset_columns(RunEvent, EVENT_EXCLUDED)
    run_event, event_seq = (quote(RunEvent._meta.get_field(n).column) for n in ("run", "seq"))
    return (
        f"WITH run AS (INSERT INTO {quote(Run._meta.db_table)} "
        f"({', '.join(quote(f.column) for f in run_fields)}) "
        f"VALUES ({', '.join(f'%s::{f.cast_db_type(connection)}' for f in run_fields)}) "
        f"RETURNING id), "
        f"evts AS (INSERT INTO {quote(RunEvent._meta.db_table)} "
        f"({run_event}, {event_seq}, {', '.join(event_columns)}) "
        f"SELECT run.id, e.{ORDER}, {', '.join('e.' + c for c in event_columns)} "
        f"FROM run, jsonb_to_recordset(%s::jsonb) AS e({event_definition})) "
        f"SELECT id FROM run"
    )


def start_run(run: Run, run_events: Sequence[RunEvent]) -> None:
    """Insert a new run (its `event_seq` counts `run_events`) and its first events, numbered
    from 1, in one statement; sets the run's and the events' keys."""
    params = [f.get_db_prep_save(f.pre_save(run, True), connection) for f in _inserted_fields(Run)]
    params.append(_recordset_json(RunEvent, run_events, EVENT_EXCLUDED))
    row = _execute(_start_statement(), params)
    assert row is not None
    run.pk = row[0]
    run._state.adding = False
    for number, event in enumerate(run_events, start=1):
        event.run_id, event.seq = run.pk, number


@cache
def _read_statement() -> str:
    """The SQL that reads a run and its version's creation time."""
    quote = connection.ops.quote_name
    version_table = quote(RecipeVersion._meta.db_table)
    return (
        f"SELECT {', '.join('r.' + quote(f.column) for f in Run._meta.concrete_fields)}, "
        f"v.{quote('created_at')} FROM {quote(Run._meta.db_table)} r "
        f"JOIN {version_table} v ON v.{quote('id')} = r.{quote('version_id')} "
        f"WHERE r.{quote('id')} = %s"
    )


def read_run(run_id: int) -> tuple[Run, datetime] | None:
    """The run, as the ORM would load it, and its version's creation time; None if gone."""
    row = _execute(_read_statement(), [run_id])
    if row is None:
        return None
    return _from_row(Run, row), row[-1]


@cache
def _select_statement(model: type[models.Model], column: str) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in model._meta.concrete_fields)
    return f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {quote(column)} = %s"


def select_one(model: type[ModelT], column: str, value: Any) -> ModelT | None:
    """The row of `model` whose unique `column` is `value`, as the ORM would load it."""
    row = _execute(_select_statement(model, column), [value])
    return None if row is None else _from_row(model, row)


def _from_row(model: type[ModelT], row: Sequence[Any]) -> ModelT:
    """An instance from a row of `model`'s concrete columns (in order), converted as the ORM
    converts them (JSON is read as text, as Django's PostgreSQL backend reads it)."""
    fields = model._meta.concrete_fields
    values = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=False)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def _execute(statement: str, params: list[Any]) -> tuple[Any, ...] | None:
    """Run a statement prepared and return its first row.

    Outside a transaction the statement is its own (no BEGIN and COMMIT round trips); inside a
    caller's, it runs in a savepoint, so that a refused statement leaves that one usable.
    """
    connection.close_if_health_check_failed()  # as Django's own cursors do (CONN_HEALTH_CHECKS)
    connection.ensure_connection()
    # Django's cursor wrapper, for its error translation and execute_wrapper hooks. Its debug
    # wrapper cannot read a prepared statement's text back, so the query log entry is made here.
    with (
        transaction.atomic() if connection.in_atomic_block else nullcontext(),
        connection.make_cursor(_PreparedCursor(connection.connection)) as cursor,
    ):
        started = time.monotonic()
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if connection.queries_logged:
        duration = time.monotonic() - started
        connection.queries_log.append({"sql": statement, "time": f"{duration:.3f}"})
    return row
