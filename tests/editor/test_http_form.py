"""The editor's step panel for http steps: the Request section read and written, the engine's
errors shown on its fields, and the kind in the palette."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.document import DocumentContext
from editor.forms.step import StepForm
from runner.models import Run
from workflows.models import Recipe

from .conftest import draft, htmx_post, story_document
from .test_forms import step_data

pytestmark = pytest.mark.django_db

FETCH = {
    "key": "fetch",
    "name": "Fetch",
    "kind": "http",
    "prompt": "",
    "method": "POST",
    "url": "https://api.example.com/items",
    "headers": {"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API_TOKEN}"},
    "body": {"name": "{topic}"},
    "secret_env": ["BRANCHLINE_SECRET_API_TOKEN"],
    "branches": [],
}


def http_document() -> dict[str, Any]:
    doc = story_document()
    doc["steps"].insert(0, dict(FETCH))
    return doc


def request_data(doc: dict[str, Any], **fields: str) -> Any:
    data = step_data(doc, 0)
    data["http-posted"] = "1"
    data.update(
        {
            "http-method": "POST",
            "http-url": "https://api.example.com/items",
            "http-headers": '{"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API_TOKEN}"}',
            "http-query": "",
            "http-body": '{"name": "{topic}"}',
            "http-secret_env": "BRANCHLINE_SECRET_API_TOKEN",
            "http-retries": "",
        }
    )
    data.update({f"http-{k}": v for k, v in fields.items()})
    return data


def test_the_request_section_writes_the_step_it_was_filled_from(story: Recipe) -> None:
    doc = http_document()
    form = StepForm(request_data(doc), context=DocumentContext(doc), index=0)
    assert form.is_valid(), form.errors
    assert form.result == {k: v for k, v in FETCH.items() if k != "branches"}


def test_a_text_body_query_and_retries_are_written_as_given(story: Recipe) -> None:
    doc = http_document()
    data = request_data(
        doc, body="{steps.write.response}", query='{"q": "{topic}"}', retries="0", method="PUT"
    )
    form = StepForm(data, context=DocumentContext(doc), index=0)
    assert form.is_valid(), form.errors
    assert form.result is not None
    assert form.result["body"] == "{steps.write.response}"
    assert (form.result["query"], form.result["retries"]) == ({"q": "{topic}"}, 0)


def test_the_engines_errors_show_on_the_request_fields(story: Recipe) -> None:
    doc = http_document()
    form = StepForm(
        request_data(doc, url="ftp://x", **{"secret_env": ""}),
        context=DocumentContext(doc),
        index=0,
    )
    assert not form.is_valid()
    assert form.http.errors["url"][0].startswith("must begin with http:// or https://")
    assert (
        "add BRANCHLINE_SECRET_API_TOKEN to the step's secret_env" in form.http.errors["headers"][0]
    )


def test_headers_that_are_not_an_object_are_refused(story: Recipe) -> None:
    doc = http_document()
    form = StepForm(request_data(doc, headers='["x"]'), context=DocumentContext(doc), index=0)
    assert not form.is_valid()
    assert form.http.errors["headers"] == ["Write a JSON object of name: template."]


def test_the_panel_and_palette_offer_the_http_kind(story: Recipe, web: Client) -> None:
    response = htmx_post(
        web, reverse("recipe-step-panel", args=[story.slug]), draft(story), step=0, element="s-0"
    )
    panel = response.content.decode()
    assert '<option value="http">HTTP request</option>' in panel
    assert 'data-kind-only="http" aria-label="Request"' in panel
    assert 'name="http-url"' in panel
    page = web.get(reverse("recipe-editor", args=[story.slug])).content.decode()
    assert 'data-add-step="http"' in page


@pytest.fixture
def fetching(author: Any, story_actors: None) -> Recipe:
    """The story recipe, published, with an http step first."""
    from workflows.services import recipe_import, recipe_publish

    recipe = recipe_import(user=author, data=http_document()).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def test_a_test_run_takes_the_http_steps_answers_from_the_script(
    web: Client, fetching: Recipe
) -> None:
    page = web.get("/recipes/story/run/").content.decode()
    assert 'name="script_http.fetch"' in page

    response = htmx_post(
        web,
        reverse("recipe-testrun", args=[fetching.slug]),
        None,
        start="1",
        input_topic="owls",
        **{"script_http.fetch": '[{"status": 201, "body": {"id": 7}}]'},
    )

    assert response.status_code == 200
    assert response.context["form"].errors == {}
    assert Run.objects.get().script["http.fetch"] == [
        {"status": 201, "body": '{"id": 7}', "headers": {}}
    ]


def test_a_bad_scripted_http_answer_is_shown_on_its_field(web: Client, fetching: Recipe) -> None:
    response = htmx_post(
        web,
        reverse("recipe-testrun", args=[fetching.slug]),
        None,
        start="1",
        input_topic="owls",
        **{"script_http.fetch": '[{"status": 42}]'},
    )

    errors = response.context["form"].errors
    assert errors["script_http.fetch"] == [
        "script.http.fetch[0].status: must be a status from 100 to 599, got 42"
    ]
    assert not Run.objects.exists()
