"""The monitor's Resume button and "Fork from here" forms (htmx POSTs), and what a fork shows."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runner.advance import advance
from runner.models import Run
from runner.services import run_start
from runner.status import RUNNABLE, RunStatus
from tests.editor.conftest import STORY
from workflows.models import Recipe

HTMX = {"HTTP_HX_REQUEST": "true"}
DOWN = "@error: the model server is down"


def drive(run: Run) -> Run:
    """Execute the run's steps here until it stops or waits for a reviewer."""
    for _ in range(20):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance(run.pk, time_slice=60)
    raise AssertionError(f"run {run.pk} did not stop")


def start(user: Any, recipe: Recipe, **script: Any) -> Run:
    return drive(run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, script=script))


def test_a_failed_runs_monitor_offers_resume_and_a_fork_per_step(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, writer=[DOWN])
    assert run.status == RunStatus.FAILED

    html = web.get(f"/runs/{run.pk}/").content.decode()

    assert f'hx-post="/runs/{run.pk}/resume/"' in html
    assert '<button type="submit" title="Run the step it stopped at again' in html
    assert html.count(f'hx-post="/runs/{run.pk}/fork/"') == 1
    assert '<input type="hidden" name="at_seq" value="1">' in html


def test_resume_queues_the_run_again_and_reloads_its_monitor(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, writer=[DOWN, STORY], judge=["9"])

    response = web.post(f"/runs/{run.pk}/resume/", {"version": "", "actor": ""}, **HTMX)

    assert response.status_code == 204
    assert response["HX-Redirect"] == f"/runs/{run.pk}/"
    run = drive(run)
    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")
    assert [s.status for s in run.steps.order_by("seq")] == ["failed", "succeeded"]
    assert "Resume" not in web.get(f"/runs/{run.pk}/").content.decode().split("</section>")[0]


def test_resume_says_why_it_is_refused_in_the_form(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, writer=[DOWN])

    refused = web.post(f"/runs/{run.pk}/resume/", {"actor": "editors"}, **HTMX)
    finished = start(author, published, writer=[STORY], judge=["9"])
    conflict = web.post(f"/runs/{finished.pk}/resume/", {}, **HTMX)

    assert refused.status_code == 400
    assert "actor: &#x27;editors&#x27; is not a model alias" in refused.content.decode()
    assert conflict.status_code == 409
    assert "Only a failed or cancelled run can be resumed" in conflict.content.decode()


def test_a_fork_with_an_edited_answer_opens_the_new_runs_monitor(
    web: Client, author: Any, published: Recipe
) -> None:
    parent = start(author, published, writer=[STORY], judge=["5"], editors=["reject"])
    assert parent.status == RunStatus.ENDED

    response = web.post(
        f"/runs/{parent.pk}/fork/",
        {"at_seq": "2", "mode": "answer", "response": "approve: <b>fine</b>"},
        **HTMX,
    )

    fork = Run.objects.exclude(pk=parent.pk).get()
    assert response.status_code == 204
    assert response["HX-Redirect"] == f"/runs/{fork.pk}/"
    fork = drive(fork)
    assert (fork.status, fork.outcome) == (RunStatus.SUCCEEDED, "approved")
    html = web.get(f"/runs/{fork.pk}/").content.decode()
    assert f'Forked from <a href="/runs/{parent.pk}/">run #{parent.pk}</a> at step 2' in html
    assert f'href="/runs/compare/?a={parent.pk}&amp;b={fork.pk}"' in html
    assert html.count('<span class="badge copied"') == 1
    assert 'Decision <strong class="decision">approve</strong>: the answer given' in html
    assert "&lt;b&gt;fine&lt;/b&gt;" in html and "<b>fine</b>" not in html
    parent_html = web.get(f"/runs/{parent.pk}/").content.decode()
    assert f'<a href="/runs/{fork.pk}/">#{fork.pk}</a> at step 2' in parent_html


def test_a_fork_that_runs_the_step_again_ignores_the_answer_written(
    web: Client, author: Any, published: Recipe
) -> None:
    parent = start(author, published, writer=[STORY], judge=["9"])

    web.post(
        f"/runs/{parent.pk}/fork/", {"at_seq": "1", "mode": "run", "response": "ignored"}, **HTMX
    )

    fork = drive(Run.objects.exclude(pk=parent.pk).get())
    assert fork.steps.get(seq=1).response == STORY


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"at_seq": "7", "mode": "run"}, "at_seq: run {run} has steps 1 to 1"),
        ({"at_seq": "x", "mode": "run"}, "at_seq: Enter a whole number."),
        ({"at_seq": "1", "mode": "guess"}, "mode: Select a valid choice."),
    ],
)
def test_a_fork_says_why_it_is_refused_in_the_form(
    web: Client, author: Any, published: Recipe, fields: dict[str, str], error: str
) -> None:
    parent = start(author, published, writer=[STORY], judge=["9"])

    response = web.post(f"/runs/{parent.pk}/fork/", fields, **HTMX)

    assert response.status_code == 400
    assert error.format(run=parent.pk) in response.content.decode()
    assert Run.objects.count() == 1


def test_without_htmx_the_forms_redirect_with_a_message(
    web: Client, author: Any, published: Recipe
) -> None:
    parent = start(author, published, writer=[DOWN])

    refused = web.post(f"/runs/{parent.pk}/fork/", {"at_seq": "3", "mode": "run"}, follow=True)
    resumed = web.post(f"/runs/{parent.pk}/resume/")

    assert "at_seq: run" in refused.content.decode()
    assert (resumed.status_code, resumed["Location"]) == (302, f"/runs/{parent.pk}/")


@pytest.mark.parametrize("action", ["resume", "fork"])
def test_another_users_run_does_not_exist_here(
    stranger_web: Client, author: Any, published: Recipe, action: str
) -> None:
    run = start(author, published, writer=[DOWN])

    response = stranger_web.post(f"/runs/{run.pk}/{action}/", {"at_seq": "1", "mode": "run"})

    assert response.status_code == 404
    run.refresh_from_db()
    assert (run.status, Run.objects.count()) == (RunStatus.FAILED, 1)
