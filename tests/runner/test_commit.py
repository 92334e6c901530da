"""The run store: a claim and a step's commit, fenced by the lease and the step's seq, one UPDATE
of the run, in order (through the ORM on SQLite, in one statement on PostgreSQL)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runner import events, services, store
from runner.advance import commit
from runner.models import BranchEvaluation, HumanTask, Run, RunEvent, StepRun
from runner.publisher import publisher
from runner.status import RunStatus, StepStatus
from runner.steps import execute
from tests.factories import REVIEWERS, WRITER, recipe_document
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_publish

# Not transactional: the run's Celery message (sent on commit) never leaves.
pytestmark = pytest.mark.django_db


def step(key: str, target: str) -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "kind": "llm",
        "actor": "writer",
        "prompt": "Write about {topic}",
        "branches": [
            {
                "name": "on",
                "priority": 1,
                "when": {"type": "default"},
                "action": "CONTINUE",
                "target": target,
            }
        ],
    }


@pytest.fixture
def two_steps(user: Any, actors: Any) -> Recipe:
    document = recipe_document(steps=[step("a", "b"), step("b", "@complete")])
    recipe = recipe_import(user=user, data=document).recipe
    recipe_publish(recipe=recipe, user=user)
    return recipe


def started(user: Any, recipe: Recipe) -> Run:
    return services.run_start(user=user, recipe=recipe, inputs={"topic": "lighthouses"})


def event_types(run: Run) -> list[str]:
    return list(run.events.order_by("seq").values_list("type", flat=True))


def test_a_commit_updates_the_run_once_and_claims_the_next_step(
    user: Any, two_steps: Recipe
) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)

    with CaptureQueriesContext(connection) as queries:
        following = commit(claim, outcome, decision, go_on=True)

    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    writes = [s for s in statements if s in ("SELECT", "UPDATE", "INSERT", "WITH")]
    if connection.vendor == "postgresql":
        # fence, StepRun, evaluations, model calls and events in one statement
        assert writes == ["WITH"]
    else:
        # fence (with the run's totals) first, nothing read; then the step's rows
        assert writes == ["UPDATE", "INSERT", "INSERT", "INSERT", "INSERT"]
    assert following is not None
    assert (following.seq, following.attempt, following.token) == (2, 1, claim.token)
    run.refresh_from_db()
    assert (run.next_seq, run.next, run.lease_token, run.claims) == (
        2,
        {"step": "b"},
        claim.token,
        1,
    )
    assert run.event_seq == following.event_seq == run.events.count()
    assert event_types(run)[-4:] == [
        "step.finished",
        "branch.evaluated",
        "branch.taken",
        "step.started",
    ]

    outcome, decision = execute(following)
    assert commit(following, outcome, decision, go_on=True) is None
    run.refresh_from_db()
    assert (run.status, run.lease_token, run.claims, run.next) == (RunStatus.SUCCEEDED, "", 0, {})
    assert list(run.steps.values_list("seq", "step_key", "attempt")) == [(1, "a", 1), (2, "b", 1)]
    assert event_types(run)[-1] == "run.finished"
    assert run.event_seq == run.events.count()


def test_of_two_workers_claiming_a_step_at_once_only_one_takes_it(
    user: Any, two_steps: Recipe, monkeypatch: Any
) -> None:
    run = started(user, two_steps)
    read_by_the_second = store._read(run.pk)  # before the first one's write

    first = store.claim(run.pk)
    monkeypatch.setattr(store, "_read", lambda run_id: read_by_the_second)
    second = store.claim(run.pk)

    assert first is not None and second is None
    run.refresh_from_db()
    assert (run.lease_token, run.claims, run.status) == (first.token, 1, RunStatus.RUNNING)
    assert event_types(run) == ["run.queued", "run.started", "step.started"]
    assert run.event_seq == first.event_seq == 3


def test_a_worker_whose_lease_was_taken_over_commits_nothing(user: Any, two_steps: Recipe) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    Run.objects.filter(pk=run.pk).update(lease_token="another-worker")
    before = Run.objects.values().get(pk=run.pk)

    assert commit(claim, outcome, decision, go_on=True) is None

    assert Run.objects.values().get(pk=run.pk) == before
    assert not StepRun.objects.filter(run=run).exists()
    assert RunEvent.objects.filter(run=run).count() == before["event_seq"]


def test_a_human_step_whose_lease_was_taken_over_opens_no_task(user: Any, actors: Any) -> None:
    ask = {
        "key": "ask",
        "name": "Ask",
        "kind": "human",
        "actor": "editors",
        "prompt": "Is {topic} a good topic?",
        "branches": [
            {
                "name": "any",
                "priority": 1,
                "when": {"type": "default"},
                "action": "CONTINUE",
                "target": "@complete",
            }
        ],
    }
    document = recipe_document(
        actors={"writer": WRITER, "editors": f"@human:{REVIEWERS}"}, steps=[ask]
    )
    recipe = recipe_import(user=user, data=document).recipe
    recipe_publish(recipe=recipe, user=user)
    run = started(user, recipe)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    assert (outcome.status, decision) == (StepStatus.WAITING_HUMAN, None)
    Run.objects.filter(pk=run.pk).update(lease_token="another-worker")
    before = Run.objects.values().get(pk=run.pk)

    assert commit(claim, outcome, decision) is None

    assert Run.objects.values().get(pk=run.pk) == before
    assert not HumanTask.objects.filter(run=run).exists()
    assert not StepRun.objects.filter(run=run).exists()


def test_a_stopped_run_takes_no_step_result(user: Any, two_steps: Recipe) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    services.run_cancel(run=run)

    assert commit(claim, outcome, decision) is None

    run.refresh_from_db()
    assert (run.status, run.next_seq) == (RunStatus.CANCELLED, 1)
    assert not StepRun.objects.filter(run=run).exists()


def test_events_another_writer_added_since_the_claim_are_kept(user: Any, two_steps: Recipe) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    events.record(run := Run.objects.get(pk=run.pk), [events.run_status(RunStatus.RUNNING)])
    run.save(update_fields=["event_seq"])

    following = commit(claim, outcome, decision, go_on=True)

    assert following is not None
    run.refresh_from_db()
    assert list(run.events.values_list("seq", flat=True)) == list(range(1, run.event_seq + 1))
    assert following.event_seq == run.event_seq
    assert "run.status" in event_types(run)
    assert StepRun.objects.filter(run=run).count() == 1


def test_the_pushed_events_are_the_stored_ones(
    user: Any, two_steps: Recipe, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(publisher, "send", lambda group, message: sent.append((group, message)))

    with django_capture_on_commit_callbacks(execute=True):
        commit(claim, outcome, decision, go_on=True)

    pushed = [m["events"] for g, m in sent if g == events.run_group(run.pk)]
    stored = run.events.order_by("seq").filter(seq__gt=claim.event_seq)
    assert pushed[-1] == [events.serialize_event(e) for e in stored]
    step_run = StepRun.objects.get(run=run)
    assert step_run.evaluations.count() == len(decision.evaluations)
    assert step_run.details == outcome.details and step_run.started_at == outcome.started_at


def test_a_step_committed_already_is_refused_and_nothing_is_written(
    user: Any, two_steps: Recipe
) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    # A copy of the step committed by a worker presumed dead (its run's row was not moved).
    StepRun.objects.create(run=run, seq=1, attempt=1, step_key="a", kind="llm", status="failed")
    before = Run.objects.values().get(pk=run.pk)

    assert commit(claim, outcome, decision, go_on=True) is None

    assert Run.objects.values().get(pk=run.pk) == before
    assert list(run.steps.values_list("status", flat=True)) == ["failed"]
    assert not BranchEvaluation.objects.filter(step_run__run=run).exists()
    assert RunEvent.objects.filter(run=run).count() == before["event_seq"]


def prepared_commits() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH fence%%'"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's one-statement commit")
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "pooler-safe"])
def test_the_one_statement_commit_is_prepared_unless_turned_off(
    user: Any, two_steps: Recipe, prepared: bool
) -> None:
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    before = prepared_commits()
    if not prepared:  # DATABASE_PREPARED_STATEMENTS=false
        connection.connection.prepare_threshold = None
    try:
        # A statement is prepared once it has run `prepare_threshold` times (settings).
        for _ in range((threshold or 0) + 1):
            run = started(user, two_steps)
            claim = store.claim(run.pk)
            assert claim is not None
            following = commit(claim, *execute(claim), go_on=True)
            assert following is not None
            assert commit(following, *execute(following)) is None
            run.refresh_from_db()
            assert (run.status, run.steps.count()) == (RunStatus.SUCCEEDED, 2)
    finally:
        connection.connection.prepare_threshold = threshold

    if prepared:
        assert prepared_commits() > before
    else:
        assert prepared_commits() == before


def test_deleting_a_run_deletes_its_steps_evaluations_and_events(
    user: Any, two_steps: Recipe
) -> None:
    run = started(user, two_steps)
    claim = store.claim(run.pk)
    assert claim is not None
    commit(claim, *execute(claim))
    step_run = StepRun.objects.get(run=run)
    assert step_run.evaluations.exists() and run.events.exists()

    Run.objects.filter(pk=run.pk).delete()

    assert not StepRun.objects.filter(pk=step_run.pk).exists()
    assert not BranchEvaluation.objects.filter(step_run_id=step_run.pk).exists()
    assert not RunEvent.objects.filter(run_id=run.pk).exists()


def test_a_claim_refuses_a_run_changed_since_it_was_read(
    user: Any, two_steps: Recipe, monkeypatch: Any
) -> None:
    run = started(user, two_steps)
    stale = store._read(run.pk)
    # Another writer moves the run on without a lease: same token, seq and status.
    moved = Run.objects.get(pk=run.pk)
    events.record(moved, [events.run_status(RunStatus.RUNNING)])
    moved.next = {"step": "b"}
    moved.save(update_fields=["event_seq", "next"])

    monkeypatch.setattr(store, "_read", lambda run_id: stale)
    assert store.claim(run.pk) is None

    run.refresh_from_db()
    assert (run.lease_token, run.claims, run.next) == ("", 0, {"step": "b"})
    assert "step.started" not in event_types(run)


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="a database server that drops the session: SQLite has none",
)
@pytest.mark.django_db(transaction=True)
def test_a_claim_reconnects_when_the_database_dropped_the_connection(
    user: Any, two_steps: Recipe
) -> None:
    run = started(user, two_steps)
    connection.ensure_connection()
    backend = connection.connection.info.backend_pid
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [backend])
    connection.close_if_unusable_or_obsolete()  # what Celery's Django fixup does before a task

    claim = store.claim(run.pk)

    assert claim is not None
    assert connection.connection.info.backend_pid != backend


def test_a_step_lost_too_many_times_fails_the_run_instead_of_running_again(
    user: Any, two_steps: Recipe, settings: Any
) -> None:
    run = started(user, two_steps)
    Run.objects.filter(pk=run.pk).update(claims=settings.RUN_MAX_STEP_CLAIMS, lease_token="gone")

    assert store.claim(run.pk) is None

    run.refresh_from_db()
    assert (run.status, run.outcome, run.next, run.lease_token) == ("failed", "failed", {}, "")
    assert run.error == (
        f"step 'a' was lost {settings.RUN_MAX_STEP_CLAIMS} times: the workers running it "
        "stopped before finishing"
    )
    assert event_types(run)[-1] == "run.finished"
    assert run.event_seq == run.events.count()
    assert not StepRun.objects.filter(run=run).exists()


def test_a_run_whose_version_can_no_longer_be_parsed_fails_with_the_reason(
    user: Any, two_steps: Recipe
) -> None:
    run = started(user, two_steps)
    # Published before a check it now fails: a pattern longer than today's bound.
    document = run.version.document
    document["steps"][0]["branches"][0]["when"] = {
        "type": "pattern_match",
        "operator": "regex_match",
        "value": "a" * 5000,
    }
    RecipeVersion.objects.filter(pk=run.version_id).update(
        document=document, created_at=timezone.now()
    )

    assert store.claim(run.pk) is None

    run.refresh_from_db()
    assert (run.status, run.next, run.lease_token) == ("failed", {}, "")
    assert run.error.startswith("its recipe version can no longer run: ")
    assert "pattern is 5000 characters" in run.error
    assert event_types(run)[-1] == "run.finished"
