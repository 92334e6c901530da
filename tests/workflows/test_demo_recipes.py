"""The demo recipes import clean and round-trip; `seed_demo` sets the demo up, idempotently."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from workflows.adapters import document_from_recipe
from workflows.demo import (
    DEMO_USERNAME,
    REVIEWER_GROUP,
    REVIEWER_USERNAME,
    recipe_files,
)
from workflows.demo.actors import DEMO_ACTORS, PRIMES, first_primes
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_lint

FILES = recipe_files()
SLUGS = {
    "creative-writing-qc",
    "validation-loop",
    "regulatory-decision-tree",
    "first-1000-primes",
    "document-routing",
}


@pytest.fixture
def demo_owner(db: None) -> Any:
    """Create the demo actors and reviewer group, and return a user to own the recipes."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    return get_user_model().objects.create_user(username="owner", password="not-used-here")


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def printed_password(output: str, username: str) -> str:
    found = re.search(rf"user {username} (?:created|exists), (?:new )?password: (\S+)", output)
    assert found, output
    return found.group(1)


def test_there_is_one_demo_file_per_reference_design() -> None:
    assert {json.loads(path.read_text())["slug"] for path in FILES} == SLUGS
    assert {path.stem for path in FILES} == SLUGS


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_it_imports_each_demo_file_without_errors_or_warnings(path: Path, demo_owner: Any) -> None:
    result = recipe_import(user=demo_owner, data=path.read_bytes())

    assert result.created
    assert result.warnings == []
    assert recipe_lint(recipe=result.recipe) == []


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_it_exports_each_demo_file_back_as_it_is_written(path: Path, demo_owner: Any) -> None:
    recipe = recipe_import(user=demo_owner, data=path.read_bytes()).recipe

    exported = document_from_recipe(recipe)

    assert exported == json.loads(path.read_text())
    # Same keys in the same order too, so the files read like an export.
    assert json.dumps(exported, indent=2, ensure_ascii=False) + "\n" == path.read_text()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_step_of_each_demo_file_has_a_canvas_position(path: Path) -> None:
    steps = json.loads(path.read_text())["steps"]

    positions = [(s["position"]["x"], s["position"]["y"]) for s in steps]

    assert len(set(positions)) == len(steps)


def test_the_scripted_mathematician_knows_the_first_1000_primes() -> None:
    primes = [int(p) for p in PRIMES.split(", ")]

    assert len(primes) == 1000
    assert primes[:5] == [2, 3, 5, 7, 11]
    assert primes[-1] == 7919
    assert first_primes(10) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


def test_the_demo_recipes_only_name_scripted_actors_or_reviewer_groups() -> None:
    scripted = {a["name"] for a in DEMO_ACTORS if a["provider"] == "scripted"}
    for path in FILES:
        for reference in json.loads(path.read_text())["actors"].values():
            assert reference in scripted or reference == f"@human:{REVIEWER_GROUP}", reference


@pytest.mark.django_db
def test_seed_demo_creates_the_users_group_actors_recipes_and_versions() -> None:
    output = seed()

    users = get_user_model().objects
    demo = users.get(username=DEMO_USERNAME)
    reviewer = users.get(username=REVIEWER_USERNAME)
    assert demo.check_password(printed_password(output, DEMO_USERNAME))
    assert reviewer.check_password(printed_password(output, REVIEWER_USERNAME))
    assert demo.is_staff and not demo.is_superuser
    assert demo.has_perm("workflows.view_actor")
    assert not reviewer.is_staff
    group = Group.objects.get(name=REVIEWER_GROUP)
    assert set(group.user_set.values_list("username", flat=True)) == {"demo", "reviewer"}
    assert set(Actor.objects.values_list("name", flat=True)) == {a["name"] for a in DEMO_ACTORS}
    assert set(Recipe.objects.values_list("slug", flat=True)) == SLUGS
    for recipe in Recipe.objects.all():
        assert recipe.owner == demo
        assert list(recipe.versions.values_list("number", flat=True)) == [1]
        assert recipe.versions.get().document == document_from_recipe(recipe)


@pytest.mark.django_db
def test_seed_demo_run_again_changes_nothing_and_keeps_the_passwords() -> None:
    first = seed()
    revisions = dict(Recipe.objects.values_list("slug", "revision"))

    second = seed()

    assert "user demo exists (password unchanged; use --reset-password)" in second
    assert "user reviewer exists (password unchanged; use --reset-password)" in second
    assert "password:" not in second
    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    assert demo.check_password(printed_password(first, DEMO_USERNAME))
    assert dict(Recipe.objects.values_list("slug", "revision")) == revisions
    assert RecipeVersion.objects.count() == len(SLUGS)
    assert Actor.objects.count() == len(DEMO_ACTORS)


@pytest.mark.django_db
def test_seed_demo_gives_new_passwords_only_when_asked() -> None:
    first = seed()

    second = seed("--reset-password")

    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    new_password = printed_password(second, DEMO_USERNAME)
    assert new_password != printed_password(first, DEMO_USERNAME)
    assert demo.check_password(new_password)


@pytest.mark.django_db
def test_seed_demo_resets_an_edited_draft_and_publishes_the_file_again() -> None:
    seed()
    recipe = Recipe.objects.get(slug="validation-loop")
    document = document_from_recipe(recipe)
    document["name"] = "Edited"
    recipe_import(user=recipe.owner, data=document, replace=True)

    seed()

    recipe.refresh_from_db()
    assert recipe.name == "Answer with a Validation Loop"
    # The file equals version 1 again, so no new version is needed.
    assert list(recipe.versions.values_list("number", flat=True)) == [1]


@pytest.mark.django_db
def test_seed_demo_updates_an_actor_changed_in_the_database() -> None:
    seed()
    Actor.objects.filter(name="demo-writer").update(config={"replies": ["changed"]})

    seed()

    writer = Actor.objects.get(name="demo-writer")
    assert writer.config == next(a for a in DEMO_ACTORS if a["name"] == "demo-writer")["config"]
