"""A recipe's inbound webhooks: read from the document with errors at their paths, their
JMESPath expressions compiled when the recipe is checked, and payloads mapped to inputs."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import RecipeInvalid, parse_recipe
from workflows.engine.webhooks import PayloadUnmapped, WebhookSpec, map_payload

INPUTS = {"topic": {"type": "string", "required": True}, "count": {"type": "number"}}


def hooks(*webhooks: Any) -> tuple[WebhookSpec, ...]:
    return graph(step("s"), inputs=INPUTS, webhooks=list(webhooks)).webhooks


# Publish refuses any other name (workflows/engine/secrets.py), without repeating it.
NOT_A_RECIPE_SECRET = (
    "not a recipe secret: a recipe reads only env vars named BRANCHLINE_SECRET_NAME (capitals, "
    "digits and _), which the server's operator sets aside for recipes"
)


def errors(webhooks: Any) -> list[str]:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("s"), inputs=INPUTS, webhooks=webhooks))
    return caught.value.errors


def test_it_reads_each_hook() -> None:
    ticket, plain = hooks(
        {
            "name": "ticket",
            "secret_env": "BRANCHLINE_SECRET_TICKET",
            "inputs": {"topic": "issue.title"},
        },
        {"name": "plain-2", "secret_env": "BRANCHLINE_SECRET_PLAIN"},
    )

    assert (ticket.name, ticket.secret_env, ticket.inputs) == (
        "ticket",
        "BRANCHLINE_SECRET_TICKET",
        {"topic": "issue.title"},
    )
    assert ticket.as_json() == {
        "name": "ticket",
        "secret_env": "BRANCHLINE_SECRET_TICKET",
        "inputs": {"topic": "issue.title"},
    }
    assert plain.inputs is None and plain.as_json() == {
        "name": "plain-2",
        "secret_env": "BRANCHLINE_SECRET_PLAIN",
    }


def test_a_recipe_without_hooks_has_none() -> None:
    assert graph(step("s")).webhooks == ()
    assert graph(step("s"), webhooks=[]).webhooks == ()


@pytest.mark.parametrize(
    ("webhooks", "expected"),
    [
        ({"name": "x"}, "webhooks: must be a list of hooks, got dict"),
        (["x"], "webhooks[0]: must be an object, got a string"),
        (
            [{"name": "Bad Name", "secret_env": "BRANCHLINE_SECRET_S"}],
            "webhooks[0].name: must be up to 100 of a-z, 0-9, - and _ (it ends the hook's "
            "address), starting with a letter or digit, got 'Bad Name'",
        ),
        (
            [{"name": "a/b", "secret_env": "BRANCHLINE_SECRET_S"}],
            "webhooks[0].name: must be up to 100 of a-z, 0-9, - and _ (it ends the hook's "
            "address), starting with a letter or digit, got 'a/b'",
        ),
        (
            [
                {"name": "a", "secret_env": "BRANCHLINE_SECRET_S"},
                {"name": "a", "secret_env": "BRANCHLINE_SECRET_T"},
            ],
            "webhooks[1].name: duplicate hook name 'a' (also webhooks[0])",
        ),
        (
            [{"name": "a", "secret_env": "lower-case"}],
            f"webhooks[0].secret_env: {NOT_A_RECIPE_SECRET}",
        ),
        (
            # Not a recipe's to read: the server's own settings, whatever they hold.
            [{"name": "a", "secret_env": "SECRET_KEY"}],
            f"webhooks[0].secret_env: {NOT_A_RECIPE_SECRET}",
        ),
        (
            [{"name": "a", "secret_env": "DATABASE_URL"}],
            f"webhooks[0].secret_env: {NOT_A_RECIPE_SECRET}",
        ),
        (
            [{"name": "a"}],
            "webhooks[0].secret_env: must name an env var beginning with BRANCHLINE_SECRET_",
        ),
        (
            [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "secret": "whsec_x"}],
            "webhooks[0].secret: unknown field; expected one of: name, secret_env, inputs",
        ),
        (
            [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": "topic"}],
            "webhooks[0].inputs: must be an object of input name: JMESPath expression, got a "
            "string",
        ),
        (
            [
                {
                    "name": "a",
                    "secret_env": "BRANCHLINE_SECRET_S",
                    "inputs": {"title": "issue.title"},
                }
            ],
            "webhooks[0].inputs.title: not an input of the recipe; declared: count, topic",
        ),
        (
            [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"topic": 3}}],
            "webhooks[0].inputs.topic: must be a JMESPath expression (text), got 3",
        ),
        (
            [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"topic": "issue.["}}],
            "webhooks[0].inputs.topic: not a JMESPath expression: ",
        ),
        (
            [
                {
                    "name": "a",
                    "secret_env": "BRANCHLINE_SECRET_S",
                    "inputs": {"count": "size(items)"},
                }
            ],
            "webhooks[0].inputs.count: unknown function size(); JMESPath has abs, ",
        ),
        (
            [
                {
                    "name": "a",
                    "secret_env": "BRANCHLINE_SECRET_S",
                    "inputs": {"count": "length(a, b)"},
                }
            ],
            "webhooks[0].inputs.count: length() takes 1 argument, got 2",
        ),
        (
            [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"topic": "not_null()"}}],
            "webhooks[0].inputs.topic: not_null() takes at least 1 argument, got 0",
        ),
    ],
)
def test_it_refuses_a_hook_that_is_wrong_at_its_path(webhooks: Any, expected: str) -> None:
    found = errors(webhooks)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_it_maps_a_payload_through_the_expressions() -> None:
    (hook,) = hooks(
        {
            "name": "a",
            "secret_env": "BRANCHLINE_SECRET_S",
            "inputs": {"topic": "issue.title", "count": "length(issue.labels)"},
        }
    )

    assert map_payload(hook, {"issue": {"title": "t", "labels": ["x", "y"]}}) == {
        "topic": "t",
        "count": 2,
    }
    # What an expression does not find is left out: the input's default or `required` applies.
    assert map_payload(hook, {"issue": {"labels": []}}) == {"count": 0}


def test_it_names_the_input_whose_expression_fails_on_the_payload() -> None:
    (hook,) = hooks(
        {"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"count": "length(n)"}}
    )

    with pytest.raises(PayloadUnmapped) as caught:
        map_payload(hook, {"n": 5})

    (error,) = caught.value.errors
    assert error.startswith("inputs.count: 'length(n)' failed on the payload: In function length()")


def test_a_hook_without_inputs_takes_the_payload_object_whole() -> None:
    (hook,) = hooks({"name": "a", "secret_env": "BRANCHLINE_SECRET_S"})

    assert map_payload(hook, {"topic": "t", "extra": 1}) == {"topic": "t", "extra": 1}
    with pytest.raises(PayloadUnmapped):
        map_payload(hook, "topic")


def test_an_expression_doubling_the_payload_at_each_level_is_refused_quickly_by_name() -> None:
    bomb = "|".join(["to_string([@,@])"] * 30)  # valid: the recipe is read
    (hook,) = hooks({"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"topic": bomb}})
    started = time.monotonic()

    with pytest.raises(PayloadUnmapped) as caught:
        map_payload(hook, {"issue": "x"})

    assert caught.value.errors == [
        f"inputs.topic: {bomb!r} failed on the payload: the expression builds a value of more "
        "than 200000 characters of JSON"
    ]
    assert time.monotonic() - started < 1


def test_an_expression_nested_too_deeply_is_refused_at_its_path() -> None:
    nested = "@"
    for _ in range(45):
        nested = f"not_null({nested})"

    assert errors(
        [{"name": "a", "secret_env": "BRANCHLINE_SECRET_S", "inputs": {"topic": nested}}]
    ) == [
        "webhooks[0].inputs.topic: not a JMESPath expression: the expression nests more "
        "than 40 levels deep"
    ]
