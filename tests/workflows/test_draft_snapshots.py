"""Draft snapshots: hidden, immutable versions of a draft as the editor shows it, for test runs."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from runner.models import Run
from runner.services import RunNotStartable, run_start
from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import SNAPSHOT_NUMBER, Recipe, RecipeVersion
from workflows.selectors import actor_users, recipes_listed
from workflows.services import (
    document_hash,
    recipe_draft_snapshot,
    recipe_import,
    recipe_publish,
    recipe_update,
)
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def canvas(recipe: Recipe, prompt: str = "Write a poem about {topic}") -> dict[str, Any]:
    """Return the recipe's draft as an editor would show it after an edit it has not saved."""
    document = document_from_recipe(recipe)
    document["steps"][0]["prompt"] = prompt
    return document


def test_it_snapshots_a_document_and_leaves_the_draft_as_it_is(user: Any, recipe: Recipe) -> None:
    saved = document_from_recipe(recipe)
    revision = recipe.revision
    document = canvas(recipe)

    snapshot = recipe_draft_snapshot(recipe=recipe, user=user, document=document)

    assert snapshot.is_draft_snapshot
    assert (snapshot.number, snapshot.label) == (SNAPSHOT_NUMBER, "draft")
    assert snapshot.document == document
    assert snapshot.document_hash == document_hash(document)
    assert snapshot.created_by == user
    recipe.refresh_from_db()
    assert document_from_recipe(recipe) == saved
    assert recipe.revision == revision


def test_without_a_document_it_snapshots_the_saved_draft(user: Any, recipe: Recipe) -> None:
    snapshot = recipe_draft_snapshot(recipe=recipe, user=user)

    assert snapshot.document == document_from_recipe(recipe)


def test_it_reuses_the_snapshot_of_an_identical_document(user: Any, recipe: Recipe) -> None:
    first = recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))
    # The same document with its keys in another order is the same document.
    shuffled = dict(reversed(list(canvas(recipe).items())))
    again = recipe_draft_snapshot(recipe=recipe, user=user, document=shuffled)
    other = recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe, "Sing {topic}"))

    assert again.pk == first.pk
    assert other.pk != first.pk
    assert RecipeVersion.objects.draft_snapshots().count() == 2


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite writes one at a time")
@pytest.mark.django_db(transaction=True)
def test_two_runs_of_one_canvas_at_once_share_one_snapshot(user: Any, recipe: Recipe) -> None:
    # The second request misses the first one's row (not committed yet), then waits on the
    # unique index, and takes that row once it is committed.
    document = canvas(recipe)
    results: list[RecipeVersion] = []
    errors: list[BaseException] = []

    def snapshot_too() -> None:
        try:
            results.append(recipe_draft_snapshot(recipe=recipe, user=user, document=document))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    with transaction.atomic():
        first = recipe_draft_snapshot(recipe=recipe, user=user, document=document)
        other = threading.Thread(target=snapshot_too)
        other.start()
        other.join(0.5)
        assert other.is_alive()  # waiting on the unique index
    other.join(5)

    assert not errors
    assert [r.pk for r in results] == [first.pk]
    assert RecipeVersion.objects.draft_snapshots().count() == 1


def test_the_same_document_of_another_recipe_is_another_snapshot(
    user: Any, recipe: Recipe, actors: Any
) -> None:
    other = recipe_import(user=user, data=recipe_document(slug="other")).recipe
    mine = recipe_draft_snapshot(recipe=recipe, user=user)
    theirs = recipe_draft_snapshot(recipe=other, user=user)

    assert mine.pk != theirs.pk
    assert theirs.document["slug"] == "other"


def _unknown_operator(doc: dict[str, Any]) -> None:
    doc["steps"][0]["branches"] = [
        {
            "name": "short",
            "priority": 1,
            "when": {"type": "length_check", "operator": "lessthan", "value": 5},
            "action": "END_RECIPE",
            "target": "@end",
        }
    ]


def _unknown_actor(doc: dict[str, Any]) -> None:
    doc["actors"]["writer"] = "nobody-by-that-name"


def _unknown_template_name(doc: dict[str, Any]) -> None:
    doc["steps"][0]["prompt"] = "Write about {missing}"


def _unknown_target(doc: dict[str, Any]) -> None:
    doc["steps"][0]["branches"] = [
        {
            "name": "on",
            "priority": 1,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "nowhere",
        }
    ]


def _no_steps(doc: dict[str, Any]) -> None:
    doc["steps"] = []


@pytest.mark.parametrize(
    ("spoil", "expected"),
    [
        (_unknown_operator, "steps[0].branches[0].when.operator"),
        (_unknown_actor, "actors.writer: unknown actor 'nobody-by-that-name'"),
        (_unknown_template_name, "missing"),
        (_unknown_target, "nowhere"),
        (_no_steps, "steps"),
    ],
)
def test_it_refuses_what_saving_refuses_with_the_same_errors_and_writes_nothing(
    user: Any, recipe: Recipe, spoil: Any, expected: str
) -> None:
    document = document_from_recipe(recipe)
    spoil(document)

    with pytest.raises(RecipeRejected) as snapshotting:
        recipe_draft_snapshot(recipe=recipe, user=user, document=copy.deepcopy(document))
    with pytest.raises(RecipeRejected) as saving:
        recipe_update(recipe=recipe, document=copy.deepcopy(document))

    assert snapshotting.value.errors == saving.value.errors
    assert any(expected in error for error in snapshotting.value.errors), snapshotting.value
    assert not RecipeVersion.objects.exists()


