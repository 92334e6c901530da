"""Import of recipe files (format v1): every error with its path, and nothing written on failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Branch, Recipe, RecipeActor, Step
from workflows.services import RecipeConflict, recipe_import
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db

Mutation = Callable[[dict[str, Any]], None]


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in (Recipe, Step, Branch, RecipeActor)}


def rejection(user: Any, data: Any, **kwargs: Any) -> list[str]:
    """Import `data` and return the errors it is rejected with (failing if it is accepted)."""
    with pytest.raises(RecipeRejected) as caught:
        recipe_import(user=user, data=data, **kwargs)
    assert caught.value.errors, "a rejection lists its errors"
    return caught.value.errors


def assert_reported(errors: list[str], expected: str) -> None:
    """Check that `expected` is among `errors`: exactly, or matching where it has a '*'."""
    if "*" in expected[:-1]:
        head, _, tail = expected.partition("*")
        assert any(e.startswith(head) and e.endswith(tail) for e in errors), (expected, errors)
    elif expected.endswith("*"):
        prefix = expected[:-1]
        assert any(e.startswith(prefix) for e in errors), f"no error starts {prefix!r}: {errors}"
    else:
        assert expected in errors, f"{expected!r} not in {errors}"


def branch(**fields: Any) -> dict[str, Any]:
    """Return a valid branch of the `write` step, with `fields` replacing its keys."""
    return {
        "name": "too_short",
        "priority": 1,
        "when": {"type": "length_check", "operator": "less_than", "value": 200},
        "action": "CONTINUE",
        "target": "@complete",
        **fields,
    }


def with_branches(*branches: dict[str, Any]) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"][0]["branches"] = list(branches)

    return mutate


def with_step(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"][0].update(fields)

    return mutate


def with_doc(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc.update(fields)

    return mutate


def without(*path: str | int) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


def added_step(**fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        doc["steps"].append({"key": "second", "name": "Second", "prompt": "", **fields})

    return mutate


def tree_step(tree: Any, **fields: Any) -> Mutation:
    return added_step(kind="decision_tree", tree=tree, **fields)


def leaf(name: str) -> dict[str, Any]:
    return {"type": "leaf", "prompt": name}


def pattern(value: str, **fields: Any) -> dict[str, Any]:
    return {"type": "pattern_match", "operator": "regex_match", "value": value, **fields}


# (mutation of the minimal document, the error it must produce; a trailing '*' matches a prefix)
DOCUMENT_ERRORS: list[tuple[str, Mutation, str]] = [
    (
        "wrong format",
        with_doc(format="branchline.recipe/v2"),
        "format: must be 'branchline.recipe/v1'",
    ),
    ("missing format", without("format"), "format: Field required"),
    ("missing slug", without("slug"), "slug: Field required"),
    ("missing name", without("name"), "name: Field required"),
    ("missing steps", without("steps"), "steps: Field required"),
    ("no steps", with_doc(steps=[]), "steps: List should have at least 1 item*"),
    ("missing step key", without("steps", 0, "key"), "steps[0].key: Field required"),
    ("missing step name", without("steps", 0, "name"), "steps[0].name: Field required"),
    (
        "missing branch condition",
        with_branches({k: v for k, v in branch().items() if k != "when"}),
        "steps[0].branches[0].when: Field required",
    ),
    ("steps not a list", with_doc(steps="write"), "steps: Input should be a valid list"),
    (
        "actors not a mapping",
        with_doc(actors=["writer"]),
        "actors: Input should be a valid dictionary",
    ),
    ("name not text", with_doc(name=42), "name: Input should be a valid string"),
    (
        "timeout not a number",
        with_step(timeout_s="soon"),
        "steps[0].timeout_s: Input should be a valid integer*",
    ),
    (
        "negative timeout",
        with_step(timeout_s=-5),
        "steps[0].timeout_s: Input should be greater than or equal to 1",
    ),
    (
        "priority not a number",
        with_branches(branch(priority="first")),
        "steps[0].branches[0].priority: Input should be a valid integer*",
    ),
    (
        "priority zero",
        with_branches(branch(priority=0)),
        "steps[0].branches[0].priority: Input should be greater than or equal to 1",
    ),
    (
        "branch active not a flag",
        with_branches(branch(active="maybe")),
        "steps[0].branches[0].active: Input should be a valid boolean*",
    ),
    (
        "condition not an object",
        with_branches(branch(when="always")),
        "steps[0].branches[0].when: Input should be a valid dictionary*",
    ),
    ("unknown step field", with_step(colour="red"), "steps[0].colour: unknown field"),
    ("unknown top-level field", with_doc(author="me"), "author: unknown field"),
    (
        "unknown step kind",
        with_step(kind="poem"),
        "steps[0].kind: Input should be 'llm', 'human', 'decision_tree' or 'classify'",
    ),
    (
        "input of unknown type",
        with_doc(inputs={"topic": {"type": "colour"}}),
        "inputs.topic.type: Input should be*",
    ),
    (
        "validation threshold above 1",
        with_step(validation={"threshold": 7}),
        "steps[0].validation.threshold: Input should be less than or equal to 1",
    ),
    (
        "unknown condition type",
        with_branches(branch(when={"type": "vibe_check", "operator": "equals", "value": 1})),
        "steps[0].branches[0].when.type: unknown condition type 'vibe_check'*",
    ),
    (
        "unknown operator",
        with_branches(branch(when={"type": "length_check", "operator": "lessthan", "value": 200})),
        "steps[0].branches[0].when.operator: unknown operator 'lessthan'*",
    ),
    (
        "operator of another condition type",
        with_branches(
            branch(when={"type": "pattern_match", "operator": "less_than", "value": "x"})
        ),
        "steps[0].branches[0].when.operator: unknown operator 'less_than'*",
    ),
    (
        "unknown operator inside and",
        with_branches(
            branch(
                when={
                    "type": "and",
                    "conditions": [
                        {"type": "default"},
                        {"type": "length_check", "operator": "lessthan", "value": 1},
                    ],
                }
            )
        ),
        "steps[0].branches[0].when.conditions[1].operator: unknown operator 'lessthan'*",
    ),
    (
        "unknown action",
        with_branches(branch(action="JUMP")),
        "steps[0].branches[0].action: unknown action 'JUMP'*",
    ),
    (
        "target naming no step",
        with_branches(branch(target="nowhere")),
        "steps[0].branches[0].target: unknown step 'nowhere'; expected a step key or @repeat, @end, @complete",
    ),
    (
        "unknown special target",
        with_branches(branch(target="@later")),
        "steps[0].branches[0].target: unknown step '@later'*",
    ),
    (
        "unknown actor",
        with_doc(actors={"writer": "nobody"}),
        "actors.writer: unknown actor 'nobody'",
    ),
    (
        "unknown reviewer group",
        with_doc(actors={"writer": "scripted-writer", "editors": "@human:ghosts"}),
        "actors.editors: unknown reviewer group 'ghosts'",
    ),
    (
        "step actor that is no alias",
        with_step(actor="ghost"),
        "steps[0].actor: unknown actor alias 'ghost'; declared: writer",
    ),
    (
        "regex that does not compile",
        with_branches(branch(when=pattern("(unclosed"))),
        "steps[0].branches[0].when.value: invalid regex: missing ): (unclosed",
    ),
    (
        "backreference regex",
        with_branches(branch(when=pattern(r"(a)\1"))),
        "steps[0].branches[0].when.value: invalid regex: backreferences and lookaround are not supported*",
    ),
    (
        "lookahead regex",
        with_branches(branch(when=pattern("error(?=!)"))),
        "steps[0].branches[0].when.value: invalid regex: backreferences and lookaround are not supported*",
    ),
    (
        "unknown regex flag",
        with_branches(branch(when=pattern("error", flags="x"))),
        "steps[0].branches[0].when.flags: unknown regex flag 'x'; use i, m or s",
    ),
    (
        "unknown template name",
        with_step(prompt="Write about {nope}"),
        "steps[0].prompt: unknown template name 'nope'; declared inputs: topic",
    ),
    (
        "step number past the last step",
        with_step(prompt="Improve {step9_response}"),
        "steps[0].prompt: unknown template name 'step9_response'*",
    ),
    (
        "reference to a missing step",
        with_step(prompt="Improve {steps.missing.response}"),
        "steps[0].prompt: unknown template name 'steps.missing.response'*",
    ),
    (
        "attribute access in a template",
        with_step(prompt="{topic.__class__}"),
        "steps[0].prompt: attribute access in {topic.__class__} is not allowed",
    ),
    (
        "lone brace in a template",
        with_step(prompt="Write {topic"),
        "steps[0].prompt: single '{' in template*",
    ),
    (
        "decision tree that is not an object",
        tree_step("yes"),
        "steps[1].tree: Input should be a valid dictionary",
    ),
    (
        "decision tree without its tree",
        tree_step({"version": "1"}),
        "steps[1].tree.tree: is required",
    ),
    (
        "decision tree node without branches",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_safety", "has_unsafe_pages": True},
                },
            }
        ),
        "steps[1].tree.tree.if_true: is required",
    ),
    (
        "decision tree node of unknown type",
        tree_step({"version": "1", "tree": {"type": "bush"}}),
        "steps[1].tree.tree.type: unknown node type 'bush'*",
    ),
    (
        "decision tree condition of unknown type",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_horoscope"},
                    "if_true": leaf("write"),
                    "if_false": leaf("write"),
                },
            }
        ),
        "steps[1].tree.tree.condition.type: unknown condition type 'check_horoscope'*",
    ),
    (
        "decision tree leaf mapped to no step",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_safety", "has_unsafe_pages": True},
                    "if_true": leaf("unsafe"),
                    "if_false": leaf("write"),
                },
            },
            leaf_targets={"unsafe": "nowhere"},
        ),
        "steps[1].leaf_targets.unsafe: unknown step 'nowhere'*",
    ),
    (
        "decision tree leaf target for no leaf",
        tree_step(
            {"version": "1", "tree": leaf("write")},
            leaf_targets={"missing": "write"},
        ),
        "steps[1].leaf_targets.missing: no leaf 'missing' in the tree*",
    ),
    (
        "duplicate step keys",
        added_step(key="write", actor="writer"),
        "steps[1].key: duplicate step key 'write' (also steps[0])",
    ),
    (
        "duplicate branch priorities",
        with_branches(branch(), branch(name="also_short", priority=1)),
        "steps[0].branches[1].priority: duplicate priority 1 (also branches[0])",
    ),
    ("step key that is not a slug", with_step(key="Write It!"), "steps[0].key: must match*"),
    (
        "slug that is not a slug",
        with_doc(slug="Short Story!"),
        "slug: must match ^[a-z0-9][a-z0-9_-]*$, got 'Short Story!'",
    ),
    (
        "human step run by a model",
        with_step(kind="human"),
        "steps[0].actor: a human step needs a reviewer group actor",
    ),
    (
        "model step run by a reviewer group",
        with_doc(actors={"writer": "@human:editors"}),
        "steps[0].actor: 'writer' is a reviewer group, not a model",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [pytest.param(m, e, id=name) for name, m, e in DOCUMENT_ERRORS],
)
def test_it_refuses_a_bad_document_with_the_error_path(
    user: Any, actors: Any, mutate: Mutation, expected: str
) -> None:
    doc = recipe_document(slug="bad-recipe")
    mutate(doc)
    before = counts()

    errors = rejection(user, doc)

    assert_reported(errors, expected)
    assert counts() == before


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
