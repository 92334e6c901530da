"""Resume a stopped run from the step it stopped at; fork a run at one of its steps.

The runs are driven in this process (`advance`), step by step, on the test's database: what
each step did is read back from its StepRuns and its calls to models.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from runner import advance, human, reruns, services, store
from runner.models import ModelCall, Run, StepRun
from runner.status import RunStatus, StepStatus, TaskStatus
from runner.steps.actor_stats import actor_stat_rows
from tests.conftest import api_client
from tests.factories import chain_document
from tests.runner.conftest import STORY
from tests.runner.reruns import (
    answers_asked,
    drive,
    failed_chain,
    make_chain,
    reviewed_story,
    snapshot,
    steps_of,
    taken,
)
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_publish, recipe_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(owner: Any) -> Recipe:
    return make_chain(owner)


# --------------------------------------------------------------------------------------------
# Resume


def test_it_resumes_a_failed_run_from_the_failed_step_only(chain: Recipe, owner: Any) -> None:
    run = failed_chain(chain, owner)
    assert (run.status, run.error) == (
        RunStatus.FAILED,
        "step 's3' failed: the model server is down",
    )
    assert answers_asked(run) == [(1, "writer"), (2, "writer"), (3, "writer")]

    resumed = reruns.run_resume(run=run)

    assert (resumed.status, resumed.next, resumed.next_seq) == (RunStatus.QUEUED, {"step": "s3"}, 4)
    run = drive(run)
    assert (run.status, run.outcome, run.error) == (RunStatus.SUCCEEDED, "completed", "")
    # The earlier steps were not executed again: one more answer, the new attempt of s3's.
    assert answers_asked(run) == [(1, "writer"), (2, "writer"), (3, "writer"), (4, "writer")]
    assert steps_of(run) == [
        (1, "s1", 1, StepStatus.SUCCEEDED),
        (2, "s2", 1, StepStatus.SUCCEEDED),
        (3, "s3", 1, StepStatus.FAILED),
        (4, "s3", 2, StepStatus.SUCCEEDED),
    ]
    assert run.steps.get(seq=4).response == "part three"
    assert run.steps.get(seq=4).prompt == "Part 3 of a story about owls."
    assert run.calls == {"writer": 4}
    types = list(run.events.order_by("seq").values_list("type", flat=True))
    finished = types.index("run.finished")
    assert types[finished + 1 : finished + 4] == ["run.queued", "run.started", "step.started"]
    assert types[-1] == "run.finished"
    assert run.event_seq == run.events.count()


def test_it_resumes_the_failed_step_with_another_actor(chain: Recipe, owner: Any) -> None:
    run = failed_chain(chain, owner)

    reruns.run_resume(run=run, actor="backup")
    run = drive(run)

    assert run.status == RunStatus.SUCCEEDED
    again = run.steps.get(seq=4)
    assert (again.step_key, again.attempt, again.actor_alias, again.actor_name) == (
        "s3",
        2,
        "backup",
        "chain-backup",
    )
    assert again.response == "the backup's part"
    assert answers_asked(run)[-1] == (4, "backup")


def chain_v2(chain: Recipe, owner: Any, *, last_prompt: str, steps: int = 3) -> None:
    """Publish version 2 of the chain, whose last step has another prompt."""
    document = chain_document(slug="chain", actor="chain-writer", steps=steps, branches=[])
    document["actors"]["backup"] = "chain-backup"
    document["steps"][-1]["prompt"] = last_prompt
    recipe_update(recipe=chain, document=document)
    recipe_publish(recipe=chain, user=owner)


def test_it_resumes_on_a_newer_version_that_has_the_step(chain: Recipe, owner: Any) -> None:
    run = failed_chain(chain, owner)
    chain_v2(chain, owner, last_prompt="The end of a story about {topic}.")

    reruns.run_resume(run=run, version=2)
    run = drive(run)

    assert (run.status, run.version.number) == (RunStatus.SUCCEEDED, 2)
    assert run.steps.get(seq=3).prompt == "Part 3 of a story about owls."
    assert run.steps.get(seq=4).prompt == "The end of a story about owls."


@pytest.mark.parametrize(
    ("asked", "error"),
    [
        ({"version": 7}, "version: 'chain' has no published version 7"),
        ({"version": 2}, "version: v2 has no step 's3', where run {run} stopped"),
        (
            {"actor": "nobody"},
            "actor: 'nobody' is not a model alias of this recipe (backup, writer)",
        ),
    ],
)
def test_it_says_why_a_resume_cannot_be_done(
    chain: Recipe, owner: Any, asked: dict[str, Any], error: str
) -> None:
    run = failed_chain(chain, owner)
    chain_v2(chain, owner, last_prompt="Part 2 of {topic}.", steps=2)
    before = snapshot(run)

    with pytest.raises(reruns.RerunInvalid) as refused:
        reruns.run_resume(run=run, **asked)

    assert refused.value.errors == [error.format(run=run.pk)]
    assert snapshot(run) == before


def test_it_resumes_only_a_failed_or_cancelled_run(chain: Recipe, owner: Any) -> None:
    run = drive(services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"}))
    assert run.status == RunStatus.SUCCEEDED

    with pytest.raises(reruns.RunNotResumable, match=r"run \d+ is succeeded"):
        reruns.run_resume(run=run)


def test_it_resumes_a_run_cancelled_before_its_next_step(chain: Recipe, owner: Any) -> None:
    run = services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"})
    advance.advance(run.pk, time_slice=0)  # one step, then the run is handed back
    services.run_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, steps_of(run)) == (
        RunStatus.CANCELLED,
        [(1, "s1", 1, StepStatus.SUCCEEDED)],
    )

    reruns.run_resume(run=run)
    run = drive(run)

    assert run.status == RunStatus.SUCCEEDED
    assert [key for _, key, _, _ in steps_of(run)] == ["s1", "s2", "s3"]
    assert answers_asked(run) == [(1, "writer"), (2, "writer"), (3, "writer")]


def test_it_resumes_a_run_cancelled_while_it_waited_for_a_reviewer(
    story_recipe: Recipe, owner: Any, reviewer: Any
) -> None:
    script = {"writer": [STORY], "judge": ["4"]}
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "sea"}, script=script
    )
    run = drive(run)
    assert run.status == RunStatus.WAITING_HUMAN
    services.run_cancel(run=run)
    first_task = run.tasks.get()
    assert first_task.status == TaskStatus.CANCELLED

    reruns.run_resume(run=run)
    run = drive(run)

    # The closed task's step is kept; the new attempt asks the reviewers again, at seq 3.
    assert run.status == RunStatus.WAITING_HUMAN
    assert steps_of(run) == [
        (1, "write", 1, StepStatus.SUCCEEDED),
        (2, "review", 1, StepStatus.WAITING_HUMAN),
        (3, "review", 2, StepStatus.WAITING_HUMAN),
    ]
    task = run.tasks.get(status=TaskStatus.OPEN)
    human.task_decide(task_id=task.pk, user=reviewer, decision="approve")
    run = drive(run)
    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert taken(run) == ["to_review", "approved"]


def test_it_resumes_a_run_whose_workers_kept_dying_on_a_step_at_that_step(
    chain: Recipe, owner: Any, settings: Any
) -> None:
    run = services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"})
    advance.advance(run.pk, time_slice=0)
    claim = store.claim(run.pk)  # a worker takes step 2, then dies holding it: ...
    assert claim is not None and claim.step.key == "s2"
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now(), claims=settings.RUN_MAX_STEP_CLAIMS
    )
    assert store.claim(run.pk) is None  # ... too often: the run fails
    run.refresh_from_db()
    assert (run.status, run.next) == (RunStatus.FAILED, {})

    reruns.run_resume(run=run)
    run = drive(run)

    assert run.status == RunStatus.SUCCEEDED
    assert [key for _, key, _, _ in steps_of(run)] == ["s1", "s2", "s3"]


def test_it_resumes_a_run_cancelled_after_its_reviewer_decided(
    story_recipe: Recipe, owner: Any, reviewer: Any
) -> None:
    script = {"writer": [STORY], "judge": ["4"]}
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "sea"}, script=script
    )
    run = drive(run)
    human.task_decide(task_id=run.tasks.get().pk, user=reviewer, decision="approve")
    services.run_cancel(run=run)  # before a worker took the decision

    reruns.run_resume(run=run)
    run = drive(run)

    # The decision is read as if the run had not stopped: no second task, no new attempt.
    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert steps_of(run) == [
        (1, "write", 1, StepStatus.SUCCEEDED),
        (2, "review", 1, StepStatus.DECIDED),
    ]
    assert run.tasks.count() == 1


def test_it_refuses_a_run_that_used_all_its_steps(chain: Recipe, owner: Any, settings: Any) -> None:
    settings.RUN_MAX_STEPS = 2
    run = drive(services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"}))
    assert (run.status, run.error) == (RunStatus.FAILED, "step limit 2 reached")

    with pytest.raises(reruns.RunNotResumable, match="has used its 2 steps"):
        reruns.run_resume(run=run)


# --------------------------------------------------------------------------------------------
# Fork


def test_a_fork_with_an_edited_answer_takes_the_other_branch_and_leaves_its_parent(
    story_recipe: Recipe, owner: Any
) -> None:
    parent = reviewed_story(story_recipe, owner, "reject")
    assert (parent.status, taken(parent)) == (RunStatus.ENDED, ["to_review", "rejected"])
    before = snapshot(parent)

    fork = reruns.run_fork(user=owner, run=parent, at_seq=2, response="approve: lovely")
    fork = drive(fork)

    assert (fork.parent_id, fork.forked_at_seq) == (parent.pk, 2)
    assert (fork.status, fork.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert taken(fork) == ["to_review", "approved"]
    write, review = fork.steps.order_by("seq")
    # Step 1 is a copy of the parent's, with its evaluations; no model was asked again.
    parent_write = parent.steps.get(seq=1)
    assert (write.response, write.prompt, write.latency_ms) == (
        parent_write.response,
        parent_write.prompt,
        parent_write.latency_ms,
    )
    assert [(e.branch, e.matched, e.taken, e.reason) for e in write.evaluations.all()] == [
        (e.branch, e.matched, e.taken, e.reason) for e in parent_write.evaluations.all()
    ]
    assert not ModelCall.objects.filter(run=fork).exists()
    # Step 2 is recorded with the answer given, not asked of anyone.
    assert (review.step_key, review.status, review.decision, review.response) == (
        "review",
        StepStatus.DECIDED,
        "approve",
        "lovely",
    )
    assert review.details == {"answer_given": True}
    assert review.prompt.startswith("Is this story good? " + STORY[:20])
    assert not fork.tasks.exists()
    assert snapshot(parent) == before


def test_the_steps_a_fork_copied_count_once_in_the_actors_statistics(
    story_recipe: Recipe, owner: Any
) -> None:
    parent = reviewed_story(story_recipe, owner, "reject")
    before = list(actor_stat_rows(run__recipe=story_recipe))

    drive(reruns.run_fork(user=owner, run=parent, at_seq=2, response="approve: lovely"))

    # The fork's copy of the writing step ran in the parent: the learner counts it there only.
    assert list(actor_stat_rows(run__recipe=story_recipe)) == before
    assert StepRun.objects.filter(run__recipe=story_recipe, step_key="write").count() == 2
    assert (
        StepRun.objects.executed().filter(run__recipe=story_recipe, step_key="write").count() == 1
    )


def test_a_fork_rebuilds_the_state_its_next_steps_read(story_recipe: Recipe, owner: Any) -> None:
    parent = reviewed_story(story_recipe, owner, "revise: add a dragon")
    assert [key for _, key, _, _ in steps_of(parent)] == ["write", "review", "revise"]

    fork = drive(reruns.run_fork(user=owner, run=parent, at_seq=3))

    # The revision reads the copied steps' answers, and the script goes on where the parent was.
    revise = fork.steps.get(seq=3)
    assert revise.prompt == parent.steps.get(seq=3).prompt
    assert "Editor says: add a dragon" in revise.prompt
    assert revise.response == "A revised story in which a dragon guards the lighthouse."
    assert fork.calls == parent.calls
    assert (fork.status, fork.outcome) == (parent.status, parent.outcome)
    assert fork.state == parent.state


def test_a_fork_of_the_first_step_copies_nothing_and_may_change_inputs_and_script(
    chain: Recipe, owner: Any
) -> None:
    parent = failed_chain(chain, owner)
    script = {"writer": ["uno", "dos", "tres"]}

    fork = reruns.run_fork(
        user=owner, run=parent, at_seq=1, inputs={"topic": "bats"}, script=script
    )
    fork = drive(fork)

    assert (fork.status, fork.inputs, fork.script) == (
        RunStatus.SUCCEEDED,
        {"topic": "bats"},
        script,
    )
    assert [s.response for s in fork.steps.order_by("seq")] == ["uno", "dos", "tres"]
    assert fork.steps.get(seq=1).prompt == "Part 1 of a story about bats."


def test_a_fork_goes_on_in_its_parents_script_where_the_parent_was(
    chain: Recipe, owner: Any
) -> None:
    parent = failed_chain(chain, owner)

    again = drive(reruns.run_fork(user=owner, run=parent, at_seq=3))
    given = drive(reruns.run_fork(user=owner, run=parent, at_seq=3, response="the end"))

    # The script's third answer fails step 3 again; an answer given instead is not asked for.
    assert (again.status, again.error) == (parent.status, parent.error)
    assert answers_asked(again) == [(3, "writer")]
    assert (given.status, answers_asked(given)) == (RunStatus.SUCCEEDED, [])
    assert [s.response for s in given.steps.order_by("seq")] == ["part one", "part two", "the end"]


def test_a_fork_on_another_version_runs_its_steps_from_the_fork_on(
    chain: Recipe, owner: Any
) -> None:
    parent = failed_chain(chain, owner)
    chain_v2(chain, owner, last_prompt="The end of a story about {topic}.")

    fork = drive(reruns.run_fork(user=owner, run=parent, at_seq=3, version=2, script={}))

    assert (fork.status, fork.version.number, parent.version.number) == (RunStatus.SUCCEEDED, 2, 1)
    assert fork.steps.get(seq=3).prompt == "The end of a story about owls."


@pytest.mark.parametrize(
    ("asked", "error"),
    [
        ({"at_seq": 4}, "at_seq: run {run} has steps 1 to 3"),
        (
            {"at_seq": 2, "response": "maybe"},
            "response: 'maybe' is not an option of step 'review': choose one of approve, reject, revise (`option: comment` adds a comment)",
        ),
        ({"at_seq": 1, "version": 9}, "version: 'story' has no published version 9"),
        ({"at_seq": 1, "inputs": {"topic": 5}}, "inputs.topic: must be a string"),
        ({"at_seq": 1, "inputs": {"mood": "dark"}}, "inputs.mood: not an input of this recipe"),
        (
            {"at_seq": 1, "script": {"writer": []}},
            "script.writer: must be a non-empty list of strings",
        ),
    ],
)
def test_it_says_why_a_fork_cannot_be_made(
    story_recipe: Recipe, owner: Any, asked: dict[str, Any], error: str
) -> None:
    parent = reviewed_story(story_recipe, owner, "revise: add a dragon")
    before = snapshot(parent)

    with pytest.raises(reruns.RerunInvalid) as refused:
        reruns.run_fork(user=owner, run=parent, **asked)

    assert refused.value.errors == [error.format(run=parent.pk)]
    assert Run.objects.count() == 1
    assert snapshot(parent) == before


# --------------------------------------------------------------------------------------------
# API


def test_the_api_resumes_a_failed_run(chain: Recipe, owner: Any) -> None:
    run = failed_chain(chain, owner)

    answer = api_client(owner).post(
        f"/api/runs/{run.pk}/resume", {"actor": "backup"}, format="json"
    )

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["id"], body["status"], body["error"], body["parent"]) == (
        run.pk,
        "queued",
        "",
        None,
    )
    assert [(s["seq"], s["status"]) for s in body["steps"]] == [
        (1, "succeeded"),
        (2, "succeeded"),
        (3, "failed"),
    ]
    run = drive(run)
    assert (run.status, run.steps.get(seq=4).actor_alias) == (RunStatus.SUCCEEDED, "backup")


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"version": 3}, 400, "version: 'chain' has no published version 3"),
        ({"actor": "nobody"}, 400, "actor: 'nobody' is not a model alias"),
        ({"version": "two"}, 400, "version"),
    ],
)
def test_the_api_says_why_it_cannot_resume(
    chain: Recipe, owner: Any, body: dict[str, Any], status: int, error: str
) -> None:
    run = failed_chain(chain, owner)

    answer = api_client(owner).post(f"/api/runs/{run.pk}/resume", body, format="json")

    assert answer.status_code == status, answer.content
    assert error in str(answer.json())
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_the_api_resumes_no_run_that_has_not_stopped(chain: Recipe, owner: Any) -> None:
    run = services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"})

    answer = api_client(owner).post(f"/api/runs/{run.pk}/resume", {}, format="json")

    assert answer.status_code == 409
    assert answer.json()["errors"] == [
        f"Only a failed or cancelled run can be resumed; run {run.pk} is queued."
    ]


def test_the_api_forks_a_run_with_an_edited_answer(story_recipe: Recipe, owner: Any) -> None:
    parent = reviewed_story(story_recipe, owner, "reject")
    before = snapshot(parent)

    answer = api_client(owner).post(
        f"/api/runs/{parent.pk}/fork", {"at_seq": 2, "response": "approve"}, format="json"
    )

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["parent"], body["forked_at_seq"], body["status"]) == (parent.pk, 2, "queued")
    assert [(s["seq"], s["step"], s["response"]) for s in body["steps"]] == [(1, "write", STORY)]
    fork = drive(Run.objects.get(pk=body["id"]))
    assert (fork.status, fork.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert steps_of(fork)[-1][:2] == (2, "review")
    assert api_client(owner).get(f"/api/runs/{fork.pk}/").json()["parent"] == parent.pk
    assert snapshot(parent) == before


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "at_seq"),
        ({"at_seq": 0}, "at_seq"),
        ({"at_seq": 9}, "at_seq: run {run} has steps 1 to 2"),
        ({"at_seq": "2"}, None),
        ({"at_seq": 1, "inputs": ["sea"]}, "inputs"),
        ({"at_seq": 1, "response": 7}, "response"),
        ({"at_seq": 2, "response": "fine"}, "response: 'fine' is not an option of step 'review'"),
        ({"at_seq": 1, "script": "approve"}, "script: must be an object"),
    ],
)
def test_the_api_says_why_it_cannot_fork(
    story_recipe: Recipe, owner: Any, body: dict[str, Any], error: str | None
) -> None:
    parent = reviewed_story(story_recipe, owner, "reject")

    answer = api_client(owner, raise_errors=False).post(
        f"/api/runs/{parent.pk}/fork", body, format="json"
    )

    if error is None:  # a number in a string is read as the number
        assert answer.status_code == 201, answer.content
        return
    assert answer.status_code == 400, answer.content
    assert error.format(run=parent.pk) in str(answer.json())
    assert Run.objects.count() == 1


@pytest.mark.parametrize("action", ["resume", "fork"])
def test_another_users_run_cannot_be_resumed_or_forked(
    chain: Recipe, owner: Any, other_user: Any, action: str
) -> None:
    run = failed_chain(chain, owner)
    before = snapshot(run)

    answer = api_client(other_user).post(
        f"/api/runs/{run.pk}/{action}", {"at_seq": 1}, format="json"
    )

    assert answer.status_code == 404
    assert Run.objects.count() == 1
    assert snapshot(run) == before


def test_a_run_whose_version_no_longer_reads_is_refused_with_the_reason(
    chain: Recipe, owner: Any
) -> None:
    run = failed_chain(chain, owner)
    broken = {**run.version.document, "steps": "not a list"}
    RecipeVersion.objects.filter(pk=run.version_id).update(
        document=broken, created_at=timezone.now()
    )
    run.refresh_from_db()
    before = snapshot(run)

    with pytest.raises(reruns.RerunInvalid) as refused:
        reruns.run_resume(run=run)

    assert refused.value.errors[0].startswith("version: ")
    assert "cannot run" in refused.value.errors[0]
    assert snapshot(run) == before
