"""A recipe's callbacks: read from the document, each mistake an error naming its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import CALLBACK_EVENT_TYPES, Callback, RecipeInvalid, parse_recipe

URL = "https://hooks.example.com/branchline?team=7"


def test_it_reads_the_callbacks_in_order() -> None:
    parsed = graph(
        step("s"),
        callbacks=[
            {
                "on": ["run.finished", "run.finished"],
                "url": URL,
                "secret_env": "BRANCHLINE_SECRET_HOOK",
            },
            {
                "on": ["human_task.created"],
                "url": "http://10.0.0.7/hook",
                "secret_env": "BRANCHLINE_SECRET_B2",
            },
        ],
    )
    assert parsed.callbacks == (
        Callback(on=("run.finished",), url=URL, secret_env="BRANCHLINE_SECRET_HOOK"),
        Callback(
            on=("human_task.created",),
            url="http://10.0.0.7/hook",
            secret_env="BRANCHLINE_SECRET_B2",
        ),
    )
    assert parsed.callbacks[0].listens_to("run.finished")
    assert not parsed.callbacks[0].listens_to("step.finished")


@pytest.mark.parametrize("empty", [None, []])
def test_a_recipe_without_callbacks_tells_nobody(empty: object) -> None:
    assert graph(step("s"), callbacks=empty).callbacks == ()
    assert graph(step("s")).callbacks == ()


def test_every_stored_event_type_may_be_listened_to() -> None:
    assert {"run.finished", "human_task.created", "step.finished"} <= set(CALLBACK_EVENT_TYPES)
    assert "step.token" not in CALLBACK_EVENT_TYPES  # streamed, never stored


# Publish refuses any other name (workflows/engine/secrets.py), without repeating it.
NOT_A_RECIPE_SECRET = (
    "not a recipe secret: a recipe reads only env vars named BRANCHLINE_SECRET_NAME (capitals, "
    "digits and _), which the server's operator sets aside for recipes"
)
GOOD: dict[str, Any] = {"on": ["run.finished"], "url": URL, "secret_env": "BRANCHLINE_SECRET_HOOK"}


@pytest.mark.parametrize(
    ("callbacks", "errors"),
    [
        ({"on": ["run.finished"]}, ["callbacks: must be a list of callbacks, got dict"]),
        (
            ["https://x.example"],
            ["callbacks[0]: must be an object with on, url and secret_env, got str"],
        ),
        (
            [GOOD, {**GOOD, "on": ["run.finished", "run.done"]}],
            [
                "callbacks[1].on[1]: unknown event type 'run.done'; expected one of: "
                + ", ".join(sorted(CALLBACK_EVENT_TYPES))
            ],
        ),
        (
            [{**GOOD, "on": ["step.token"]}],
            [
                "callbacks[0].on[0]: unknown event type 'step.token'; expected one of: "
                + ", ".join(sorted(CALLBACK_EVENT_TYPES))
            ],
        ),
        ([{**GOOD, "on": []}], ["callbacks[0].on: must be a non-empty list of event types"]),
        (
            [{**GOOD, "on": "run.finished"}],
            ["callbacks[0].on: must be a non-empty list of event types"],
        ),
        (
            [{"url": URL, "secret_env": "BRANCHLINE_SECRET_S"}],
            ['callbacks[0].on: is required: the event types to send, e.g. ["run.finished"]'],
        ),
        ([{**GOOD, "url": None}], ["callbacks[0].url: is required"]),
        (
            [{**GOOD, "url": "ftp://files.example/x"}],
            ["callbacks[0].url: scheme must be http or https, not 'ftp'"],
        ),
        (
            [{**GOOD, "url": "hooks.example.com/x"}],
            ["callbacks[0].url: scheme must be http or https, not 'missing'"],
        ),
        ([{**GOOD, "url": "https:///x"}], ["callbacks[0].url: has no host"]),
        (
            [{**GOOD, "url": "https://user:pw@hooks.example.com/"}],
            [
                "callbacks[0].url: must not contain credentials; the secret's env var is named "
                "by secret_env"
            ],
        ),
        (
            [{**GOOD, "url": "https://hooks.example.com/a b"}],
            ["callbacks[0].url: must not contain whitespace, control characters or backslashes"],
        ),
        (
            [{**GOOD, "url": "https://hooks.example.com:99999/"}],
            ["callbacks[0].url: cannot be parsed: Port out of range 0-65535"],
        ),
        (
            [{**GOOD, "secret_env": None}],
            ["callbacks[0].secret_env: is required: the name of the env var holding the secret"],
        ),
        (
            [{**GOOD, "secret_env": "whsec_abc=="}],
            [f"callbacks[0].secret_env: {NOT_A_RECIPE_SECRET}"],
        ),
        (
            # Not a recipe's to read: the server's own settings, another hook's secret.
            [{**GOOD, "secret_env": "SECRET_KEY"}],
            [f"callbacks[0].secret_env: {NOT_A_RECIPE_SECRET}"],
        ),
        (
            [{**GOOD, "secret": "whsec_abc"}],
            ["callbacks[0].secret: unknown field; expected on, url and secret_env"],
        ),
        ([GOOD] * 21, ["callbacks: a recipe has at most 20 callbacks, got 21"]),
    ],
)
def test_it_refuses_a_bad_callback_naming_its_path(callbacks: object, errors: list[str]) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("s"), callbacks=callbacks))
    assert caught.value.errors == errors
