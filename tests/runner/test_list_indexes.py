"""The lists' queries at 100,000 runs, 1,000,000 events and 10,000 open tasks.

Every list that the API, the pages, the websockets and `/metrics` read is EXPLAINed on
PostgreSQL over tables of that size: a sequential scan of a big table (runs, events, tasks)
fails the test and prints the plan, for the list's index is missing or its query cannot use
it. The queries are the code's own: the test sends the requests (a first page, and a page after
a cursor from the middle of the list) or calls the consumers' and the metrics' readers, and
EXPLAINs each query they sent that reads a big table.

PostgreSQL only: skipped on SQLite, a failure under CI=true. The rows are written set-based
(INSERT ... SELECT generate_series) and committed, so that VACUUM ANALYZE gives the planner the
statistics and visibility map of tables autovacuum keeps; the module's teardown truncates them.
Run with `-s` to see how each query reads the big tables, how many rows it reads, and its time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from editor.views import runs as run_pages
from runner import consumers
from runner.metrics import DatabaseCollector
from runner.models import HumanTask, Run
from runner.status import RunStatus, TaskStatus
from tests.factories import UserFactory
from workflows.apis.pagination import Keyset
from workflows.models import Recipe, RecipeVersion

# The mark makes pytest-django set up the test database even when this module runs alone.
pytestmark = pytest.mark.django_db

BIG_TABLES = frozenset({"runner_run", "runner_runevent", "runner_humantask"})
RUNS = 100_000
EVENTS_PER_RUN = 10  # 1,000,000 events
# A hundred runs in a row, by position: what each one's status is. 10% wait on a reviewer
# (10,000 open tasks), 40% were decided by one (40,000 closed tasks).
STATUS_CYCLE = (
    [RunStatus.WAITING_HUMAN] * 10
    + [RunStatus.FAILED] * 5
    + [RunStatus.CANCELLED, RunStatus.RUNNING, RunStatus.QUEUED]
    + [RunStatus.SUCCEEDED] * 82
)
OUTCOMES = {RunStatus.SUCCEEDED: "completed", RunStatus.FAILED: "failed"}
DECIDED = range(18, 58)  # the positions in the cycle whose run had a task, decided
RECIPES = 20  # runs come in blocks of a hundred per recipe, round the recipes,
RARE_EVERY = 2000  # except one run in 2,000: of the rare recipe (50 runs)
EVENT_TYPES = [
    "run.started",
    "step.started",
    "step.finished",
    "branch.evaluated",
    "branch.taken",
    "step.started",
    "step.finished",
    "human_task.created",
    "human_task.decided",
    "run.finished",
]
START = datetime(2026, 1, 1, tzinfo=UTC)
# A run's state as the engine keeps it: the width of a real row, which the planner weighs.
STATE = {
    "current": "review",
    "visited": ["write", "judge", "review"],
    "retries": {"write": 1},
    "variables": {"score": 7, "topic": "a lighthouse keeper who finds a map in a bottle"},
}


@dataclass(frozen=True)
class Scale:
    """Who sees what in the seeded tables, and where a page in the middle of a list starts."""

    users: dict[str, Any]
    recipes: dict[str, str]  # slug by role
    run_key: tuple[datetime, int]  # (created_at, id) of the run in the middle
    task_key: tuple[datetime, int]  # of an open task in the middle
    run_id: int  # the run in the middle, with its ten events


def require_postgresql() -> None:
    """Skip on SQLite; with CI=true, fail instead: CI runs the suite on PostgreSQL."""
    if connection.vendor == "postgresql":
        return
    reason = "the EXPLAIN checks need PostgreSQL (DATABASE_URL)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def scale(django_db_setup: None, django_db_blocker: Any) -> Iterator[Scale]:
    """Seed the tables, commit and VACUUM ANALYZE them; truncate them after the module."""
    require_postgresql()
    # The teardown truncates the run tables: never those of a database other than the tests'.
    assert connection.settings_dict["NAME"].startswith("test_"), connection.settings_dict["NAME"]
    with django_db_blocker.unblock():
        started = time.perf_counter()
        try:
            seeded = _seed()
            with connection.cursor() as cursor:
                for table in (
                    "runner_run",
                    "runner_runevent",
                    "runner_steprun",
                    "runner_humantask",
                ):
                    cursor.execute(f"VACUUM ANALYZE {table}")
                cursor.execute("ANALYZE")  # the small tables too: recipes, shares, groups
            print(f"\nseeded and analyzed in {time.perf_counter() - started:.1f} s")
            yield seeded
        finally:
            _clean_up()


def _seed() -> Scale:
    names = ("staff", "owner", "other", "sharee", "member", "loner")
    users = {
        name: UserFactory(username=f"scale-{name}", is_staff=name == "staff") for name in names
    }
    users |= {name: UserFactory(username=f"scale-{name}") for name in REVIEWERS}
    groups = {
        name: Group.objects.create(name=f"scale-{name}")
        for name in ("editors", "legal", "support", "auditors", "partners")
    }
    users["reviewer"].groups.add(groups["editors"])
    users["busy_reviewer"].groups.add(groups["editors"], groups["legal"])
    users["auditor"].groups.add(groups["auditors"])
    users["member"].groups.add(groups["partners"])
    recipes = [
        Recipe.objects.create(
            slug=f"scale-{i:02}",
            name=f"Scale {i:02}",
            owner=users["owner"] if i < RECIPES // 2 else users["other"],
        )
        for i in range(RECIPES)
    ]
    recipes.append(Recipe.objects.create(slug="scale-rare", name="Rare", owner=users["loner"]))
    recipes[0].shared_with_users.add(users["sharee"])
    for recipe in recipes[RECIPES // 2 : RECIPES // 2 + 2]:
        recipe.shared_with_groups.add(groups["partners"])
    versions = [
        RecipeVersion.objects.create(recipe=recipe, number=1, document={}) for recipe in recipes
    ]
    with connection.cursor() as cursor:
        first_run = _insert_runs(cursor, recipes, versions)
        _insert_events(cursor, first_run)
        _insert_tasks(cursor, first_run, [groups[n].pk for n in ("editors", "legal", "support")])
        _give_rare_tasks(cursor, first_run, groups["auditors"].pk)
    middle = Run.objects.get(pk=first_run + RUNS // 2)
    task = HumanTask.objects.filter(status=TaskStatus.OPEN, run__gte=middle).order_by("pk")[0]
    return Scale(
        users=users,
        recipes={
            "owner": recipes[1].slug,
            "sharee": recipes[0].slug,
            "member": recipes[RECIPES // 2].slug,
            "loner": recipes[-1].slug,
            "rare": recipes[-1].slug,
        },
        run_key=(middle.created_at, middle.pk),
        task_key=(task.created_at, task.pk),
        run_id=middle.pk,
    )


def _insert_runs(cursor: Any, recipes: list[Recipe], versions: list[RecipeVersion]) -> int:
    """Insert the runs, oldest first (ids and creation times rise together); return the first id."""
    cursor.execute(
        """
        INSERT INTO runner_run (
            recipe_id, version_id, created_by_id, inputs, status, outcome, error, state, next,
            next_seq, calls, tokens_in, tokens_out, model_calls, cost, lease_token, claims,
            event_seq, created_at, started_at, finished_at
        )
        SELECT
            (%(recipes)s::bigint[])[pick.i], (%(versions)s::bigint[])[pick.i],
            (%(owners)s::int[])[pick.i],
            jsonb_build_object('topic', 'a lighthouse keeper, story ' || g), st.status,
            st.outcome, '', %(state)s::jsonb, '{}'::jsonb, 11, '{"writer": 3}'::jsonb,
            1200, 800, 4, 0.0021, '', 0, %(events)s, at.t, at.t + interval '1 second',
            CASE WHEN st.status IN ('succeeded', 'failed', 'cancelled')
                THEN at.t + interval '20 seconds' END
        FROM generate_series(1, %(runs)s) AS g
        CROSS JOIN LATERAL (
            SELECT CASE WHEN g %% %(rare_every)s = %(rare_every)s / 2 + 37
                THEN %(recipe_count)s + 1 ELSE (g / 100) %% %(recipe_count)s + 1 END AS i
        ) AS pick
        CROSS JOIN LATERAL (
            SELECT (%(statuses)s::text[])[g %% 100 + 1] AS status,
                   (%(outcomes)s::text[])[g %% 100 + 1] AS outcome
        ) AS st
        CROSS JOIN LATERAL (SELECT %(start)s + g * interval '30 seconds' AS t) AS at
        ORDER BY g
        RETURNING id
        """,
        {
            "recipes": [r.pk for r in recipes],
            "versions": [v.pk for v in versions],
            "owners": [r.owner_id for r in recipes],
            "statuses": [str(s) for s in STATUS_CYCLE],
            "outcomes": [OUTCOMES.get(s, "") for s in STATUS_CYCLE],
            "state": json.dumps(STATE),
            "events": EVENTS_PER_RUN,
            "runs": RUNS,
            "rare_every": RARE_EVERY,
            "recipe_count": RECIPES,
            "start": START,
        },
    )
    return min(row[0] for row in cursor.fetchall())


def _insert_events(cursor: Any, first_run: int) -> None:
    cursor.execute(
        """
        INSERT INTO runner_runevent (run_id, seq, type, data, at)
        SELECT r.id, e.seq, (%(types)s::text[])[e.seq], jsonb_build_object('seq', e.seq),
               r.created_at + e.seq * interval '1 second'
        FROM runner_run AS r CROSS JOIN generate_series(1, %(per_run)s) AS e(seq)
        WHERE r.id >= %(first)s
        ORDER BY r.id, e.seq
        """,
        {"types": EVENT_TYPES, "per_run": EVENTS_PER_RUN, "first": first_run},
    )


def _insert_tasks(cursor: Any, first_run: int, group_ids: list[int]) -> None:
    """Give each waiting run an open task and some finished ones a decided task, each with
    its human step; the tasks go round the reviewer groups in blocks of ten."""
    cursor.execute(
        """
        INSERT INTO runner_steprun (
            run_id, seq, attempt, step_key, step_name, kind, actor_alias, actor_name, status,
            prompt, response, decision, error, details, model_calls, started_at, finished_at
        )
        SELECT r.id, 3, 1, 'review', 'Review', 'human', 'editors', '',
               CASE WHEN r.status = 'waiting_human' THEN 'waiting_human' ELSE 'decided' END,
               '', '', CASE WHEN r.status = 'waiting_human' THEN '' ELSE 'approve' END, '',
               '{}'::jsonb, 0, r.started_at + interval '5 seconds', r.finished_at
        FROM runner_run AS r
        WHERE r.id >= %(first)s
          AND (r.status = 'waiting_human' OR (r.id - %(first)s + 1) %% 100 BETWEEN %(lo)s AND %(hi)s)
        ORDER BY r.id
        """,
        {"first": first_run, "lo": DECIDED.start, "hi": DECIDED.stop - 1},
    )
    cursor.execute(
        """
        INSERT INTO runner_humantask (
            run_id, step_run_id, step_key, group_id, question, material, options, status,
            decision, comment, decided_at, created_at
        )
        SELECT s.run_id, s.id, 'review', (%(groups)s::int[])[(s.run_id / 10) %% 3 + 1],
               'Publish this story?', 'Once upon a time a lighthouse keeper found a map.',
               '["approve", "reject", "revise"]'::jsonb,
               CASE WHEN s.status = 'waiting_human' THEN 'open' ELSE 'decided' END,
               s.decision, '', s.finished_at, s.started_at
        FROM runner_steprun AS s
        WHERE s.run_id >= %(first)s
        ORDER BY s.run_id
        """,
        {"first": first_run, "groups": group_ids},
    )


def _give_rare_tasks(cursor: Any, first_run: int, group_id: int) -> None:
    """Move one open task in a thousand to the auditors: a group with 10 open tasks."""
    cursor.execute(
        """
        UPDATE runner_humantask SET group_id = %(group)s
        WHERE status = 'open' AND run_id >= %(first)s AND (run_id - %(first)s) %% 10000 = 4
        """,
        {"group": group_id, "first": first_run},
    )


def _clean_up() -> None:
    with connection.cursor() as cursor:
        # CASCADE: the tables that point at runs (recipe tests) are empty between tests too.
        cursor.execute(
            "TRUNCATE runner_humantask, runner_steprun, runner_runevent, runner_run CASCADE"
        )
    RecipeVersion.objects.filter(recipe__slug__startswith="scale-").delete()
    Recipe.objects.filter(slug__startswith="scale-").delete()
    Group.objects.filter(name__startswith="scale-").delete()
    get_user_model().objects.filter(username__startswith="scale-").delete()


# --- EXPLAIN -----------------------------------------------------------------------------------


def explain(sql: str) -> dict[str, Any]:
    """Run `sql` under EXPLAIN ANALYZE; return its plan and execution time."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (found,) = cursor.fetchone()
    plans = json.loads(found) if isinstance(found, str) else found
    return plans[0]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Walk the plan tree, subplans included."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def scans(plan: dict[str, Any]) -> list[str]:
    """Say how each big table is read: `Index Scan Backward using idx on table (N rows read)`."""
    found = []
    for node in nodes(plan):
        table = node.get("Relation Name")
        if table not in BIG_TABLES:
            continue
        backward = " Backward" if node.get("Scan Direction") == "Backward" else ""
        # A bitmap heap scan's indexes are its children's.
        indexes = [n["Index Name"] for n in nodes(node) if "Index Name" in n]
        using = f" using {' + '.join(indexes)}" if indexes else ""
        # Figures per loop: the rows it returned, and those it read and dropped.
        loops = node.get("Actual Loops", 1)
        read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
        found.append(f"{node['Node Type']}{backward}{using} on {table} ({read:,.0f} rows read)")
    return found