def test_it_refuses_a_document_of_another_slug(user: Any, recipe: Recipe) -> None:
    document = {**document_from_recipe(recipe), "slug": "someone-else"}

    with pytest.raises(RecipeRejected, match="slug: the slug of a recipe cannot change"):
        recipe_draft_snapshot(recipe=recipe, user=user, document=document)


def test_a_snapshot_cannot_be_changed(user: Any, recipe: Recipe) -> None:
    snapshot = recipe_draft_snapshot(recipe=recipe, user=user)
    snapshot.is_draft_snapshot = False
    snapshot.number = 1

    with pytest.raises(ValidationError, match="cannot be changed"):
        snapshot.save()

    snapshot.refresh_from_db()
    assert (snapshot.is_draft_snapshot, snapshot.number) == (True, SNAPSHOT_NUMBER)


@pytest.mark.parametrize(
    ("number", "is_draft_snapshot"), [(1, True), (0, False)], ids=["numbered", "unnumbered"]
)
def test_the_database_keeps_snapshots_and_published_versions_apart(
    user: Any, recipe: Recipe, number: int, is_draft_snapshot: bool
) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        RecipeVersion.objects.create(
            recipe=recipe,
            number=number,
            is_draft_snapshot=is_draft_snapshot,
            document=document_from_recipe(recipe),
        )


def test_snapshots_are_not_published_versions(user: Any, recipe: Recipe) -> None:
    recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))

    assert recipe.latest_version is None
    assert recipes_listed(user).get().latest_version_number is None
    with pytest.raises(RunNotStartable, match="no published version yet"):
        run_start(user=user, recipe=recipe, inputs={"topic": "owls"})

    published = recipe_publish(recipe=recipe, user=user)
    recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe, "Sing {topic}"))

    assert published.number == 1
    assert recipe.latest_version == published
    assert recipes_listed(user).get().latest_version_number == 1
    assert recipe_publish(recipe=recipe, user=user).number == 2
    assert list(recipe.versions.published().values_list("number", flat=True)) == [2, 1]


def test_an_actor_named_only_by_a_snapshot_is_not_held_by_a_published_version(
    user: Any, recipe: Recipe
) -> None:
    recipe_draft_snapshot(recipe=recipe, user=user)

    users = actor_users(name=recipe.actor_aliases.get().actor.name)

    assert users.published == ()
    assert users.drafts == (recipe.slug,)


def test_a_run_pins_a_snapshot_with_its_document(user: Any, recipe: Recipe) -> None:
    snapshot = recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))

    run = run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, snapshot=snapshot)

    assert Run.objects.get().version == snapshot
    assert run.version.document["steps"][0]["prompt"] == "Write a poem about {topic}"


def test_a_run_refuses_a_snapshot_of_another_recipe_or_a_published_version(
    user: Any, recipe: Recipe, actors: Any
) -> None:
    other = recipe_import(user=user, data=recipe_document(slug="other")).recipe
    theirs = recipe_draft_snapshot(recipe=other, user=user)
    published = recipe_publish(recipe=recipe, user=user)

    for wrong in (theirs, published):
        with pytest.raises(RunNotStartable, match="not a draft snapshot of 'short-story'"):
            run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, snapshot=wrong)
    assert not Run.objects.exists()


class TestTheApi:
    def test_version_lists_leave_snapshots_out(self, api: Any, user: Any, recipe: Recipe) -> None:
        recipe_publish(recipe=recipe, user=user)
        recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))

        listed = api.get("/api/recipes/short-story/versions").json()
        detail = api.get("/api/recipes/short-story").json()
        summary = api.get("/api/recipes/").json()

        assert [v["number"] for v in listed] == [1]
        assert [v["number"] for v in detail["versions"]] == [1]
        assert detail["latest_version"] == 1
        rows = summary["results"] if isinstance(summary, dict) else summary
        assert [r["latest_version"] for r in rows] == [1]

    def test_a_snapshot_cannot_be_exported(self, api: Any, user: Any, recipe: Recipe) -> None:
        recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))

        response = api.get("/api/recipes/short-story/export", {"version": "0"})

        assert response.status_code == 400
        assert "no version 0" in response.json()["errors"][0]
        exported = api.get("/api/recipes/short-story/export").json()
        assert exported["steps"][0]["prompt"] == "Write a short story about {topic}"

    def test_a_run_on_a_snapshot_says_so(self, api: Any, user: Any, recipe: Recipe) -> None:
        snapshot = recipe_draft_snapshot(recipe=recipe, user=user, document=canvas(recipe))
        run = run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, snapshot=snapshot)
        published = recipe_publish(recipe=recipe, user=user)
        plain = run_start(user=user, recipe=recipe, inputs={"topic": "owls"})

        assert plain.version == published
        body = api.get(f"/api/runs/{run.pk}/").json()
        assert (body["version"], body["draft_snapshot"]) == (SNAPSHOT_NUMBER, True)
        body = api.get(f"/api/runs/{plain.pk}/").json()
        assert (body["version"], body["draft_snapshot"]) == (1, False)

    def test_starting_a_run_by_number_never_finds_a_snapshot(
        self, api: Any, user: Any, recipe: Recipe
    ) -> None:
        recipe_draft_snapshot(recipe=recipe, user=user)

        response = api.post(
            "/api/recipes/short-story/runs",
            {"inputs": {"topic": "owls"}},
            format="json",
        )

        assert response.status_code == 409
        assert "no published version yet" in response.json()["errors"][0]
