"""`manage.py import_recipe FILE`: imports a file, or fails listing every error."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command

from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Recipe

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_recipe", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def recipe_file(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "short-story.json"
    path.write_text(json.dumps(doc))
    return path


def test_it_imports_a_file(superuser: Any, actors: Any, recipe_file: Path, doc: Any) -> None:
    output = run(str(recipe_file))

    assert "Imported 'short-story' (Short Story)" in output
    recipe = Recipe.objects.get()
    assert recipe.owner == superuser
    assert document_from_recipe(recipe) == doc


def test_it_imports_a_yaml_file_for_an_owner(
    user: Any, actors: Any, tmp_path: Path, doc: dict[str, Any]
) -> None:
    path = tmp_path / "story.yaml"
    path.write_text(yaml.safe_dump(doc))

    output = run(str(path), "--owner", "alice")

    assert "Imported 'short-story'" in output
    assert Recipe.objects.get().owner == user


def test_it_replaces_a_draft(superuser: Any, actors: Any, recipe_file: Path, doc: Any) -> None:
    run(str(recipe_file))
    doc["name"] = "Longer Story"
    recipe_file.write_text(json.dumps(doc))

    output = run(str(recipe_file), "--replace")

    assert "Replaced the draft of 'short-story' (Longer Story)" in output
    assert Recipe.objects.get().revision == 2


def test_it_prints_lint_warnings(superuser: Any, actors: Any, tmp_path: Path) -> None:
    doc = recipe_document(slug="with-orphan")
    doc["steps"][0]["branches"] = [
        {
            "name": "stop",
            "priority": 1,
            "when": {"type": "default"},
            "action": "END_RECIPE",
            "target": "@end",
        }
    ]
    doc["steps"].append(
        {
            "key": "orphan",
            "name": "Orphan",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Hi",
            "branches": [],
        }
    )
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps(doc))

    output = run(str(path))

    assert "warning: steps[1]" in output


def test_it_fails_listing_every_error(superuser: Any, actors: Any, tmp_path: Path) -> None:
    doc = recipe_document(actors={"writer": "nobody"})
    doc["steps"][0]["branches"] = [
        {
            "name": "b",
            "priority": 1,
            "when": {"type": "length_check", "operator": "lessthan", "value": 2},
            "action": "CONTINUE",
            "target": "@complete",
        }
    ]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))

    with pytest.raises(CommandError) as caught:
        run(str(path))

    message = str(caught.value)
    assert message.startswith(f"{path} was not imported:\n")
    assert "\n  actors.writer: unknown actor 'nobody'" in message
    assert "\n  steps[0].branches[0].when.operator: unknown operator 'lessthan'" in message
    assert not Recipe.objects.exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "$: invalid JSON"),
        ("[1, 2]", "$: a recipe is a JSON object (a mapping)"),
        ("", "$: the file is empty"),
    ],
)
def test_it_fails_on_a_file_that_is_no_recipe(
    superuser: Any, tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)

    with pytest.raises(CommandError, match="was not imported") as caught:
        run(str(path))

    assert expected in str(caught.value)


def test_it_fails_on_an_existing_slug_without_replace(
    superuser: Any, actors: Any, recipe_file: Path
) -> None:
    run(str(recipe_file))

    with pytest.raises(CommandError, match="exists already"):
        run(str(recipe_file))


def test_it_fails_on_a_missing_file(superuser: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        run(str(tmp_path / "nowhere.json"))


def test_it_fails_without_an_owner(db: None, recipe_file: Path) -> None:
    with pytest.raises(CommandError, match="no superuser to own it"):
        run(str(recipe_file))


def test_it_fails_for_an_unknown_owner(superuser: Any, recipe_file: Path) -> None:
    with pytest.raises(CommandError, match="no user 'ghost'"):
        run(str(recipe_file), "--owner", "ghost")
