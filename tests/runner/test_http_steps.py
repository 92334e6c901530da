"""Http steps in runs: real requests to a local server on loopback (allowed the way the other
runner tests allow their servers, through PROVIDER_URL_ALLOWLIST), each path through a run
started by the service and executed by the runner; and a dry run's scripted answers."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from runner import reruns, services
from runner.inputs import InputsInvalid
from runner.models import Run, RunEvent, StepRun
from runner.steps import http as http_executor
from tests.factories import UserFactory
from tests.runner.http_server import HttpTestServer
from tests.runner.recipes import branch, drive, publish_document, steps
from workflows.engine import parse_recipe
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-token-value-9f2c"


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="httpuser")


@pytest.fixture
def server(settings: Any) -> Iterator[HttpTestServer]:
    with HttpTestServer(slow_s=3.0) as server:
        settings.PROVIDER_URL_ALLOWLIST = [server.address]
        yield server


def http_step(key: str, url: str, **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key,
        "kind": "http",
        "url": url,
        "branches": fields.pop("branches", []),
        **fields,
    }


def publish(owner: Any, steps: list[dict[str, Any]], slug: str = "calls") -> Recipe:
    document = {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"item": {"type": "string", "default": "lamp"}},
        "actors": {},
        "steps": steps,
    }
    return publish_document(owner, document)


def run(owner: Any, recipe: Recipe, script: Any = None) -> Run:
    return drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))


def reasons(step_run: StepRun) -> dict[str, str]:
    return {e.branch: e.reason for e in step_run.evaluations.all()}


ERROR = {"type": "execution_error", "operator": "equals", "value": True}


def test_a_json_answer_becomes_the_facts_a_field_compare_branch_reads(
    owner: Any, server: HttpTestServer
) -> None:
    many = {"type": "field_compare", "operator": "greater_equal", "field": "count", "value": 5}
    ok = {"type": "http_status", "operator": "is", "value": "2xx"}
    recipe = publish(
        owner,
        [
            http_step(
                "fetch",
                server.url("/json"),
                query={"item": "{item}"},
                branches=[
                    branch("many", 1, {"type": "and", "conditions": [ok, many]}, "report"),
                    branch("few", 2, {"type": "default"}, "@end", action="END_RECIPE"),
                ],
            ),
            http_step(
                "report",
                server.url("/echo"),
                method="POST",
                body={"seen": "{steps.fetch.response}", "item": "{item}"},
            ),
        ],
    )

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    fetch, report = steps(done)["fetch"], steps(done)["report"]
    assert json.loads(fetch.response) == {"count": 7, "name": "widget"}
    assert reasons(fetch)["many"] == "and: [status 200 is 2xx; field count 7 >= 5]"
    assert server.received("/json")[0].query == {"item": "lamp"}
    # The JSON body's strings were rendered one by one: the answer's quotes stay JSON.
    echoed = json.loads(server.received("/echo")[0].body)
    assert echoed == {"seen": fetch.response, "item": "lamp"}
    record = fetch.details["http"]
    assert record["request"]["method"] == "GET"
    assert record["request"]["url"] == server.url("/json?item=lamp")
    assert record["status"] == 200
    assert record["bytes"] == len(fetch.response)
    assert record["content_type"] == "application/json"
    assert [a["status"] for a in record["attempts"]] == [200]
    assert record["latency_ms"] >= 0 and fetch.latency_ms == record["latency_ms"]
    assert fetch.prompt == f"GET {server.url('/json?item=lamp')}"
    assert json.loads(report.response)["headers"]["Content-Type"] == "application/json"


def test_a_text_answer_is_the_response(owner: Any, server: HttpTestServer) -> None:
    words = {"type": "pattern_match", "operator": "contains", "value": "plain words"}
    recipe = publish(
        owner,
        [http_step("read", server.url("/text"), branches=[branch("said", 1, words, "@complete")])],
    )

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    read = steps(done)["read"]
    assert read.response == "plain words from the server"
    assert read.details["http"]["content_type"] == "text/plain; charset=utf-8"


def test_a_429_is_sent_again_after_the_wait_its_retry_after_asks_for(
    owner: Any, server: HttpTestServer
) -> None:
    recipe = publish(owner, [http_step("limited", server.url("/limited"), timeout_s=10)])

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    limited = steps(done)["limited"]
    assert json.loads(limited.response) == {"ok": True}
    first, second = server.received("/limited")
    assert second.at - first.at >= 1.0
    attempts = limited.details["http"]["attempts"]
    assert [a["status"] for a in attempts] == [429, 200]
    assert attempts[0]["waited_s"] == 1


def test_a_retry_after_beyond_the_steps_timeout_fails_the_step_at_once(
    owner: Any, server: HttpTestServer
) -> None:
    recipe = publish(owner, [http_step("limited", server.url("/limited?after=120"), timeout_s=5)])

    done = run(owner, recipe)

    assert done.status == "failed"
    limited = steps(done)["limited"]
    assert limited.error == (
        f"GET {server.url('/limited?after=120')} answered 429 and asked to retry after 120 s, "
        "beyond the step's timeout of 5 s"
    )
    assert len(server.received("/limited")) == 1


def test_a_500_is_retried_then_fails_the_step_and_an_error_branch_handles_it(
    owner: Any, server: HttpTestServer
) -> None:
    five = {"type": "http_status", "operator": "is", "value": "5xx"}
    recipe = publish(
        owner,
        [
            http_step(
                "call",
                server.url("/broken"),
                retries=2,
                branches=[branch("down", 1, five, "fallback", action="ERROR_HANDLER")],
            ),
            http_step("fallback", server.url("/text")),
        ],
    )

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    assert done.outcome == "error_handled"
    call = steps(done)["call"]
    assert call.status == "failed"
    assert call.error == f"GET {server.url('/broken')} answered 500: it broke"
    assert call.response == ""
    assert [a["status"] for a in call.details["http"]["attempts"]] == [500, 500, 500]
    assert len(server.received("/broken")) == 3
    assert reasons(call)["down"] == "status 500 is 5xx"
    assert steps(done)["fallback"].response == "plain words from the server"

    # Without a branch that asks about it, the failed request fails the run.
    unhandled = publish(owner, [http_step("call", server.url("/broken"), retries=0)], "bare")
    failed = run(owner, unhandled)
    assert failed.status == "failed"
    assert "answered 500" in failed.error


def test_a_server_slower_than_the_timeout_times_the_step_out(
    owner: Any, server: HttpTestServer
) -> None:
    late = {"type": "execution_timeout", "operator": "equals", "value": True}
    recipe = publish(
        owner,
        [
            http_step(
                "slow",
                server.url("/slow"),
                timeout_s=1,
                branches=[branch("late", 1, late, "@end", action="END_RECIPE")],
            )
        ],
    )

    done = run(owner, recipe)

    slow = steps(done)["slow"]
    assert slow.status == "timed_out"
    assert (
        slow.error == f"GET {server.url('/slow')} did not answer within the step's timeout of 1 s"
    )
    assert slow.latency_ms < 2500
    assert done.status == "ended"
    assert reasons(slow)["late"] == "step timed out"


@pytest.mark.parametrize("path", ["/huge", "/huge?chunked=1"])
def test_a_response_past_the_size_cap_fails_the_step_and_nothing_of_it_is_kept(
    owner: Any, server: HttpTestServer, settings: Any, path: str
) -> None:
    settings.HTTP_STEP_MAX_RESPONSE_BYTES = 10_000
    recipe = publish(
        owner, [http_step("big", server.url(path), branches=[branch("e", 1, ERROR, "@end")])]
    )

    done = run(owner, recipe)

    big = steps(done)["big"]
    assert big.status == "failed"
    assert big.error == (
        "the response is larger than 10000 bytes (HTTP_STEP_MAX_RESPONSE_BYTES); nothing of it "
        "was kept"
    )
    assert big.response == ""
    assert "xxxx" not in json.dumps(big.details)
    assert big.details["http"]["status"] is None


def test_a_redirect_to_a_private_address_that_is_not_allowed_is_refused(
    owner: Any, server: HttpTestServer
) -> None:
    with HttpTestServer() as inner:  # on loopback, but not in the allowlist
        target = inner.url("/json")
        recipe = publish(
            owner,
            [
                http_step(
                    "hop",
                    server.url(f"/redirect?to={target}"),
                    branches=[branch("refused", 1, ERROR, "@end", action="END_RECIPE")],
                ),
                http_step("meta", server.url("/redirect?to=http://169.254.169.254/latest")),
            ],
        )

        done = run(owner, recipe)

        hop = steps(done)["hop"]
        assert hop.status == "failed"
        assert hop.error == (
            f"redirect 1 to {target}: url refused: 127.0.0.1, a loopback address; add it to "
            "PROVIDER_URL_ALLOWLIST to allow it"
        )
        assert inner.requests == []
        assert len(hop.details["http"]["attempts"]) == 1  # refused: not worth retrying

    link_local = publish(
        owner,
        [http_step("meta", server.url("/redirect?to=http://169.254.169.254/latest"))],
        "meta",
    )
    failed = run(owner, link_local)
    assert failed.status == "failed"
    assert "169.254.169.254" in failed.error and "link-local" in failed.error


def test_a_url_the_guard_refuses_fails_the_step_with_the_reason(owner: Any, settings: Any) -> None:
    settings.PROVIDER_URL_ALLOWLIST = []
    recipe = publish(owner, [http_step("inner", "http://127.0.0.1:9/admin")])

    done = run(owner, recipe)

    inner = steps(done)["inner"]
    assert inner.status == "failed"
    assert inner.error == (
        "url refused: 127.0.0.1, a loopback address; add it to PROVIDER_URL_ALLOWLIST to allow it"
    )


def test_a_secret_is_sent_but_never_stored_shown_or_exported(
    owner: Any, server: HttpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRANCHLINE_SECRET_HTTP_TEST_TOKEN", SECRET)
    recipe = publish(
        owner,
        [
            http_step(
                "auth",
                server.url("/echo"),
                headers={
                    "Authorization": "Bearer {secrets.BRANCHLINE_SECRET_HTTP_TEST_TOKEN}",
                    "X-Item": "{item}",
                },
                query={"key": "{secrets.BRANCHLINE_SECRET_HTTP_TEST_TOKEN}"},
                secret_env=["BRANCHLINE_SECRET_HTTP_TEST_TOKEN"],
            ),
            http_step(
                "next",
                server.url("/echo"),
                method="POST",
                body="{steps.auth.response}",
            ),
        ],
    )

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    sent = server.received("/echo")[0]
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"
    assert sent.query == {"key": SECRET}
    auth = steps(done)["auth"]
    assert auth.details["http"]["request"]["headers"] == {
        "Authorization": "Bearer ***",
        "X-Item": "lamp",
    }
    assert auth.details["http"]["request"]["url"] == server.url("/echo?key=***")
    # The server echoed the secret back: the answer keeps it redacted, so later steps and
    # the facts never see it either.
    assert json.loads(auth.response)["headers"]["Authorization"] == "Bearer ***"
    assert SECRET not in server.received("/echo")[1].body.decode()

    client = Client()
    client.force_login(owner)
    shown = [
        client.get(f"/api/runs/{done.pk}/").content.decode(),
        client.get(f"/api/runs/{done.pk}/events").content.decode(),
        client.get(f"/api/recipes/{recipe.slug}/export").content.decode(),
        client.get(f"/runs/{done.pk}/").content.decode(),
    ]
    stored = [
        json.dumps(list(StepRun.objects.filter(run=done).values()), default=str),
        json.dumps(list(RunEvent.objects.filter(run=done).values("data")), default=str),
        json.dumps(Run.objects.filter(pk=done.pk).values().get(), default=str),
    ]
    for text in shown + stored:
        assert SECRET not in text
    assert (
        "BRANCHLINE_SECRET_HTTP_TEST_TOKEN" in shown[2]
    )  # the export names the env var, not its value
    # The monitor shows the request as it was recorded.
    assert f"GET {server.url('/echo?key=***')}" in shown[3]
    assert "Authorization: Bearer ***" in shown[3]


def test_a_missing_secret_env_var_fails_the_step_naming_it(
    owner: Any, server: HttpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRANCHLINE_SECRET_HTTP_TEST_ABSENT", raising=False)
    recipe = publish(
        owner,
        [
            http_step(
                "auth",
                server.url("/echo"),
                headers={"Authorization": "{secrets.BRANCHLINE_SECRET_HTTP_TEST_ABSENT}"},
                secret_env=["BRANCHLINE_SECRET_HTTP_TEST_ABSENT"],
            )
        ],
    )

    done = run(owner, recipe)

    assert done.status == "failed"
    assert (
        steps(done)["auth"].error
        == "secret_env: env var BRANCHLINE_SECRET_HTTP_TEST_ABSENT is not set"
    )
    assert server.requests == []


def test_a_header_value_that_cannot_be_sent_fails_the_step_naming_the_header(
    owner: Any, server: HttpTestServer
) -> None:
    recipe = publish(owner, [http_step("fetch", server.url("/json"), headers={"X-Item": "{item}"})])

    done = drive(services.run_start(user=owner, recipe=recipe, inputs={"item": "café"}))

    assert done.status == "failed"
    assert steps(done)["fetch"].error == "headers.X-Item: its value is not ASCII text"
    assert server.requests == []


# -- dry runs -----------------------------------------------------------------------------------


def test_a_script_answers_an_http_step_with_a_status_and_a_body(owner: Any) -> None:
    many = {"type": "field_compare", "operator": "greater_than", "field": "count", "value": 3}
    recipe = publish(
        owner,
        [
            http_step(
                "fetch",
                "https://api.example.com/items",
                headers={"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_NOT_SET_HERE}"},
                secret_env=["BRANCHLINE_SECRET_NOT_SET_HERE"],
                branches=[branch("many", 1, many, "@complete", action="QUALITY_APPROVED")],
            )
        ],
    )

    done = run(
        owner,
        recipe,
        script={"http.fetch": [{"status": 503}, {"status": 200, "body": {"count": 9}}]},
    )

    assert done.status == "succeeded", done.error
    assert done.outcome == "approved"
    fetch = steps(done)["fetch"]
    assert json.loads(fetch.response) == {"count": 9}
    record = fetch.details["http"]
    assert record["scripted"] is True
    assert record["request"]["headers"] == {"Authorization": "Bearer ***"}
    assert [a["status"] for a in record["attempts"]] == [503, 200]


def test_a_script_for_a_step_that_is_not_an_http_step_is_refused(owner: Any) -> None:
    recipe = publish(owner, [http_step("fetch", "https://api.example.com/items")])

    with pytest.raises(InputsInvalid) as raised:
        services.run_start(
            user=owner,
            recipe=recipe,
            inputs={},
            script={"http.nope": ["x"], "http.fetch": [{"status": 42}]},
        )

    assert raised.value.errors == [
        "script.http.nope: no step 'nope' of this recipe is an http step",
        "script.http.fetch[0].status: must be a status from 100 to 599, got 42",
    ]


def test_a_fork_goes_on_in_the_scripts_http_answers_where_its_parent_was(owner: Any) -> None:
    again = {"type": "pattern_match", "operator": "contains", "value": "again"}
    recipe = publish(
        owner,
        [
            http_step(
                "poll",
                "https://api.example.com/status",
                branches=[branch("again", 1, again, "@repeat", params={"max_retries": 1})],
            )
        ],
    )
    parent = run(owner, recipe, script={"http.poll": ["ask again", "ready"]})
    assert [s.response for s in parent.steps.order_by("seq")] == ["ask again", "ready"]

    fork = drive(reruns.run_fork(user=owner, run=parent, at_seq=2))

    assert fork.status == "succeeded", fork.error
    # The parent's first request had taken the script's first answer: the fork's is the second.
    assert fork.steps.get(seq=2).response == "ready"


def test_a_redirect_to_another_allowed_origin_is_followed_without_the_secret_headers(
    owner: Any, server: HttpTestServer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRANCHLINE_SECRET_HTTP_TEST_TOKEN", SECRET)
    with HttpTestServer() as other:
        settings.PROVIDER_URL_ALLOWLIST = [server.address, other.address]
        target = other.url("/echo")
        recipe = publish(
            owner,
            [
                http_step(
                    "hop",
                    server.url(f"/redirect?to={target}"),
                    headers={
                        "X-Token": "{secrets.BRANCHLINE_SECRET_HTTP_TEST_TOKEN}",
                        "X-Item": "{item}",
                    },
                    secret_env=["BRANCHLINE_SECRET_HTTP_TEST_TOKEN"],
                )
            ],
        )

        done = run(owner, recipe)

        assert done.status == "succeeded", done.error
        first, followed = server.received("/redirect")[0], other.received("/echo")[0]
        assert first.headers["X-Token"] == SECRET
        assert "X-Token" not in followed.headers
        assert followed.headers["X-Item"] == "lamp"
        assert steps(done)["hop"].details["http"]["redirects"] == [target]


# -- what review found ----------------------------------------------------------------------


def test_a_step_stored_with_another_env_var_is_refused_and_the_var_never_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Publish refuses such a name (tests/engine/test_http_step.py); a step that has one anyway
    # (a recipe stored before the rule) fails without reading the variable.
    document = {
        "format": "branchline.recipe/v1",
        "slug": "old",
        "name": "old",
        "actors": {},
        "steps": [http_step("leak", "https://api.example.com/x")],
    }
    step = dataclasses.replace(parse_recipe(document).steps[0], secret_env=("SECRET_KEY",))
    read: list[str] = []
    real_get = os.environ.get

    def get(name: str, default: Any = None) -> Any:
        read.append(name)
        return real_get(name, default)

    monkeypatch.setenv("SECRET_KEY", SECRET)
    monkeypatch.setattr(os.environ, "get", get)

    for scripted in (False, True):
        with pytest.raises(http_executor._Failed) as raised:
            http_executor._secrets(step, scripted=scripted)
        assert str(raised.value).startswith("secret_env: not a recipe secret")
        assert SECRET not in str(raised.value)
    assert "SECRET_KEY" not in read


def test_a_gzip_body_is_capped_by_its_decoded_size(
    owner: Any, server: HttpTestServer, settings: Any
) -> None:
    settings.HTTP_STEP_MAX_RESPONSE_BYTES = 100_000
    recipe = publish(
        owner,
        [
            http_step("small", server.url("/gzip?bytes=5000")),
            # 10 MB of x: about 10 KB on the wire.
            http_step("bomb", server.url("/gzip"), branches=[branch("e", 1, ERROR, "@end")]),
        ],
    )

    done = run(owner, recipe)

    small, bomb = steps(done)["small"], steps(done)["bomb"]
    assert small.response == "x" * 5000 and small.details["http"]["bytes"] == 5000
    assert bomb.status == "failed"
    assert bomb.error == (
        "the response is larger than 100000 bytes (HTTP_STEP_MAX_RESPONSE_BYTES); nothing of it "
        "was kept"
    )
    assert bomb.response == "" and "xxxx" not in json.dumps(bomb.details)


@pytest.mark.parametrize("status", [307, 308])
def test_a_body_holding_a_secret_does_not_follow_a_redirect_to_another_origin(
    owner: Any,
    server: HttpTestServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
) -> None:
    monkeypatch.setenv("BRANCHLINE_SECRET_HTTP_TEST_TOKEN", SECRET)
    with HttpTestServer() as other:
        settings.PROVIDER_URL_ALLOWLIST = [server.address, other.address]
        target = other.url("/echo")
        hop = server.url(f"/redirect?status={status}&to={target}")
        recipe = publish(
            owner,
            [
                http_step(
                    "secret",
                    hop,
                    method="POST",
                    body={"token": "{secrets.BRANCHLINE_SECRET_HTTP_TEST_TOKEN}"},
                    secret_env=["BRANCHLINE_SECRET_HTTP_TEST_TOKEN"],
                    branches=[branch("e", 1, ERROR, "plain")],
                ),
                # A body without a secret follows it, as before.
                http_step("plain", hop, method="POST", body={"item": "{item}"}),
            ],
        )

        done = run(owner, recipe)

        secret, plain = steps(done)["secret"], steps(done)["plain"]
        assert secret.status == "failed"
        assert secret.error == (
            f"redirect 1 to {target} is to another origin and would send the body again, with "
            "the secrets it holds; not followed"
        )
        assert json.loads(server.received("/redirect")[0].body) == {"token": SECRET}
        assert plain.status == "succeeded", plain.error
        (followed,) = other.received("/echo")
        assert json.loads(followed.body) == {"item": "lamp"}


def test_a_secret_in_the_urls_path_is_redacted_as_httpx_encodes_it(
    owner: Any, server: HttpTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRANCHLINE_SECRET_HTTP_TEST_PATH", "ab c/d")
    recipe = publish(
        owner,
        [
            http_step(
                "path",
                server.url("/files/{secrets.BRANCHLINE_SECRET_HTTP_TEST_PATH}"),
                secret_env=["BRANCHLINE_SECRET_HTTP_TEST_PATH"],
                branches=[branch("e", 1, ERROR, "@end")],
            )
        ],
    )

    done = run(owner, recipe)

    assert server.requests[0].path == "/files/ab%20c/d"
    path = steps(done)["path"]
    assert path.details["http"]["request"]["url"] == server.url("/files/***")
    assert path.prompt == f"GET {server.url('/files/***')}"
    assert path.error == f"GET {server.url('/files/***')} answered 404: no such route"
    assert "ab%20c" not in json.dumps(path.details) + path.error


def test_a_steps_own_content_type_in_any_case_is_the_only_one(
    owner: Any, server: HttpTestServer
) -> None:
    recipe = publish(
        owner,
        [
            http_step(
                "csv",
                server.url("/echo"),
                method="POST",
                headers={"content-type": "text/csv"},
                body="a,b\n{item},2",
            )
        ],
    )

    done = run(owner, recipe)

    assert done.status == "succeeded", done.error
    sent = server.received("/echo")[0]
    assert [(k, v) for k, v in sent.headers.items() if k.lower() == "content-type"] == [
        ("content-type", "text/csv")
    ]
    assert sent.body == b"a,b\nlamp,2"
