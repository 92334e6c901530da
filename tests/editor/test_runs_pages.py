"""The run pages: the Run form, the run list, the monitor and its partials, Cancel."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from runner.advance import advance
from runner.models import HumanTask, Run
from runner.services import run_start
from runner.status import RunStatus, TaskStatus
from tests.editor.conftest import STORY, story_document
from tests.factories import UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish


@pytest.fixture
def reviewer(reviewers: Group, published: Recipe) -> Any:
    published.shared_with_groups.add(reviewers)
    user = UserFactory(username="rita")
    user.groups.add(reviewers)
    return user


def run_until_it_rests(run: Run) -> Run:
    """Execute the run's steps here, until it waits for a reviewer or finishes."""
    advance(run.pk, time_slice=60)
    run.refresh_from_db()
    return run


def start(user: Any, recipe: Recipe, **script: Any) -> Run:
    run = run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, script=script or None)
    return run_until_it_rests(run)


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=True)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "url",
    ["/runs/", "/runs/1/", "/runs/1/header/", "/runs/1/steps/1/", "/recipes/story/run/", "/inbox/"],
)
def test_every_page_needs_a_login(db: None, url: str) -> None:
    response = Client().get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


# --- the Run form --------------------------------------------------------------------------


def test_the_run_form_asks_for_each_input_and_offers_scripted_answers_per_actor(
    web: Client, published: Recipe
) -> None:
    response = web.get("/recipes/story/run/")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="input_topic"' in html
    for alias in ("writer", "judge", "editors"):
        assert f'name="script_{alias}"' in html


def test_the_run_form_shows_each_input_default_filled_in(author: Any, story_actors: None) -> None:
    inputs = {
        "topic": {"type": "string", "default": "owls at dusk"},
        "words": {"type": "integer", "default": 300},
        "tags": {"type": "array", "default": ["night", "birds"]},
        "draft": {"type": "boolean", "default": True},
        "tone": {"type": "string"},
    }
    recipe = recipe_import(user=author, data=story_document(inputs=inputs)).recipe
    recipe_publish(recipe=recipe, user=author)

    html = client_for(author).get("/recipes/story/run/").content.decode()

    assert re.search(r'<textarea name="input_topic"[^>]*>\s*owls at dusk</textarea>', html)
    assert re.search(r'<input type="number" name="input_words" value="300"', html)
    assert re.search(r'name="input_tags"[^>]*>\s*\[&quot;night&quot;, &quot;birds&quot;\]<', html)
    assert re.search(r'<input type="checkbox" name="input_draft"[^>]*checked', html)
    assert re.search(r'<textarea name="input_tone"[^>]*>\s*</textarea>', html)


def test_it_starts_a_dry_run_and_opens_its_monitor(web: Client, published: Recipe) -> None:
    response = web.post(
        "/recipes/story/run/",
        {
            "input_topic": "owls",
            "script_writer": "First story\n---\nSecond story",
            "script_judge": "",
        },
    )

    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.inputs == {"topic": "owls"}
    assert run.script == {"writer": ["First story", "Second story"]}


def test_it_starts_a_run_with_the_actors_when_no_answer_is_scripted(
    web: Client, published: Recipe
) -> None:
    web.post("/recipes/story/run/", {"input_topic": "owls"})

    assert Run.objects.get().script is None


def test_a_missing_input_is_shown_on_its_field(web: Client, published: Recipe) -> None:
    response = web.post("/recipes/story/run/", {"input_topic": ""})

    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
    assert not Run.objects.exists()


def test_a_script_for_an_unknown_alias_cannot_be_posted(web: Client, published: Recipe) -> None:
    response = web.post("/recipes/story/run/", {"input_topic": "owls", "script_ghost": "boo"})

    assert response.status_code == 302  # unknown fields are not part of the form: ignored
    assert Run.objects.get().script is None


def test_a_recipe_never_published_cannot_run(web: Client, story: Recipe) -> None:
    response = web.get("/recipes/story/run/")

    assert response.status_code == 409
    assert "no published version yet" in response.content.decode()


def test_a_recipe_the_user_may_not_see_does_not_exist(
    stranger_web: Client, published: Recipe
) -> None:
    assert stranger_web.get("/recipes/story/run/").status_code == 404


# --- the monitor -----------------------------------------------------------------------------


def test_the_monitor_shows_each_step_with_its_evaluations_and_the_open_task(
    author: Any, published: Recipe, reviewer: Any
) -> None:
    run = start(author, published, judge=["5"])

    html = client_for(reviewer).get(f"/runs/{run.pk}/").content.decode()

    assert run.status == RunStatus.WAITING_HUMAN
    assert 'id="step-1"' in html and 'id="step-2"' in html
    assert "Write a story about owls" in html
    assert "judge scored 5" in html  # the reason the `great` branch lost
    assert '<span class="badge taken">taken</span>' in html
    assert "Waiting for a reviewer" in html
    assert "Decide in your inbox" in html  # rita is one of the reviewers
    assert f'"after": {run.event_seq}' in html


def test_the_monitor_shows_a_finished_run_with_its_outcome(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, editors=["revise: more owls"], judge=["5"])

    html = web.get(f"/runs/{run.pk}/").content.decode()

    assert run.status == RunStatus.SUCCEEDED
    assert "The dry-run script</strong> chose <strong" in html
    assert "more owls" in html
    assert "Cancel run" not in html
    # The graph's labels are drawn from the engine's catalog, as on the editor's canvas.
    assert '<script id="branchline-catalog" type="application/json">' in html


