"""The Triggers tab's Webhooks section: each hook's address, the variable that holds its secret
and whether it is set (never the secret), its latest deliveries with their runs, and a curl
example that signs with the standardwebhooks library; only for those who may edit the recipe."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client

from tests.editor.conftest import story_document
from tests.triggers.hooks import PLAIN_ENV, SECRET, SECRET_ENV, own_rate_counters, signed
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

__all__ = ["own_rate_counters"]

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("own_rate_counters")]

HOOKS = [
    {"name": "ticket", "secret_env": SECRET_ENV, "inputs": {"topic": "issue.title"}},
    {"name": "plain", "secret_env": PLAIN_ENV},
]
TAB = "/recipes/hooked-story/triggers/"


@pytest.fixture
def hooked(author: Any, story_actors: None) -> Recipe:
    document = story_document(slug="hooked-story", webhooks=HOOKS)
    recipe = recipe_import(user=author, data=document).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def test_it_shows_each_hook_with_where_its_secret_is_kept(
    web: Client, hooked: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.delenv(PLAIN_ENV, raising=False)

    page = html.unescape(web.get(TAB).content.decode())

    assert "http://testserver/api/hooks/hooked-story/ticket" in page
    assert "http://testserver/api/hooks/hooked-story/plain" in page
    assert SECRET_ENV in page and PLAIN_ENV in page
    assert "set on this server" in page and "not set on this server" in page
    assert SECRET not in page  # the secret itself is never shown
    assert "issue.title" in page
    assert f'os.environ["{SECRET_ENV}"]' in page  # the curl example reads it from there
    assert 'BODY=\'{"issue": {"title": "example"}}\'' in page
    assert page.count("None yet.") == 2


def test_it_lists_the_latest_deliveries_with_their_runs(
    web: Client, hooked: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    hook = "/api/hooks/hooked-story/ticket"
    deliveries = [
        signed({"issue": {"title": "a lighthouse"}}, msg_id="msg_1"),
        signed({"issue": {}}, msg_id="msg_2"),
    ]
    answers = [
        Client().post(hook, body, content_type="application/json", headers=headers)
        for body, headers in deliveries
    ]
    run_id = answers[0].json()["run"]

    page = web.get(TAB).content.decode()

    assert f'href="/runs/{run_id}/"' in page
    assert "201 accepted" in page
    assert "422 refused" in page and "inputs.topic: required" in page


def test_it_is_only_for_those_who_may_edit_the_recipe(hooked: Recipe, stranger_web: Client) -> None:
    assert stranger_web.get(TAB).status_code == 404
    anonymous = Client().get(TAB)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


def test_a_recipe_without_hooks_says_so(web: Client, published: Recipe) -> None:
    page = web.get(f"/recipes/{published.slug}/triggers/").content.decode()
    assert "Webhooks" in page and "None. A recipe's <code>webhooks</code>" in page