def assert_no_seq_scan(name: str, sql: str) -> None:
    """EXPLAIN the query; fail, with the plan, if it reads a big table sequentially."""
    explained = explain(sql)
    plan = explained["Plan"]
    read = scans(plan)
    print(f"{name}: {'; '.join(read) or 'no big table'}, {explained['Execution Time']:.2f} ms")
    sequential = [scan for scan in read if scan.startswith("Seq Scan")]
    assert not sequential, (
        f"{name} reads a big table sequentially ({', '.join(sequential)}):\n{sql}\n"
        + json.dumps(plan, indent=1)
    )


def assert_reads_by_index(name: str, call: Callable[[], Any]) -> Any:
    """Run `call`; EXPLAIN each query it sent that reads a big table; return what it returned."""
    with CaptureQueriesContext(connection) as queries:
        result = call()
    found = [q["sql"] for q in queries.captured_queries if _reads_big_table(q["sql"])]
    assert found, f"{name} read none of the big tables"
    for i, sql in enumerate(found, start=1):
        assert_no_seq_scan(f"{name} [{i}]", sql)
    return result


def _reads_big_table(sql: str) -> bool:
    return sql.lstrip().upper().startswith("SELECT") and any(
        f'"{table}"' in sql for table in BIG_TABLES
    )


