"""Actors are checked whole wherever they are written (API, admin, seed, import) with the
call-time SSRF guard, never show credentials, and stay while published versions name them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from rest_framework.test import APIClient

from runner.models import Run
from runner.services import run_start
from tests.factories import ActorFactory, admin_form_data, openai_actor, recipe_document
from workflows import services
from workflows.adapters import document_from_recipe
from workflows.admin import ActorForm
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish, recipe_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(user: Any, recipe: Recipe) -> Recipe:
    """The `short-story` recipe (its writer: `scripted-writer`), published once."""
    recipe_publish(recipe=recipe, user=user)
    return recipe


class TestWholeActors:
    @pytest.mark.parametrize(
        ("body", "errors"),
        [
            (
                openai_actor(model=""),
                ["model: an openai actor needs the name of the model to call"],
            ),
            (
                {"name": "x", "provider": "ollama"},
                ["model: an ollama actor needs the name of the model to call"],
            ),
            (
                openai_actor(config={"replies": ["hi"]}),
                ["config: only scripted actors take a config; put model settings in params"],
            ),
            (
                openai_actor(params={"model": "other", "stream": False}),
                ["params: may not set model, stream (the provider sets them)"],
            ),
            (
                openai_actor(params={"temperature": "hot", "max_tokens": 0, "stop": [1]}),
                [
                    "params.temperature: must be a number",
                    "params.stop: must be a text or a list of texts",
                    "params.max_tokens: must be at least 1",
                ],
            ),
            (
                openai_actor(timeout_s=0),
                ["timeout_s: must be a whole number of seconds from 1 to 3600"],
            ),
            (
                openai_actor(timeout_s=86_400),
                ["timeout_s: must be a whole number of seconds from 1 to 3600"],
            ),
            (
                openai_actor(group="editors"),
                ["group: only human actors have a reviewer group"],
            ),
            (
                {"name": "x", "provider": "scripted"},
                ["config: a scripted actor needs replies or rules to answer with"],
            ),
            (
                {"name": "x", "provider": "scripted", "config": {"replies": "hi"}},
                ["config.replies: must be a list of texts"],
            ),
            (
                {"name": "x", "provider": "scripted", "config": {"replies": ["a"], "delay": 5}},
                ["config: unknown key 'delay'; expected replies, rules, delay_ms"],
            ),
            (
                {
                    "name": "x",
                    "provider": "scripted",
                    "config": {"rules": [{"match": "(", "reply": "b"}]},
                },
                ["config.rules[0].match: invalid regex: missing ): ("],
            ),
            (
                {
                    "name": "x",
                    "provider": "scripted",
                    "config": {"rules": [{"match": "a" * 100_000, "reply": "b"}]},
                },
                ["config.rules[0].match: pattern is 100000 characters, at most 2000"],
            ),
            (
                {
                    "name": "x",
                    "provider": "scripted",
                    "base_url": "https://api.example.com/v1",
                    "api_key_env": "KEY",
                    "config": {"replies": ["a"]},
                },
                [
                    "base_url: a scripted actor calls no server; leave it empty",
                    "api_key_env: a scripted actor calls no server; leave it empty",
                ],
            ),
            (
                {
                    "name": "x",
                    "kind": "human",
                    "group": "editors",
                    "provider": "openai",
                    "model": "m",
                },
                [
                    "provider: a human actor calls no model; leave it empty",
                    "model: a human actor calls no model; leave it empty",
                ],
            ),
            ({"name": "x", "kind": "human"}, ["group: a human actor needs a reviewer group"]),
            (
                {"name": "x", "provider": "gemini", "model": "gemini-2.5-flash"},
                [
                    "api_key_env: a gemini actor needs the environment variable that holds its "
                    "API key"
                ],
            ),
            (
                {
                    "name": "x",
                    "provider": "anthropic",
                    "api_key_env": "ANTHROPIC_KEY",
                    "params": {"system": "Be brief.", "seed": 7, "top_k": 5},
                },
                [
                    "model: an anthropic actor needs the name of the model to call",
                    "params: may not set system (the provider sets them)",
                    "params.seed: the anthropic API has no seed",
                ],
            ),
            (
                {
                    "name": "x",
                    "provider": "gemini",
                    "model": "gemini-2.5-flash",
                    "api_key_env": "GEMINI_KEY",
                    "params": {"systemInstruction": "Be brief.", "max_tokens": "many"},
                },
                [
                    "params: may not set systemInstruction (the provider sets them)",
                    "params.max_tokens: must be a whole number",
                ],
            ),
        ],
    )
    def test_the_api_refuses_an_actor_that_cannot_run_with_the_fields_path(
        self, staff_api: APIClient, reviewers: Any, body: dict[str, Any], errors: list[str]
    ) -> None:
        response = staff_api.post("/api/actors/", body, format="json")

        assert response.status_code == 400, response.content
        assert response.json()["errors"] == errors
        assert not Actor.objects.filter(name=body["name"]).exists()

    @pytest.mark.parametrize(
        ("patch", "errors"),
        [
            (
                {"provider": "openai"},
                [
                    "model: an openai actor needs the name of the model to call",
                    "config: only scripted actors take a config; put model settings in params",
                ],
            ),
            (
                {"kind": "human"},
                [
                    "group: a human actor needs a reviewer group",
                    "provider: a human actor calls no model; leave it empty",
                    "config: a human actor calls no model; leave it empty",
                ],
            ),
            ({"config": {}}, ["config: a scripted actor needs replies or rules to answer with"]),
            ({"timeout_s": 0}, ["timeout_s: must be a whole number of seconds from 1 to 3600"]),
        ],
    )
    def test_a_patch_cannot_leave_an_actor_that_cannot_run(
        self, staff_api: APIClient, actors: Any, patch: dict[str, Any], errors: list[str]
    ) -> None:
        response = staff_api.patch(f"/api/actors/{actors.judge.pk}/", patch, format="json")

        assert response.status_code == 400, response.content
        got = response.json()["errors"]
        assert len(got) == len(errors)
        for error, expected in zip(got, errors, strict=True):
            assert error.startswith(expected[:-1]) if expected.endswith("*") else error == expected
        actors.judge.refresh_from_db()
        assert (actors.judge.provider, actors.judge.config) == ("scripted", {"replies": ["9"]})

    @pytest.mark.parametrize(
        "body",
        [
            openai_actor(
                base_url="https://8.8.8.8/v1", params={"temperature": 0.2, "stop": ["\n"]}
            ),
            {
                "name": "x",
                "provider": "scripted",
                "config": {"rules": [{"match": "(?i)hi", "reply": "hello"}]},
            },
            {"name": "x", "kind": "human", "group": "editors"},
            {
                "name": "x",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "api_key_env": "ANTHROPIC_KEY",
                "params": {"max_tokens": 1024, "top_k": 5, "stop": "END"},
            },
            {
                "name": "x",
                "provider": "gemini",
                "model": "gemini-2.5-flash",
                "api_key_env": "GEMINI_KEY",
                "params": {
                    "temperature": 0.2,
                    "seed": 7,
                    "thinking_config": {"thinking_budget": 0},
                },
            },
        ],
    )
    def test_it_accepts_an_actor_that_can_run(
        self, staff_api: APIClient, reviewers: Any, body: dict[str, Any]
    ) -> None:
        response = staff_api.post("/api/actors/", body, format="json")

        assert response.status_code == 201, response.content

    def test_the_admin_refuses_an_actor_that_cannot_run(self, admin_client: Client) -> None:
        form = admin_form_data(Actor(name="x", provider="openai", base_url="http://10.0.0.1/v1"))

        response = admin_client.post("/admin/workflows/actor/add/", form)

        assert response.status_code == 200
        page = response.content.decode()
        assert "refused: 10.0.0.1, a private address" in page
        assert "an openai actor needs the name of the model to call" in page
        assert not Actor.objects.filter(name="x").exists()


class TestActorsInUse:
    def test_an_actor_a_published_version_names_cannot_be_deleted(
        self, staff_api: APIClient, user: Any, published: Recipe, actors: Any
    ) -> None:
        # The draft moves on to another actor; the published version still names the writer.
        recipe_update(
            recipe=published,
            document={**document_from_recipe(published), "actors": {"writer": actors.judge.name}},
        )

        response = staff_api.delete(f"/api/actors/{actors.writer.pk}/")

        assert response.status_code == 409
        assert response.json()["errors"] == [
            "$: actor 'scripted-writer' is used by published versions of: short-story"
        ]
        assert Actor.objects.filter(pk=actors.writer.pk).exists()

    def test_it_names_every_recipe_and_the_drafts(
        self, staff_api: APIClient, user: Any, published: Recipe, actors: Any
    ) -> None:
        for slug in ("b-story", "a-story"):
            recipe_import(user=user, data=recipe_document(slug=slug))

        response = staff_api.delete(f"/api/actors/{actors.writer.pk}/")

        assert response.status_code == 409
        assert response.json()["errors"] == [
            "$: actor 'scripted-writer' is used by published versions of: short-story "
            "and by the drafts of: a-story, b-story, short-story"
        ]

    @pytest.mark.parametrize(
        ("patch", "error"),
        [
            (
                {"name": "renamed-writer"},
                "name: actor 'scripted-writer' is used by published versions of: short-story; "
                "renaming it would break them",
            ),
            (
                {"kind": "human", "provider": "", "config": {}, "group": "editors"},
                "kind: actor 'scripted-writer' is used by published versions of: short-story; "
                "changing its kind would break them",
            ),
        ],
    )
    def test_an_actor_a_published_version_names_keeps_its_name_and_kind(
        self,
        staff_api: APIClient,
        published: Recipe,
        actors: Any,
        patch: dict[str, Any],
        error: str,
    ) -> None:
        response = staff_api.patch(f"/api/actors/{actors.writer.pk}/", patch, format="json")

        assert response.status_code == 409, response.content
        assert response.json()["errors"] == [error]
        actors.writer.refresh_from_db()
        assert (actors.writer.name, actors.writer.kind) == ("scripted-writer", "llm")

    def test_a_live_run_keeps_its_actor(
        self, staff_api: APIClient, user: Any, published: Recipe, actors: Any
    ) -> None:
        # A run pins a published version, so the versions' names cover the runs.
        run = run_start(user=user, recipe=published, inputs={"topic": "owls"})
        assert Run.objects.get(pk=run.pk).status == "queued"

        response = staff_api.patch(
            f"/api/actors/{actors.writer.pk}/", {"name": "renamed"}, format="json"
        )

        assert response.status_code == 409

    def test_other_changes_to_an_actor_in_use_are_saved(
        self, staff_api: APIClient, published: Recipe, actors: Any
    ) -> None:
        response = staff_api.patch(
            f"/api/actors/{actors.writer.pk}/",
            {"name": "scripted-writer", "timeout_s": 30, "config": {"replies": ["New."]}},
            format="json",
        )

        assert response.status_code == 200, response.content
        actors.writer.refresh_from_db()
        assert (actors.writer.timeout_s, actors.writer.config) == (30, {"replies": ["New."]})

    def test_an_actor_only_drafts_name_may_be_renamed_and_the_drafts_follow(
        self, staff_api: APIClient, recipe: Recipe, actors: Any
    ) -> None:
        response = staff_api.patch(
            f"/api/actors/{actors.writer.pk}/", {"name": "renamed-writer"}, format="json"
        )

        assert response.status_code == 200, response.content
        assert document_from_recipe(recipe)["actors"] == {"writer": "renamed-writer"}

    def test_an_actor_nothing_names_is_deleted(self, staff_api: APIClient, actors: Any) -> None:
        response = staff_api.delete(f"/api/actors/{actors.judge.pk}/")

        assert response.status_code == 204
        assert not Actor.objects.filter(pk=actors.judge.pk).exists()

    def test_the_admin_says_why_it_will_not_rename(
        self, admin_client: Client, published: Recipe, actors: Any
    ) -> None:
        url = f"/admin/workflows/actor/{actors.writer.pk}/change/"

        response = admin_client.post(url, {**admin_form_data(actors.writer), "name": "renamed"})

        assert response.status_code == 200
        assert (
            "actor &#x27;scripted-writer&#x27; is used by published versions of: short-story; "
            "renaming it would break them" in response.content.decode()
        )
        actors.writer.refresh_from_db()
        assert actors.writer.name == "scripted-writer"

    def test_the_admin_answers_a_rename_raced_by_a_publish_with_a_message(
        self,
        admin_client: Client,
        published: Recipe,
        actors: Any,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # As if the version was published between the form's check and the save's lock.
        monkeypatch.setattr(ActorForm, "clean", forms.ModelForm.clean)
        url = f"/admin/workflows/actor/{actors.writer.pk}/change/"

        response = admin_client.post(
            url, {**admin_form_data(actors.writer), "name": "renamed"}, follow=True
        )

        assert response.status_code == 200
        assert "renaming it would break them" in response.content.decode()
        actors.writer.refresh_from_db()
        assert actors.writer.name == "scripted-writer"

    def test_the_admin_says_why_it_will_not_delete(
        self, admin_client: Client, published: Recipe, actors: Any
    ) -> None:
        url = f"/admin/workflows/actor/{actors.writer.pk}/delete/"

        shown = admin_client.get(url)
        posted = admin_client.post(url, {"post": "yes"})

        for response in (shown, posted):
            assert response.status_code == 200
            assert "is used by published versions of: short-story" in response.content.decode()
        assert Actor.objects.filter(pk=actors.writer.pk).exists()

    def test_the_admin_bulk_delete_keeps_actors_in_use(
        self, admin_client: Client, published: Recipe, actors: Any
    ) -> None:
        form = {
            "action": "delete_selected",
            "_selected_action": [actors.writer.pk, actors.judge.pk],
            "post": "yes",
        }

        response = admin_client.post("/admin/workflows/actor/", form)

        assert response.status_code == 200
        assert "is used by published versions of: short-story" in response.content.decode()
        assert Actor.objects.filter(pk__in=[actors.writer.pk, actors.judge.pk]).count() == 2


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite ignores row locks")
@pytest.mark.django_db(transaction=True)
def test_a_publish_waits_for_a_rename_in_progress_and_names_the_new_name(
    user: Any, recipe: Recipe, actors: Any
) -> None:
    # Without the recipe lock taken with the actor's, this publish would write the old name
    # into a version after the rename checked that no version names it.
    locked, published = threading.Event(), threading.Event()
    versions: list[Any] = []

    def publish() -> None:
        locked.wait(5)
        try:
            versions.append(recipe_publish(recipe=recipe, user=user))
        finally:
            published.set()
            connection.close()

    publisher = threading.Thread(target=publish)
    publisher.start()
    with transaction.atomic():
        services._lock_actor(actors.writer)
        locked.set()
        assert not published.wait(0.5)  # the publish waits on the recipe's lock
        Actor.objects.filter(pk=actors.writer.pk).update(name="renamed-writer")
    publisher.join(5)

    assert versions and versions[0].document["actors"] == {"writer": "renamed-writer"}


class TestOtherWriters:
    def test_the_demo_seed_skips_an_actor_the_guard_refuses(self, settings: Any) -> None:
        settings.PROVIDER_URL_ALLOWLIST = []
        out = StringIO()

        call_command("seed_demo", stdout=out)

        printed = out.getvalue()
        assert (
            "actor llama3.2:latest not seeded: base_url: refused: 127.0.0.1, a loopback address"
            in printed
        )
        assert not Actor.objects.filter(provider="ollama").exists()
        assert Actor.objects.filter(name="demo-writer").exists()

    def test_an_import_refuses_an_actor_written_before_the_checks(
        self, user: Any, actors: Any
    ) -> None:
        Actor.objects.filter(pk=actors.writer.pk).update(config={})

        response = APIClient()
        response.force_login(user)
        answer = response.post("/api/recipes/import", recipe_document(), format="json")

        assert answer.status_code == 400
        assert answer.json()["errors"] == [
            "actors.writer: actor 'scripted-writer' cannot run: config: a scripted actor needs "
            "replies or rules to answer with"
        ]


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        (
            "localhost:http",
            "PROVIDER_URL_ALLOWLIST: allowlist entry 'localhost:http' has an invalid port",
        ),
        ("10.0.0.0/33", "PROVIDER_URL_ALLOWLIST: allowlist entry '10.0.0.0/33': "),
    ],
)
def test_a_bad_allowlist_stops_the_start(entries: str, error: str) -> None:
    env = {
        **os.environ,
        "PROVIDER_URL_ALLOWLIST": entries,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.setdefault("SECRET_KEY", "actor-tests-only")

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode != 0
    assert f"ImproperlyConfigured: {error}" in done.stderr


def test_changes_checked_on_a_stale_row_are_checked_again_on_the_locked_one(db: None) -> None:
    actor = ActorFactory(name="model-writer", openai=True)
    stale = Actor.objects.get(pk=actor.pk)
    # Another request changed the row since `stale` was read and checked.
    Actor.objects.filter(pk=actor.pk).update(model="")

    with pytest.raises(services.ActorInvalid) as refused:
        services.actor_update(actor=stale, changes={"timeout_s": 60})

    assert refused.value.errors == ["model: an openai actor needs the name of the model to call"]
    assert Actor.objects.get(pk=actor.pk).timeout_s != 60
