"""Dry runs from the pages give a step with sources its hits instead of a search."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runner.models import Run
from tests.editor.conftest import htmx_post, story_document
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

HIT = {"document": "Owl facts", "text": "Owls hunt at night.", "score": 0.8}


@pytest.fixture
def searching(author: Any, story_actors: None) -> Recipe:
    """The story recipe, published, its first step searching a knowledge base first."""
    document = story_document()
    document["steps"][0]["sources"] = [{"knowledge_base": "owl-facts"}]
    recipe = recipe_import(user=author, data=document).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def test_the_run_form_offers_hits_for_each_step_with_sources(
    web: Client, searching: Recipe
) -> None:
    html = web.get("/recipes/story/run/").content.decode()

    assert 'name="script_sources.write"' in html
    assert "Hits of write, JSON (instead of searching)" in html
    assert 'name="script_sources.review"' not in html


def test_it_starts_a_dry_run_with_the_hits_given(web: Client, searching: Recipe) -> None:
    response = web.post(
        "/recipes/story/run/",
        {"input_topic": "owls", "script_sources.write": json.dumps([[HIT], []])},
    )

    assert response.status_code == 302
    assert Run.objects.get().script == {"sources.write": [[{**HIT, "heading": ""}], []]}


@pytest.mark.parametrize(
    ("hits", "message"),
    [
        (
            [[{"document": "Owl facts", "score": 0.8}]],
            "script.sources.write[0][0].text: must be non-empty text",
        ),
        ([], "script.sources.write: must be a non-empty list, per execution, of lists of hits"),
    ],
)
def test_bad_hits_are_shown_on_their_field(
    web: Client, searching: Recipe, hits: object, message: str
) -> None:
    response = web.post(
        "/recipes/story/run/", {"input_topic": "owls", "script_sources.write": json.dumps(hits)}
    )

    assert response.status_code == 400
    assert response.context["script_open"]
    form = response.context["form"]
    assert form.errors["script_sources.write"] == [message]
    assert not Run.objects.exists()


def test_the_editors_test_run_takes_hits_too(web: Client, searching: Recipe) -> None:
    response = htmx_post(
        web,
        reverse("recipe-testrun", args=[searching.slug]),
        None,
        start="1",
        input_topic="owls",
        **{"script_sources.write": json.dumps([[HIT]])},
    )

    run = response.context["run"]
    assert run is not None
    assert run.script == {"sources.write": [[{**HIT, "heading": ""}]]}


def test_a_saved_test_may_give_hits(web: Client, searching: Recipe) -> None:
    data = {
        "name": "finds owls",
        "inputs": '{"topic": "owls"}',
        "script": json.dumps({"writer": ["a"], "sources.write": [[HIT]]}),
        "expected_path": "write",
    }

    htmx_post(web, reverse("recipe-tests", args=[searching.slug]), None, **data)

    assert searching.tests.get().script == {"writer": ["a"], "sources.write": [[HIT]]}


def test_a_saved_test_refuses_hits_that_are_not_lists(web: Client, searching: Recipe) -> None:
    data = {
        "name": "bad",
        "inputs": "{}",
        "script": json.dumps({"sources.write": ["not a list of hits"]}),
        "expected_path": "write",
    }

    response = htmx_post(web, reverse("recipe-tests", args=[searching.slug]), None, **data)

    assert "The script is a JSON object of alias: [answers]" in response.content.decode()
    assert not searching.tests.exists()