def _sync(consumer: type, name: str) -> Callable[..., Any]:
    """Return the function a consumer's `database_sync_to_async` method runs in a thread."""
    return vars(consumer)[name].func


def _get(client: Client, url: str, **params: Any) -> Any:
    response = client.get(f"{url}?{urlencode(params)}" if params else url)
    assert response.status_code == 200, response.content[:500]
    return response


# --- the runs lists: the API and the runs page ---------------------------------------------------

VIEWERS = ("staff", "owner", "sharee", "member", "loner")
# The lists' filters: status, and a recipe (one the viewer sees, or the rare one).
RUN_FILTERS = {
    "all": {},
    "failed": {"status": RunStatus.FAILED},
    "queued": {"status": RunStatus.QUEUED},  # 1% of the runs
    "recipe": {"recipe": "theirs"},
    "recipe-failed": {"recipe": "theirs", "status": RunStatus.FAILED},
    "rare-recipe": {"recipe": "rare"},  # 50 runs
}


def _run_filters(scale: Scale, viewer: str, filters: str) -> dict[str, str]:
    chosen = dict(RUN_FILTERS[filters])
    if chosen.get("recipe") == "theirs":
        chosen["recipe"] = scale.recipes.get(viewer, scale.recipes["owner"])
    elif chosen.get("recipe") == "rare":
        chosen["recipe"] = scale.recipes["rare"]
    return chosen


