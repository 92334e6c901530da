"""Commit a step's result on PostgreSQL in one SQL statement.

Through the ORM a step's commit is four statements inside its transaction: the fenced UPDATE of
the run, the StepRun INSERT, the branch evaluations' INSERT and the events' INSERT. Each is a
round trip to the database plus the ORM's work to build it, and on a fast step they are most of
the runner's overhead. Here they are one data-modifying CTE: the fenced UPDATE, then the inserts
reading the run's id from it (so a fenced-out worker inserts nothing), all in the caller's
transaction (its `on_commit` hooks still run after COMMIT).

The UPDATE adds the new events to the run's `event_seq` instead of matching it, so events
another writer added since the claim are numbered after, as the ORM path's retry does; the
statement returns the count the new events are numbered from.

Columns come from the models' `_meta`, and values go through the fields' own `pre_save` and
`get_db_prep_save`, so a field added to StepRun, BranchEvaluation or RunEvent is written here as
the ORM would write it. SQLite (the embedded default) and human steps take the ORM path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models

from .models import BranchEvaluation, Run, RunEvent, StepRun

ORDER = "_ord"  # a recordset row's position, from 1 (not a column of any table)


class _Encoder(DjangoJSONEncoder):
    """DjangoJSONEncoder, but datetimes keep their microseconds (as the ORM stores them)."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        return super().default(o)


def _insert_values(obj: models.Model) -> dict[str, tuple[str, Any]]:
    """By column, the type and value an INSERT of `obj` writes (not its auto primary key)."""
    return {
        field.column: (
            field.cast_db_type(connection),
            field.get_db_prep_save(field.pre_save(obj, True), connection),
        )
        for field in obj._meta.concrete_fields
        if not field.primary_key
    }


def _recordset(
    model: type[models.Model], objs: Sequence[models.Model], exclude: frozenset[str]
) -> tuple[list[str], str, str]:
    """Columns, `e(column type, ...)` definition and JSON of `objs` for jsonb_to_recordset."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and f.name not in exclude]
    columns = [f.column for f in fields]
    definition = ", ".join(
        [f"{ORDER} integer"]
        + [f"{connection.ops.quote_name(f.column)} {f.cast_db_type(connection)}" for f in fields]
    )
    rows = [
        {ORDER: i, **{f.column: f.pre_save(obj, True) for f in fields}}
        for i, obj in enumerate(objs, start=1)
    ]
    return columns, definition, json.dumps(rows, cls=_Encoder)


def commit_step(
    *,
    run_id: int,
    token: str,
    seq: int,
    statuses: Sequence[str],
    changes: dict[str, Any],
    step_run: StepRun,
    evaluations: Sequence[BranchEvaluation],
    run_events: Sequence[RunEvent],
) -> int | None:
    """Write the step if the run is still leased to `token` at `seq` in one of `statuses`.

    Returns the run's event_seq the `run_events` are numbered after (their `seq` is set), or
    None if the fence refused the commit (nothing was written). A unique violation (the step was
    committed already) raises IntegrityError as the ORM would.
    """
    quote = connection.ops.quote_name
    run_meta = Run._meta
    sets, set_params = [], []
    for name, value in changes.items():
        field = run_meta.get_field(name)
        sets.append(f"{quote(field.column)} = %s")
        set_params.append(field.get_db_prep_save(value, connection))
    run_key, lease_token, next_seq, status, event_seq = (
        quote(run_meta.get_field(name).column)
        for name in ("id", "lease_token", "next_seq", "status", "event_seq")
    )
    n_events = len(run_events)
    sets.append(f"{event_seq} = {event_seq} + %s")
    set_params.append(n_events)

    step_values = _insert_values(step_run)
    step_columns = ", ".join(quote(c) for c in step_values)
    step_placeholders = ", ".join(f"%s::{db_type}" for db_type, _ in step_values.values())

    eval_columns, eval_def, eval_json = _recordset(
        BranchEvaluation, evaluations, frozenset({"step_run"})
    )
    event_columns, event_def, event_json = _recordset(
        RunEvent, run_events, frozenset({"run", "seq"})
    )

    eval_step_run = quote(BranchEvaluation._meta.get_field("step_run").column)
    event_run = quote(RunEvent._meta.get_field("run").column)
    event_seq_column = quote(RunEvent._meta.get_field("seq").column)
    sql = (
        f"WITH fence AS ("
        f"UPDATE {quote(run_meta.db_table)} SET {', '.join(sets)} "
        f"WHERE {run_key} = %s AND {lease_token} = %s AND {next_seq} = %s "
        f"AND {status} = ANY(%s) "
        f"RETURNING {run_key} AS id, {event_seq} - %s AS base), "
        f"step AS (INSERT INTO {quote(StepRun._meta.db_table)} ({step_columns}) "
        f"SELECT {step_placeholders} FROM fence RETURNING id), "
        f"evals AS (INSERT INTO {quote(BranchEvaluation._meta.db_table)} "
        f"({eval_step_run}, {', '.join(quote(c) for c in eval_columns)}) "
        f"SELECT step.id, {', '.join('e.' + quote(c) for c in eval_columns)} "
        f"FROM step, jsonb_to_recordset(%s::jsonb) AS e({eval_def})), "
        f"evts AS (INSERT INTO {quote(RunEvent._meta.db_table)} "
        f"({event_run}, {event_seq_column}, {', '.join(quote(c) for c in event_columns)}) "
        f"SELECT fence.id, fence.base + e.{ORDER}, "
        f"{', '.join('e.' + quote(c) for c in event_columns)} "
        f"FROM fence, jsonb_to_recordset(%s::jsonb) AS e({event_def})) "
        f"SELECT base FROM fence"
    )
    params = [
        *set_params,
        run_id,
        token,
        seq,
        list(statuses),
        n_events,
        *(value for _, value in step_values.values()),
        eval_json,
        event_json,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    base = row[0]
    for number, event in enumerate(run_events, start=base + 1):
        event.seq = number
    return base