def test_model_output_is_escaped_everywhere_it_is_shown(
    web: Client, author: Any, published: Recipe, reviewer: Any
) -> None:
    evil = "<script>alert('owl')</script> <img src=x onload=alert(1)> " + STORY
    run = start(author, published, writer=[evil], judge=["5"])
    assert run.status == RunStatus.WAITING_HUMAN

    pages = [
        web.get(f"/runs/{run.pk}/"),
        web.get(f"/runs/{run.pk}/steps/1/"),
        client_for(reviewer).get("/inbox/"),
    ]

    for page in pages:
        html = page.content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#x27;owl&#x27;)&lt;/script&gt;" in html


def test_a_user_who_may_not_see_the_run_gets_404_on_every_part_of_it(
    stranger_web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, judge=["5"])

    for url in (
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/header/",
        f"/runs/{run.pk}/steps/1/",
    ):
        assert stranger_web.get(url).status_code == 404
    assert stranger_web.post(f"/runs/{run.pk}/cancel/").status_code == 404


def test_the_step_card_and_the_header_render_alone_for_the_page_to_swap_in(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, judge=["5"])

    card = web.get(f"/runs/{run.pk}/steps/1/", HTTP_HX_REQUEST="true").content.decode()
    header = web.get(f"/runs/{run.pk}/header/", HTTP_HX_REQUEST="true").content.decode()

    assert card.lstrip().startswith('<article class="step-card')
    assert 'data-step="write"' in card
    assert header.lstrip().startswith('<section id="run-header"')
    assert "Waiting Human" in header
    assert web.get(f"/runs/{run.pk}/steps/99/").status_code == 404


def test_cancel_stops_the_run_and_closes_its_task(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, judge=["5"])

    first = web.post(f"/runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")
    again = web.post(f"/runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert HumanTask.objects.get(run=run).status == TaskStatus.CANCELLED
    assert "Cancelled" in first.content.decode()
    assert "Cancel run" not in first.content.decode()
    assert "The run has cancelled already." in again.content.decode()


def test_cancel_without_htmx_goes_back_to_the_monitor(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, judge=["5"])

    response = web.post(f"/runs/{run.pk}/cancel/", follow=True)

    assert response.redirect_chain == [(f"/runs/{run.pk}/", 302)]
    assert f"Run {run.pk} was cancelled." in response.content.decode()


# --- the run list ---------------------------------------------------------------------------


def test_the_run_list_filters_by_recipe_and_status(
    web: Client, author: Any, published: Recipe
) -> None:
    waiting = start(author, published, judge=["5"])
    done = start(author, published, judge=["9"])

    everything = web.get("/runs/").content.decode()
    succeeded = web.get("/runs/?status=succeeded").content.decode()
    other_recipe = web.get("/runs/?recipe=nothing-like-it").content.decode()

    assert f'data-run-status="{waiting.pk}"' in everything
    assert f'data-run-status="{done.pk}"' in everything
    assert f'data-run-status="{done.pk}"' in succeeded
    assert f'data-run-status="{waiting.pk}"' not in succeeded
    assert "No runs match these filters" in other_recipe


def test_the_run_list_marks_active_runs_for_live_badges(
    web: Client, author: Any, published: Recipe
) -> None:
    waiting = start(author, published, judge=["5"])
    done = start(author, published, judge=["9"])

    html = web.get("/runs/").content.decode()

    assert f'data-run-status="{waiting.pk}" data-active' in html
    assert f'data-run-status="{done.pk}" data-active' not in html


def test_the_run_list_table_renders_alone_for_htmx(web: Client, published: Recipe) -> None:
    html = web.get("/runs/", HTTP_HX_REQUEST="true").content.decode()

    assert html.lstrip().startswith('<div id="runs-table"')


def test_a_bad_status_filter_shows_every_run(web: Client, author: Any, published: Recipe) -> None:
    run = start(author, published, judge=["9"])

    response = web.get("/runs/?status=bogus&page=x")

    assert response.status_code == 200
    assert f'data-run-status="{run.pk}"' in response.content.decode()


def test_recipes_without_a_slug_goes_to_the_recipe_list(web: Client) -> None:
    response = web.get("/recipes/")

    assert response.status_code == 302
    assert response["Location"] == "/"


@pytest.mark.parametrize(
    ("status", "outcome", "shown"),
    [
        (RunStatus.ENDED, "ended", ""),
        (RunStatus.FAILED, "failed", ""),
        (RunStatus.SUCCEEDED, "approved", "Approved"),
        (RunStatus.SUCCEEDED, "", ""),
    ],
)
def test_a_runs_outcome_is_shown_only_when_it_says_more_than_its_status(
    status: str, outcome: str, shown: str
) -> None:
    assert Run(status=status, outcome=outcome).outcome_beyond_status == shown


def test_the_monitor_of_an_ended_run_says_ended_once(
    web: Client, author: Any, published: Recipe
) -> None:
    run = start(author, published, editors=["reject"], judge=["5"])
    assert (run.status, run.outcome) == (RunStatus.ENDED, "ended")

    html = web.get(f"/runs/{run.pk}/header/").content.decode()

    assert html.count("Ended") == 1
    assert "data-run-outcome" not in html