def _run_cursor(scale: Scale) -> str:
    return Keyset(Run.objects.all()).cursor(scale.run_key)


@pytest.mark.parametrize("filters", list(RUN_FILTERS))
@pytest.mark.parametrize("viewer", VIEWERS)
def test_the_runs_api_reads_runs_by_index(scale: Scale, viewer: str, filters: str) -> None:
    api = APIClient()
    api.force_authenticate(scale.users[viewer])
    url = reverse("run-list")
    params = _run_filters(scale, viewer, filters)

    name = f"GET /api/runs/ {viewer} {filters}"
    assert_reads_by_index(name, lambda: _get(api, url, **params))
    cursor = _run_cursor(scale)
    assert_reads_by_index(f"{name}, later", lambda: _get(api, url, **params, cursor=cursor))


@pytest.mark.parametrize("filters", list(RUN_FILTERS))
@pytest.mark.parametrize("viewer", VIEWERS)
def test_the_runs_page_reads_runs_by_index(scale: Scale, viewer: str, filters: str) -> None:
    client = Client()
    client.force_login(scale.users[viewer])
    url = reverse("runs-page")
    params = _run_filters(scale, viewer, filters)

    name = f"GET /runs/ {viewer} {filters}"
    assert_reads_by_index(name, lambda: _get(client, url, **params))
    cursor = _run_cursor(scale)
    assert_reads_by_index(f"{name}, later", lambda: _get(client, url, **params, cursor=cursor))


