"""Import of recipe files (format v1): every error with its path, and nothing written on failure."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.factories import chain_document, recipe_document
from tests.workflows.recipe_mutations import (
    assert_reported,
    branch,
    counts,
    leaf,
    pattern,
    rejection,
)
from workflows.adapters import document_from_recipe
from workflows.models import Recipe, Step
from workflows.services import RecipeConflict, recipe_import

pytestmark = pytest.mark.django_db


# (file text, the error it must produce)
FILE_ERRORS: list[tuple[str, bytes | str, str]] = [
    (
        "invalid JSON",
        '{"format": "branchline.recipe/v1", "slug": }',
        "$: invalid JSON at line 1 column 44: Expecting value",
    ),
    ("truncated JSON", '{"format": "branchline.recipe/v1",', "$: invalid JSON at line 1*"),
    (
        "invalid YAML",
        "format: branchline.recipe/v1\nsteps: [unclosed\n",
        "$: invalid YAML at line*",
    ),
    ("YAML tab indentation", "format: x\n\tslug: y\n", "$: invalid YAML*"),
    (
        "a YAML alias (a billion laughs)",
        "a: &x [1, 2]\nb: [*x, *x, *x]\n",
        "$: invalid YAML at line 2 column 5: aliases (*name) are not accepted in recipe files",
    ),
    ("a JSON list", "[1, 2, 3]", "$: a recipe is a JSON object (a mapping)"),
    ("a bare string", "just some words", "$: a recipe is a JSON object (a mapping)"),
    ("a number", "42", "$: a recipe is a JSON object (a mapping)"),
    ("null", "null", "$: a recipe is a JSON object (a mapping)"),
    ("an empty file", "", "$: the file is empty"),
    ("only whitespace", "  \n\t ", "$: the file is empty"),
    ("not UTF-8", b'{"name": "caf\xe9"}', "$: the file is not UTF-8 text*"),
    (
        "a YAML date",
        "format: x\ndescription: 2024-01-01\n",
        "description: a date is not a JSON value",
    ),
    ("a YAML set", "format: x\ninputs: !!set {a, b}\n", "inputs: a set is not a JSON value"),
    (
        "a YAML infinity",
        "format: x\nsteps:\n- timeout_s: .inf\n",
        "steps[0].timeout_s: the number inf is out of range",
    ),
    ("a JSON number past a float", '{"format": 1e400}', "format: the number inf is out of range"),
    ("a YAML key that is no text", "format: x\n1: one\n", "$: the key 1 is not text"),
    ("a NUL character", '{"name": "a\\u0000b"}', "name: contains a NUL character"),
    (
        "a NUL character in a key",
        '{"inputs": {"a\\u0000": {}}}',
        "inputs: a key contains a NUL character",
    ),
    (
        "a lone surrogate",
        '{"steps": [{"prompt": "a\\ud800"}]}',
        "steps[0].prompt: contains a lone surrogate (U+D800)",
    ),
    (
        "a lone surrogate in a key",
        '{"inputs": {"\\udfff": {}}}',
        "inputs: a key contains a lone surrogate (U+DFFF)",
    ),
    (
        "nesting too deep",
        '{"description": ' + "[" * 70 + "]" * 70 + "}",
        "description[0]*nested deeper than 64 levels",
    ),
    (
        "nesting too deep to parse as JSON",
        '{"description": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "$: invalid JSON: nested too deeply",
    ),
    (
        "nesting too deep to parse as YAML",
        "description: " + "[" * 100_000 + "]" * 100_000,
        "$: invalid YAML: nested too deeply",
    ),
    (
        "a JSON number of 5000 digits",
        '{"format": ' + "9" * 5000 + "}",
        "$: invalid JSON: a number has more than 4300 digits",
    ),
    (
        "a YAML number of 5000 digits",
        "format: " + "9" * 5000,
        "$: invalid YAML: a number has more than 4300 digits",
    ),
    ("a YAML date that is none", "format: x\ncreated: 2024-13-45\n", "$: invalid YAML: month*"),
    ("a YAML tag that does not convert", "format: !!int 0x\n", "$: invalid YAML: invalid*"),
]


@pytest.mark.parametrize(
    ("text", "expected"), [pytest.param(t, e, id=name) for name, t, e in FILE_ERRORS]
)
def test_it_refuses_a_file_that_is_no_recipe(user: Any, text: bytes | str, expected: str) -> None:
    before = counts()

    errors = rejection(user, text)

    assert_reported(errors, expected)
    assert counts() == before


def test_it_refuses_a_file_over_the_size_limit(
    user: Any, actors: Any, doc: dict[str, Any], settings: Any
) -> None:
    settings.RECIPE_MAX_BYTES = 300
    doc["description"] = "x" * 400
    text = json.dumps(doc)

    errors = rejection(user, text)

    assert errors == [f"$: the file is {len(text)} bytes; the limit is 300"]
    assert not Recipe.objects.exists()


def test_it_refuses_a_parsed_document_over_the_size_limit(
    user: Any, actors: Any, doc: dict[str, Any], settings: Any
) -> None:
    # An API body arrives already parsed: it is held to the same limit as a file.
    settings.RECIPE_MAX_BYTES = 300
    doc["description"] = "x" * 400

    errors = rejection(user, doc)

    assert_reported(errors, "$: the document is*")
    assert not Recipe.objects.exists()


def test_it_imports_a_recipe_of_a_thousand_steps_over_a_mebibyte(user: Any, actors: Any) -> None:
    # The format's cap (1,000 steps) with prompts of a kilobyte: the default size limit fits it.
    doc = chain_document(slug="long", actor=actors.writer.name, steps=1000, branches=[])
    for step in doc["steps"]:
        step["prompt"] += " Keep the voice." * 64
    assert len(json.dumps(doc)) > 1024 * 1024

    result = recipe_import(user=user, data=json.dumps(doc))

    assert Step.objects.filter(recipe=result.recipe).count() == 1000


def test_it_reports_every_error_at_once(user: Any, actors: Any) -> None:
    doc = recipe_document(slug="many-mistakes", actors={"writer": "nobody"})
    doc["steps"][0]["prompt"] = "Write about {nope}"
    doc["steps"][0]["timeout_s"] = "soon"
    doc["steps"][0]["branches"] = [
        branch(when={"type": "length_check", "operator": "lessthan", "value": 200}),
        branch(name="bad_target", priority=2, target="nowhere"),
        branch(name="bad_regex", priority=3, when=pattern(r"(a)\1")),
        branch(name="bad_action", priority=4, action="JUMP"),
    ]

    errors = rejection(user, doc)

    for expected in [
        "actors.writer: unknown actor 'nobody'",
        "steps[0].timeout_s: *",
        "steps[0].prompt: *",
        "steps[0].branches[0].when.operator: unknown operator 'lessthan'*",
        "steps[0].branches[1].target: *",
        "steps[0].branches[2].when.value: invalid regex: backreferences and lookaround are not supported*",
        "steps[0].branches[3].action: unknown action 'JUMP'*",
    ]:
        assert_reported(errors, expected)
    assert not Recipe.objects.exists()


def test_every_error_reads_path_colon_message(user: Any, actors: Any) -> None:
    doc = recipe_document(actors={"writer": "nobody"}, format="v0")
    doc["steps"][0]["branches"] = [branch(action="JUMP", target="nowhere")]

    errors = rejection(user, doc)

    assert len(errors) >= 4
    for error in errors:
        path, _, message = error.partition(": ")
        assert path and message, error


def test_it_imports_a_minimal_document(user: Any, actors: Any, doc: dict[str, Any]) -> None:
    result = recipe_import(user=user, data=doc)

    assert result.created
    recipe = result.recipe
    assert (recipe.slug, recipe.name, recipe.owner, recipe.revision) == (
        "short-story",
        "Short Story",
        user,
        1,
    )
    assert list(recipe.steps.values_list("key", "order", "actor_alias")) == [("write", 1, "writer")]
    alias = recipe.actor_aliases.get()
    assert (alias.alias, alias.actor) == ("writer", actors.writer)


def test_it_imports_yaml(user: Any, actors: Any, doc: dict[str, Any]) -> None:
    doc["steps"][0]["branches"] = [branch()]
    text = yaml.safe_dump(doc, sort_keys=False)
    assert not text.lstrip().startswith("{")

    result = recipe_import(user=user, data=text.encode())

    assert result.created
    assert document_from_recipe(result.recipe) == doc


def test_it_imports_json_text(user: Any, actors: Any, doc: dict[str, Any]) -> None:
    result = recipe_import(user=user, data=json.dumps(doc, indent=2).encode())

    assert document_from_recipe(result.recipe) == doc


def test_it_refuses_an_existing_slug_without_replace(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["name"] = "Another Story"
    before = counts()

    with pytest.raises(RecipeConflict, match="exists already"):
        recipe_import(user=user, data=doc)

    assert counts() == before
    recipe.refresh_from_db()
    assert recipe.name == "Short Story"


def test_it_replaces_a_draft_with_replace(user: Any, recipe: Recipe, doc: dict[str, Any]) -> None:
    doc["name"] = "Another Story"
    doc["steps"][0]["prompt"] = "Write a long story about {topic}"

    result = recipe_import(user=user, data=doc, replace=True)

    assert not result.created
    assert result.recipe.pk == recipe.pk
    recipe.refresh_from_db()
    assert recipe.revision == 2
    assert document_from_recipe(recipe) == doc
    assert Step.objects.filter(recipe=recipe).count() == 1


def test_it_keeps_the_old_draft_when_a_replacement_is_rejected(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    before_doc = document_from_recipe(recipe)
    before = counts()
    doc["name"] = "Broken"
    doc["steps"][0]["branches"] = [branch(target="nowhere")]

    rejection(user, doc, replace=True)

    recipe.refresh_from_db()
    assert recipe.revision == 1
    assert recipe.name == "Short Story"
    assert document_from_recipe(recipe) == before_doc
    assert counts() == before


def test_it_refuses_to_replace_someone_elses_recipe(
    other_user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["name"] = "Hijacked"

    with pytest.raises(RecipeConflict, match="belongs to someone else"):
        recipe_import(user=other_user, data=doc, replace=True)

    recipe.refresh_from_db()
    assert (recipe.name, recipe.owner.username) == ("Short Story", "alice")


def test_it_returns_lint_warnings_without_refusing(user: Any, actors: Any) -> None:
    doc = recipe_document(slug="with-orphan")
    doc["steps"][0]["branches"] = [
        branch(action="END_RECIPE", target="@end", when={"type": "default"})
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

    result = recipe_import(user=user, data=doc)

    assert result.created
    assert any(w.startswith("steps[1]") for w in result.warnings), result.warnings


def test_it_warns_of_a_tree_leaf_that_names_no_step(user: Any, actors: Any) -> None:
    # A leaf naming no step is allowed (the step's branches decide), but lint points it out.
    doc = recipe_document(slug="with-tree")
    doc["steps"].append(
        {
            "key": "check",
            "name": "Check",
            "kind": "decision_tree",
            "prompt": "",
            "tree": {"version": "1", "tree": leaf("somewhere_else")},
            "branches": [],
        }
    )

    result = recipe_import(user=user, data=doc)

    assert any(
        w.startswith("steps[1].leaf_targets: the leaf 'somewhere_else' names no step")
        for w in result.warnings
    ), result.warnings
