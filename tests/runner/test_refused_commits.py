"""A step's result that the database refuses fails the step with the database's reason, at once:
never read as a duplicate, never left for the lease to run out and the step to be taken again.

Each kind of value a text or JSON column refuses is tried on the database the suite runs on (CI
runs it on PostgreSQL and on SQLite); where that database stores the value, the step commits as
usual. Only a second copy of a committed step counts as a duplicate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from runner import services, store
from runner.advance import commit
from runner.claims import Claim, StepOutcome
from runner.models import Run, StepRun
from runner.status import RunStatus, StepStatus
from runner.steps import execute
from tests.factories import WRITER
from tests.runner.recipes import DEFAULT, branch, publish_document
from workflows import engine
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

REFUSED = "the database refused the step's result"


def llm(key: str, *branches: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "kind": "llm",
        "actor": "writer",
        "prompt": "Write about {topic}",
        "branches": list(branches),
    }


@pytest.fixture
def two_steps(user: Any, actors: Any) -> Recipe:
    """`draft` then `polish`; a failed draft goes to `apologise` (an error branch)."""
    failed = {"type": "execution_error", "operator": "equals", "value": True}
    return publish_document(
        user,
        {
            "format": "branchline.recipe/v1",
            "slug": "refusals",
            "name": "Refusals",
            "inputs": {"topic": {"type": "string", "required": True}},
            "actors": {"writer": WRITER},
            "steps": [
                llm(
                    "draft",
                    branch("broken", 1, failed, "apologise"),
                    branch("on", 999, DEFAULT, "polish"),
                ),
                llm("polish", branch("done", 999, DEFAULT, "@complete")),
                llm("apologise", branch("done", 999, DEFAULT, "@end")),
            ],
        },
    )


def claimed(user: Any, recipe: Recipe) -> tuple[Run, Claim, StepOutcome, engine.Decision]:
    run = services.run_start(user=user, recipe=recipe, inputs={"topic": "owls"})
    claim = store.claim(run.pk)
    assert claim is not None
    outcome, decision = execute(claim)
    assert decision is not None
    return run, claim, outcome, decision


def nul_in_text(claim: Claim, outcome: StepOutcome) -> None:
    outcome.response = "owls\x00hoot"


def surrogate_in_text(claim: Claim, outcome: StepOutcome) -> None:
    outcome.response = "owls \ud800 hoot"


def nan_in_details(claim: Claim, outcome: StepOutcome) -> None:
    outcome.details["score"] = float("nan")


def infinity_in_facts(claim: Claim, outcome: StepOutcome) -> None:
    claim.state.facts["total"] = float("inf")


def nul_in_json_text(claim: Claim, outcome: StepOutcome) -> None:
    outcome.details["note"] = "a\x00b"


def too_long_for_its_column(claim: Claim, outcome: StepOutcome) -> None:
    outcome.decision = "approve" * 10  # StepRun.decision is 50 characters at most


# What each database refuses; where it stores the value, the step commits as usual.
KINDS: list[tuple[Callable[[Claim, StepOutcome], None], set[str]]] = [
    (nul_in_text, {"postgresql"}),
    (surrogate_in_text, {"postgresql", "sqlite"}),
    (nan_in_details, {"postgresql", "sqlite"}),
    (infinity_in_facts, {"postgresql", "sqlite"}),
    (nul_in_json_text, {"postgresql"}),
    (too_long_for_its_column, {"postgresql"}),
]


@pytest.mark.parametrize(("spoil", "refused_on"), KINDS, ids=[k[0].__name__ for k in KINDS])
def test_a_result_the_database_refuses_fails_the_step_with_the_reason_and_takes_its_error_branch(
    user: Any,
    two_steps: Recipe,
    spoil: Callable[[Claim, StepOutcome], None],
    refused_on: set[str],
) -> None:
    run, claim, outcome, decision = claimed(user, two_steps)
    spoil(claim, outcome)

    following = commit(claim, outcome, decision, go_on=True)

    draft = StepRun.objects.get(run=run, step_key="draft")
    assert following is not None
    if connection.vendor not in refused_on:
        assert (draft.status, following.step.key) == (StepStatus.SUCCEEDED, "polish")
        return
    assert draft.status == StepStatus.FAILED
    assert draft.error.startswith(REFUSED), draft.error
    assert draft.response == ""
    taken = draft.evaluations.get(taken=True)
    assert (taken.branch, following.step.key) == ("broken", "apologise")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    # The state is the one before the refused step, with the failure recorded in it.
    assert "total" not in run.state["facts"]
    assert run.state["attempts"] == {"draft": 1}


def test_a_failure_that_cannot_be_stored_either_fails_the_run_with_the_reason(
    user: Any, two_steps: Recipe
) -> None:
    run, claim, outcome, decision = claimed(user, two_steps)
    outcome.actor_alias = "\ud800"  # kept by the failed step too: refused again

    assert commit(claim, outcome, decision, go_on=True) is None

    run.refresh_from_db()
    assert (run.status, run.steps.count()) == (RunStatus.FAILED, 0)
    assert run.error.startswith(REFUSED), run.error
    assert run.events.filter(type="run.finished").count() == 1
    assert run.lease_token == ""


def test_a_second_copy_of_a_committed_step_is_a_duplicate_and_changes_nothing(
    user: Any, two_steps: Recipe
) -> None:
    run, claim, outcome, decision = claimed(user, two_steps)
    assert commit(claim, outcome, decision) is None  # the run goes back to the queue
    # As if the commit had been lost on its way back: the same step again, under the lease.
    Run.objects.filter(pk=run.pk).update(
        lease_token=claim.token, next_seq=claim.seq, status=RunStatus.RUNNING
    )
    again, decision = execute(claim)
    assert decision is not None

    assert commit(claim, again, decision) is None

    draft = StepRun.objects.get(run=run, step_key="draft")
    assert draft.status == StepStatus.SUCCEEDED
    assert not StepRun.objects.filter(run=run, error__startswith=REFUSED).exists()
