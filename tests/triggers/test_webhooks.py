"""Inbound webhooks: a request signed with the standardwebhooks library's own signer starts a
run of the recipe's owner, through real HTTP requests; forged, stale and replayed ones are
refused with nothing written; repeats get their run back; size, rate and inputs are checked."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import Client

from runner.models import Run
from runner.status import RunStatus
from tests.factories import UserFactory
from tests.runner.recipes import drive, publish_document
from tests.triggers.hooks import (
    OTHER_SECRET,
    PLAIN_ENV,
    SECRET,
    SECRET_ENV,
    hooked_document,
    own_rate_counters,
    signed,
)
from triggers.models import WebhookDelivery
from triggers.webhooks import services
from triggers.webhooks.selectors import curl_example
from triggers.webhooks.services import hook_secrets as read_hook_secrets
from workflows.engine import parse_recipe
from workflows.engine.webhooks import WebhookSpec
from workflows.models import Recipe
from workflows.services import recipe_import

__all__ = ["own_rate_counters"]

pytestmark = pytest.mark.django_db

URL = "/api/hooks/hooked/ticket"
TICKET = {"issue": {"title": "a lighthouse", "labels": ["bug"]}}


@pytest.fixture(autouse=True)
def hook_secrets(own_rate_counters: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks' secrets in their variables (and rate counters of this test's own)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(PLAIN_ENV, SECRET)


@pytest.fixture
def owner(actors: Any) -> Any:
    return UserFactory(username="hookowner")


@pytest.fixture
def hooked(owner: Any) -> Recipe:
    return publish_document(owner, hooked_document())


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False)


def post(client: Client, body: bytes, headers: dict[str, str], url: str = URL) -> Any:
    return client.post(url, data=body, content_type="application/json", headers=headers)


def written() -> tuple[int, int]:
    return Run.objects.count(), WebhookDelivery.objects.count()


def test_it_starts_a_run_of_the_owner_from_a_signed_delivery(
    client: Client, hooked: Recipe, owner: Any
) -> None:
    response = post(client, *signed(TICKET, msg_id="msg_first"))

    assert response.status_code == 201, response.content
    answer = response.json()
    run = Run.objects.get()
    assert answer["run"] == run.pk
    assert answer["url"] == f"http://testserver/api/runs/{run.pk}"
    assert answer["webhook_id"] == "msg_first" and answer["repeat"] is False
    assert run.created_by == owner and run.recipe == hooked
    assert run.inputs == {"topic": "a lighthouse", "tone": "calm"}
    delivery = WebhookDelivery.objects.get()
    assert (delivery.pk, delivery.run, delivery.status) == (answer["delivery"], run, "accepted")
    assert run.webhook_delivery.hook == "ticket"  # the run knows the hook it came from
    assert run.trigger == "webhook ticket, message msg_first"
    finished = drive(run)
    assert finished.status == RunStatus.SUCCEEDED
    assert "a lighthouse" in finished.steps.get().prompt


def test_it_takes_the_payload_as_the_inputs_when_the_hook_maps_none(
    client: Client, hooked: Recipe
) -> None:
    body, headers = signed({"topic": "tides", "tone": "bright"})

    response = post(client, body, headers, url="/api/hooks/hooked/plain")

    assert response.status_code == 201, response.content
    assert Run.objects.get().inputs == {"topic": "tides", "tone": "bright"}


def test_it_accepts_each_secret_of_a_variable_that_holds_several(
    client: Client, hooked: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, f"{OTHER_SECRET} {SECRET}")  # rotating: the new one first

    old = post(client, *signed(TICKET, secret=SECRET, msg_id="msg_old"))
    new = post(client, *signed(TICKET, secret=OTHER_SECRET, msg_id="msg_new"))

    assert (old.status_code, new.status_code) == (201, 201)
    assert Run.objects.count() == 2


@pytest.mark.parametrize(
    "weak",
    [
        "whsec_" + base64.b64encode(b"eight by").decode(),  # 8 bytes: too short a key
        SECRET + "!",  # a typo the library's lenient reading would skip
    ],
)
def test_a_secret_that_is_not_a_standard_webhooks_one_answers_503(
    client: Client, hooked: Recipe, monkeypatch: pytest.MonkeyPatch, weak: str
) -> None:
    monkeypatch.setenv(SECRET_ENV, f"{SECRET} {weak}")  # one bad secret of several is enough

    response = post(client, *signed(TICKET, secret=SECRET))

    assert response.status_code == 503, response.content
    assert "whsec_ and the base64 of at least 16 bytes" in response.json()["errors"][0]
    assert weak not in response.content.decode() and written() == (0, 0)


def test_a_hook_never_reads_an_env_var_that_is_not_a_recipe_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A version published before the rule, naming the server's own settings.
    monkeypatch.setenv("SECRET_KEY", SECRET)
    spec = WebhookSpec(name="old", secret_env="SECRET_KEY")

    assert read_hook_secrets(spec) == []  # the tab says "not set", a delivery is answered 503


def _forged(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return signed(body, secret=OTHER_SECRET)


def _tampered(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return body.replace(b"lighthouse", b"lightship"), headers


def _stale(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return signed(body, at=datetime.now(tz=UTC) - timedelta(minutes=6))


def _future(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return signed(body, at=datetime.now(tz=UTC) + timedelta(minutes=6))


def _unsigned(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return body, {}


def _garbled(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return body, {**headers, "webhook-signature": "v1 not-base64 v1,%%%"}


def _other_id(body: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    return body, {**headers, "webhook-id": "msg_someone_else"}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_forged, "webhook-signature: no signature matches the hook's secret"),
        (_tampered, "webhook-signature: no signature matches the hook's secret"),
        (_other_id, "webhook-signature: no signature matches the hook's secret"),
        (_stale, "webhook-timestamp: outside the tolerance of 5 minutes (timestamp too old)"),
        (_future, "webhook-timestamp: outside the tolerance of 5 minutes (timestamp too new)"),
        (_unsigned, "webhook-id: required (a Standard Webhooks signature)"),
        (_garbled, "webhook-signature: not a list of v1,BASE64 signatures"),
    ],
)
def test_it_refuses_a_request_whose_signature_does_not_hold_and_writes_nothing(
    client: Client, hooked: Recipe, change: Any, reason: str
) -> None:
    body, headers = change(*signed(TICKET))

    response = post(client, body, headers)

    assert response.status_code == 401
    assert reason in response.json()["errors"]
    assert written() == (0, 0)


def test_it_refuses_a_replayed_message_and_writes_nothing_more(
    client: Client, hooked: Recipe
) -> None:
    body, headers = signed(TICKET, msg_id="msg_once")
    assert post(client, body, headers).status_code == 201

    replayed = post(client, body, headers)

    assert replayed.status_code == 401
    assert "a replay" in replayed.json()["errors"][0]
    assert written() == (1, 1)


def test_a_repeat_of_an_accepted_message_gets_the_same_run(client: Client, hooked: Recipe) -> None:
    sent_at = datetime.now(tz=UTC) - timedelta(seconds=30)
    first = post(client, *signed(TICKET, msg_id="msg_again", at=sent_at))
    # The sender did not hear the answer and sends the message again, signed afresh.
    again = post(client, *signed(TICKET, msg_id="msg_again"))

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["run"] == first.json()["run"]
    assert again.json()["repeat"] is True
    assert written() == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_repeats_sent_at_once_start_one_run(actors: Any) -> None:
    publish_document(UserFactory(username="busyowner"), hooked_document())
    now = datetime.now(tz=UTC)
    # The sender's attempts, each signed at its own time: none is a replay of another.
    attempts = [signed(TICKET, msg_id="msg_busy", at=now - timedelta(seconds=i)) for i in range(4)]
    answers: list[Any] = []
    barrier = threading.Barrier(len(attempts))

    def send(body: bytes, headers: dict[str, str]) -> None:
        try:
            barrier.wait()
            answers.append(post(Client(), body, headers))
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=attempt) for attempt in attempts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201]
    assert len({a.json()["run"] for a in answers}) == 1
    assert written() == (1, 1)


def test_it_refuses_an_accepted_id_sent_again_with_another_payload(
    client: Client, hooked: Recipe
) -> None:
    sent_at = datetime.now(tz=UTC) - timedelta(seconds=30)
    assert post(client, *signed(TICKET, msg_id="msg_reused", at=sent_at)).status_code == 201

    other = post(client, *signed({"issue": {"title": "else"}}, msg_id="msg_reused"))

    assert other.status_code == 422
    assert other.json()["errors"] == [
        "webhook-id: this id was accepted before with another payload"
    ]
    assert written() == (1, 1)


def test_it_refuses_a_body_over_the_size_limit_with_413(
    client: Client, hooked: Recipe, settings: Any
) -> None:
    settings.WEBHOOK_MAX_BYTES = 100
    body, headers = signed({"issue": {"title": "x" * 200}})

    response = post(client, body, headers)

    assert response.status_code == 413
    assert response.json()["errors"] == ["$: the body is larger than 100 bytes"]
    assert written() == (0, 0)


def test_it_limits_each_hook_to_its_deliveries_a_minute(
    client: Client, hooked: Recipe, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.WEBHOOK_MAX_PER_MINUTE = 2
    # The counters are per minute: fixed 20 s into one, the deliveries cannot straddle two.
    minute_and_20_s = (time.time() // 60) * 60 + 20
    monkeypatch.setattr(services, "time", SimpleNamespace(time=lambda: minute_and_20_s))
    answers = [post(client, *signed(TICKET, msg_id=f"msg_{i}")) for i in range(3)]
    other_hook = post(
        client, *signed({"topic": "t"}, msg_id="msg_p"), url="/api/hooks/hooked/plain"
    )

    assert [a.status_code for a in answers] == [201, 201, 429]
    assert answers[2]["Retry-After"] == "40"
    assert answers[2].json()["errors"] == ["$: the hook takes 2 deliveries a minute"]
    assert other_hook.status_code == 201  # each hook has its own limit
    assert written() == (3, 3)


@pytest.mark.parametrize(
    ("url", "payload", "error"),
    [
        (URL, {"issue": {}}, "inputs.topic: required"),
        (URL, {"issue": {"title": 7}}, "inputs.topic: must be a string"),
        (
            "/api/hooks/hooked/plain",
            {"topic": "t", "colour": "red"},
            "inputs.colour: not an input of this recipe",
        ),
        (
            "/api/hooks/hooked/plain",
            ["topic"],
            "$: the payload must be a JSON object of the recipe's inputs (or the hook maps its "
            "fields with `inputs`), got a list",
        ),
    ],
)
def test_it_refuses_a_payload_that_does_not_give_the_inputs_naming_them(
    client: Client, hooked: Recipe, url: str, payload: Any, error: str
) -> None:
    body, headers = signed(json.dumps(payload))

    response = post(client, body, headers, url=url)

    assert response.status_code == 422
    assert response.json()["errors"] == [error]
    delivery = WebhookDelivery.objects.get()  # signed: recorded, refused, with the reason
    assert (delivery.status, delivery.http_status, delivery.error) == ("refused", 422, error)
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data"]
)
def test_it_reads_the_signed_bytes_whatever_the_content_type_says(
    client: Client, hooked: Recipe, content_type: str
) -> None:
    body, headers = signed(TICKET)

    response = client.post(URL, data=body, content_type=content_type, headers=headers)

    assert response.status_code == 201, response.content


def test_it_refuses_a_signed_body_that_is_not_json_with_400(client: Client, hooked: Recipe) -> None:
    response = post(client, *signed("{not json"))

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("$: the body is not JSON")
    assert WebhookDelivery.objects.get().http_status == 400
    assert Run.objects.count() == 0


def test_it_answers_each_unknown_or_unready_hook_clearly(
    client: Client, hooked: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe_import(user=owner, data=hooked_document(slug="draft-only"))
    body, headers = signed(TICKET)

    assert post(client, body, headers, url="/api/hooks/nothing/ticket").status_code == 404
    unknown = post(client, body, headers, url="/api/hooks/hooked/nope")
    assert unknown.status_code == 404
    assert unknown.json()["errors"] == [
        "name: no hook 'nope' in the published version 1 of 'hooked'"
    ]
    unpublished = post(client, body, headers, url="/api/hooks/draft-only/ticket")
    assert unpublished.status_code == 409
    monkeypatch.delenv(SECRET_ENV)
    unset = post(client, body, headers)
    assert unset.status_code == 503
    assert SECRET not in unset.content.decode()
    monkeypatch.setenv(SECRET_ENV, "whsec_%%%")
    assert post(client, body, headers).status_code == 503
    assert written() == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_it_starts_a_run_through_the_live_server(live_server: Any, actors: Any) -> None:
    owner = UserFactory(username="liveowner")
    publish_document(owner, hooked_document())
    body, headers = signed(TICKET, msg_id="msg_live")

    response = httpx.post(
        f"{live_server.url}{URL}",
        content=body,
        headers={**headers, "Content-Type": "application/json"},
        timeout=30,
    )

    assert response.status_code == 201, response.text
    run = Run.objects.get(pk=response.json()["run"])
    assert run.inputs["topic"] == "a lighthouse"
    assert run.webhook_delivery.webhook_id == "msg_live"


def readme_quick_start(url: str) -> str:
    """Return the sender's part of the README's webhook quick start, addressed to `url`."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Webhook quick start", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    sender = block.split("# The sender:\n", 1)[1]
    return sender.replace("http://127.0.0.1:8000/api/hooks/SLUG/ticket", url)


def tab_example(url: str) -> str:
    (spec, _) = parse_recipe(hooked_document()).webhooks
    return curl_example(url, spec, hooked_document()["inputs"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("example", "topic"), [(tab_example, "example"), (readme_quick_start, "a lighthouse")]
)
def test_the_curl_examples_start_a_run_through_the_live_server(
    live_server: Any, actors: Any, example: Any, topic: str
) -> None:
    owner = UserFactory(username="curlowner")
    publish_document(owner, hooked_document())
    # The examples run `python` with the standardwebhooks package: this interpreter's.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    done = subprocess.run(
        ["bash", "-c", example(f"{live_server.url}{URL}")],
        # The README names the variable BRANCHLINE_SECRET_TICKET_HOOK, the test recipe its own.
        env={"PATH": path, SECRET_ENV: SECRET, "BRANCHLINE_SECRET_TICKET_HOOK": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["repeat"] is False
    assert Run.objects.get(pk=answer["run"]).inputs["topic"] == topic
