"""The http step kind: its request read from the document, each bad field reported at its
path; secrets only where they are sent and only when listed; a dry run's answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import graph, recipe
from workflows.engine import RecipeInvalid, parse_recipe, read_script_http
from workflows.engine.http_request import render_body

TOKEN = "BRANCHLINE_SECRET_API_TOKEN"
HOST_FROM_A_TEMPLATE = (
    "its scheme and host are written out, not taken from a template (placeholders go after "
    "the first /, ? or #)"
)


def fetch(**fields: Any) -> dict[str, Any]:
    return {"key": "fetch", "name": "Fetch", "kind": "http", "url": "https://x.test/a", **fields}


def errors(*steps: dict[str, Any]) -> list[str]:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(*steps))
    return raised.value.errors


def test_it_reads_the_request_with_its_defaults() -> None:
    step = graph(fetch()).steps[0]
    assert (step.method, step.url, step.retries) == ("GET", "https://x.test/a", 2)
    assert (step.headers, step.query, step.body, step.secret_env) == ({}, {}, None, ())
    assert step.actor is None


def test_it_reads_every_field_given() -> None:
    step = graph(
        fetch(
            method="post",
            url="https://api.example.com/items/{topic}?q={topic}#{topic}",
            headers={"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API_TOKEN}"},
            query={"q": "{topic}"},
            body={"name": "{topic}", "tags": ["{topic}", 3]},
            secret_env=["BRANCHLINE_SECRET_API_TOKEN"],
            retries=0,
            timeout_s=5,
        )
    ).steps[0]
    assert step.method == "POST"
    assert step.headers == {"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API_TOKEN}"}
    assert step.body == {"name": "{topic}", "tags": ["{topic}", 3]}
    assert (step.secret_env, step.retries, step.timeout_s) == (
        ("BRANCHLINE_SECRET_API_TOKEN",),
        0,
        5,
    )


def test_a_templated_method_is_kept_for_the_runner_to_check() -> None:
    assert graph(fetch(method="{topic}")).steps[0].method == "{topic}"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"url": None}, "steps[0].url: is required"),
        ({"url": "ftp://x.test/"}, "steps[0].url: must begin with http:// or https://"),
        ({"url": "{topic}/path"}, "steps[0].url: must begin with http:// or https://"),
        ({"url": "https:///path"}, "steps[0].url: has no host"),
        ({"url": "https://x.test/{nope}"}, "steps[0].url: unknown template name 'nope'"),
        ({"method": "FETCH"}, "steps[0].method: must be one of GET, POST, PUT, PATCH"),
        ({"method": 3}, "steps[0].method: must be one of"),
        ({"body": "hello"}, "steps[0].body: a GET request has no body; use query instead"),
        ({"headers": {"Bad Name": "x"}}, "steps[0].headers.Bad Name: 'Bad Name' is not a header"),
        ({"headers": {"Host": "x"}}, "steps[0].headers.Host: Host is set by the request itself"),
        ({"headers": {"X": 3}}, "steps[0].headers.X: must be a template (text), got int"),
        ({"headers": ["x"]}, "steps[0].headers: must be an object, got list"),
        (
            {"query": {"q": f"{{secrets.{TOKEN}}}"}},
            f"steps[0].query.q: {{secrets.{TOKEN}}}: add {TOKEN} to",
        ),
        (
            {"headers": {"A": "{secrets.BRANCHLINE_SECRET_B}"}, "secret_env": [TOKEN]},
            "steps[0].headers.A: {secrets.BRANCHLINE_SECRET_B}: add BRANCHLINE_SECRET_B to the "
            f"step's secret_env (it lists {TOKEN})",
        ),
        (
            {"method": "POST", "body": {"k": [f"{{secrets.{TOKEN}}}"]}},
            f"steps[0].body.k[0]: {{secrets.{TOKEN}}}: add {TOKEN}",
        ),
        (
            {"headers": {"A": "{secrets.SECRET_KEY}"}},
            "steps[0].headers.A: {secrets.SECRET_KEY}: not a recipe secret: a recipe reads only "
            "env vars named BRANCHLINE_SECRET_NAME",
        ),
        ({"secret_env": TOKEN}, "steps[0].secret_env: must be a list of env var names"),
        ({"secret_env": [f"{TOKEN}-B"]}, "steps[0].secret_env[0]: not a recipe secret"),
        ({"secret_env": [TOKEN, TOKEN]}, f"steps[0].secret_env[1]: {TOKEN} is listed twice"),
        ({"retries": 11}, "steps[0].retries: must be a whole number from 0 to 10, got 11"),
        ({"retries": -1}, "steps[0].retries: must be a whole number from 0 to 10"),
    ],
)
def test_it_reports_each_bad_field_at_its_path(fields: dict[str, Any], error: str) -> None:
    found = errors(fetch(**fields))
    assert any(e.startswith(error) for e in found), found


def test_secrets_are_refused_outside_an_http_steps_request() -> None:
    llm = {"key": "ask", "name": "Ask", "actor": "writer", "prompt": "Key: {secrets.TOKEN}"}
    assert errors(llm) == [
        "steps[0].prompt: {secrets.TOKEN} cannot be used here: secrets go only into an http "
        "step's url, headers, query and body"
    ]


def test_http_fields_on_another_kind_are_refused() -> None:
    llm = {"key": "ask", "name": "Ask", "actor": "writer", "url": "https://x.test"}
    assert errors(llm) == ["steps[0].url: an llm step has no url"]


def test_a_json_body_renders_each_string_on_its_own() -> None:
    rendered = render_body({"a": "{x}", "b": ["{x}", 2, None]}, lambda t: t.replace("{x}", '"q"'))
    assert rendered == {"a": '"q"', "b": ['"q"', 2, None]}
    assert render_body("plain {x}", lambda t: t.upper()) == "PLAIN {X}"


def test_a_script_answers_with_text_a_status_and_body_or_an_error() -> None:
    answers, problems = read_script_http(
        ["hello", {"status": 404, "body": {"error": "gone"}}, "@error: unreachable"], "script.x"
    )
    assert problems == []
    assert answers == [
        {"status": 200, "body": "hello", "headers": {}},
        {"status": 404, "body": '{"error": "gone"}', "headers": {}},
        {"error": "unreachable"},
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([], "script.x: must be a non-empty list of answers (text or {status, body})"),
        ([3], "script.x[0]: must be text or an object {status, body}"),
        ([{"status": 700}], "script.x[0].status: must be a status from 100 to 599, got 700"),
        ([{"code": 200}], "script.x[0]: unknown keys code (status, body, headers)"),
        ([{"headers": {"a": 1}}], "script.x[0].headers: must be an object of header name: text"),
    ],
)
def test_it_refuses_a_bad_scripted_answer(value: Any, problem: str) -> None:
    assert read_script_http(value, "script.x")[1] == [problem]


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "OPENAI_API_KEY", "api_token"])
def test_secret_env_may_name_only_a_recipes_secret(name: str) -> None:
    found = errors(fetch(headers={"A": f"{{secrets.{name}}}"}, secret_env=[name]))
    assert found[0] == (
        "steps[0].secret_env[0]: not a recipe secret: a recipe reads only env vars named "
        "BRANCHLINE_SECRET_NAME (capitals, digits and _), which the server's operator sets "
        "aside for recipes"
    )
    assert name not in found[0]


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com{path}",
        "https://{topic}.example.com/items",
        "https://{topic}/items",
        "http://api.example.com:{topic}/",
        "https://user:{secrets.BRANCHLINE_SECRET_API_TOKEN}@api.example.com/",
    ],
)
def test_the_urls_host_cannot_come_from_a_template(url: str) -> None:
    found = errors(fetch(url=url, secret_env=[TOKEN]))
    assert any(e.startswith(f"steps[0].url: {HOST_FROM_A_TEMPLATE}") for e in found), found
