"""`manage.py resume_run` and `manage.py fork_run`: run a run again from the terminal."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from runner import services
from runner.models import Run
from runner.status import RunStatus
from tests.runner.conftest import STORY, wait_for
from tests.runner.reruns import drive, failed_chain, make_chain, reviewed_story
from workflows.models import Recipe


@pytest.fixture
def chain(owner: Any) -> Recipe:
    return make_chain(owner)


@pytest.mark.django_db
def test_it_resumes_a_failed_run_with_another_actor(chain: Recipe, owner: Any) -> None:
    run = failed_chain(chain, owner)
    out = StringIO()

    call_command("resume_run", str(run.pk), "--actor", "backup", stdout=out)

    assert out.getvalue() == f"run {run.pk} of chain v1 queued again at step 's3'\n"
    run = drive(run)
    assert (run.status, run.steps.get(seq=4).actor_alias) == (RunStatus.SUCCEEDED, "backup")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["999"], "no run 999"),
        (
            ["{run}", "--recipe-version", "5"],
            "refused:\n  version: 'chain' has no published version 5",
        ),
    ],
)
def test_resume_explains_what_is_wrong(
    chain: Recipe,
    owner: Any,
    args: list[str],
    message: str,
) -> None:
    run = failed_chain(chain, owner)

    with pytest.raises(CommandError) as refused:
        call_command("resume_run", *[a.format(run=run.pk) for a in args])

    assert str(refused.value) == message
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


@pytest.mark.django_db
def test_resume_refuses_a_run_that_did_not_stop(chain: Recipe, owner: Any) -> None:
    run = drive(services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"}))

    with pytest.raises(CommandError, match="Only a failed or cancelled run can be resumed"):
        call_command("resume_run", str(run.pk))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["999", "--at-seq", "1"], "no run 999"),
        (["{run}", "--at-seq", "5"], "refused:\n  at_seq: run {run} has steps 1 to 2"),
        (
            ["{run}", "--at-seq", "2", "--response", "perhaps"],
            "refused:\n  response: 'perhaps' is not an option of step 'review'",
        ),
        (["{run}", "--at-seq", "1", "--input", "topic"], "--input takes NAME=VALUE"),
        (["{run}", "--at-seq", "1", "--script", "{{"], "--script is not JSON"),
        (["{run}", "--at-seq", "1", "--user", "nobody"], "no user 'nobody'"),
    ],
)
def test_fork_explains_what_is_wrong(
    story_recipe: Recipe, owner: Any, args: list[str], message: str
) -> None:
    parent = reviewed_story(story_recipe, owner, "reject")

    with pytest.raises(CommandError) as refused:
        call_command("fork_run", *[a.format(run=parent.pk) for a in args])

    assert str(refused.value).startswith(message.format(run=parent.pk))
    assert Run.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_forks_a_run_with_an_edited_answer_and_follows_it(
    worker: Any, story_recipe: Recipe, owner: Any
) -> None:
    script = {"writer": [STORY], "judge": ["4"], "editors": ["reject"]}
    parent = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "sea"}, script=script
    )
    parent = wait_for(parent, RunStatus.ENDED)
    out = StringIO()

    call_command(
        "fork_run",
        str(parent.pk),
        "--at-seq",
        "2",
        "--response",
        "approve: a fine story",
        "--wait",
        "--timeout",
        "20",
        stdout=out,
    )

    fork = Run.objects.get(parent=parent)
    printed = out.getvalue()
    assert printed.startswith(
        f"run {fork.pk} of story v1 queued: a fork of run {parent.pk} at step 2\n"
    )
    assert "✔ approved: " in printed
    assert printed.rstrip().endswith("succeeded (approved)")
    assert (fork.forked_at_seq, fork.created_by) == (2, owner)