# --- the open tasks: the API, the inbox, /ws/reviews/ ----------------------------------------------

# A third of the open tasks, two thirds, and a group of 10.
REVIEWERS = ("reviewer", "busy_reviewer", "auditor")


def _task_cursor(scale: Scale) -> str:
    return Keyset(HumanTask.objects.order_by("created_at", "pk")).cursor(scale.task_key)


@pytest.mark.parametrize("reviewer", REVIEWERS)
def test_the_tasks_api_and_the_inbox_read_open_tasks_by_index(scale: Scale, reviewer: str) -> None:
    api = APIClient()
    api.force_authenticate(scale.users[reviewer])
    client = Client()
    client.force_login(scale.users[reviewer])
    cursor = _task_cursor(scale)

    # With their counts: the API's X-Total-Count, the inbox's count.
    _assert_list_reads_by_index(f"GET /api/tasks/ {reviewer}", api, reverse("task-list"), cursor)
    _assert_list_reads_by_index(f"GET /inbox/ {reviewer}", client, reverse("inbox"), cursor)


def _assert_list_reads_by_index(
    name: str, session: Client, url: str, cursor: str, **params: str
) -> None:
    """Check a list's first page and the page after `cursor`."""
    assert_reads_by_index(name, lambda: _get(session, url, **params))
    assert_reads_by_index(f"{name}, later", lambda: _get(session, url, **params, cursor=cursor))


# The review queue's views (runner/review_queue.py), as the busy reviewer of two groups sees them.
TASK_VIEWS = {
    "group": {"group": "scale-legal"},
    "recipe": {"recipe": "theirs"},
    "rare-recipe": {"recipe": "rare"},
    "due-soon": {"due": "soon"},
    "newest": {"sort": "newest"},
    "soonest-due": {"sort": "due"},
    "search": {"q": "map"},
}


@pytest.mark.parametrize("view", list(TASK_VIEWS))
def test_the_review_queues_views_read_open_tasks_by_index(scale: Scale, view: str) -> None:
    reviewer = scale.users["busy_reviewer"]
    api = APIClient()
    api.force_authenticate(reviewer)
    client = Client()
    client.force_login(reviewer)
    params = dict(TASK_VIEWS[view])
    if "recipe" in params:
        params["recipe"] = scale.recipes["rare" if params["recipe"] == "rare" else "owner"]
    cursor = _task_cursor(scale)

    name = f"{view} busy_reviewer"
    _assert_list_reads_by_index(
        f"GET /api/tasks/ {name}", api, reverse("task-list"), cursor, **params
    )
    _assert_list_reads_by_index(f"GET /inbox/ {name}", client, reverse("inbox"), cursor, **params)


@pytest.mark.parametrize("reviewer", REVIEWERS)
def test_the_reviews_socket_reads_open_tasks_by_index(scale: Scale, reviewer: str) -> None:
    user = scale.users[reviewer]
    group_ids = set(user.groups.values_list("pk", flat=True))
    consumer = SimpleNamespace(group_ids=group_ids)

    # The first message (the count and the first page), and the catch-up's fingerprints.
    assert_reads_by_index(
        f"/ws/reviews/ snapshot {reviewer}",
        lambda: _sync(consumers.ReviewsConsumer, "_snapshot")(consumer, user),
    )
    assert_reads_by_index(
        f"/ws/reviews/ catch-up {reviewer}",
        lambda: consumers._read_fingerprints(sorted(group_ids)),
    )


# --- a run's events: the API, the monitor's socket and page ----------------------------------------


def test_a_runs_events_are_read_by_index(scale: Scale) -> None:
    api = APIClient()
    api.force_authenticate(scale.users["owner"])
    run = Run.objects.get(pk=scale.run_id)
    url = reverse("run-events", args=[run.pk])
    monitor = SimpleNamespace(run_id=run.pk)
    fetch_events = _sync(consumers.RunEventsConsumer, "fetch_events")
    fetch_between = _sync(consumers.RunEventsConsumer, "fetch_between")

    assert_reads_by_index("GET /api/runs/{id}/events", lambda: _get(api, url))
    assert_reads_by_index("GET /api/runs/{id}/events, later", lambda: _get(api, url, after=5))
    replayed = assert_reads_by_index(
        "/ws/runs/{id}/ replay", lambda: fetch_events(monitor, 0, consumers.REPLAY_BATCH)
    )
    assert_reads_by_index("/ws/runs/{id}/ gap", lambda: fetch_between(monitor, 3, 7))
    # The monitor page's running step: its last `step.started`.
    assert_reads_by_index("/runs/{id}/ running step", lambda: run_pages._running_step(run, []))

    assert len(replayed) == EVENTS_PER_RUN


def test_the_sockets_checks_and_catch_up_read_runs_by_index(scale: Scale) -> None:
    owner = scale.users["owner"]
    run_ids = [scale.run_id + i for i in range(100)]
    monitor = SimpleNamespace(run_id=scale.run_id)
    run_list = SimpleNamespace(scope={"user": owner})

    assert_reads_by_index(
        "/ws/runs/{id}/ may see",
        lambda: _sync(consumers.RunEventsConsumer, "_may_see_run")(monitor, owner),
    )
    assert_reads_by_index(
        "/ws/runs/ watch",
        lambda: _sync(consumers.RunListConsumer, "_active_visible")(run_list, run_ids),
    )
    assert_reads_by_index("catch-up monitors", lambda: consumers._latest_event_seqs.func(run_ids))
    assert_reads_by_index("catch-up run lists", lambda: consumers._run_statuses.func(run_ids))


# --- /metrics --------------------------------------------------------------------------------------


def test_the_metrics_read_runs_and_tasks_by_index(scale: Scale) -> None:
    # Runs by status, the queue, open tasks by group (the rest read steps and model calls).
    families = assert_reads_by_index("/metrics", lambda: list(DatabaseCollector().collect()))

    open_tasks = next(f for f in families if f.name == "branchline_human_tasks_open")
    assert sum(sample.value for sample in open_tasks.samples) == RUNS // 10
