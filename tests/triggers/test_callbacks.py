"""Callback deliveries attempt by attempt, with the queue of attempts in the test's hands:
the backoff after a failure, refusals by the SSRF guard and for a missing secret recorded as
failed attempts, the API and the pages that show them and send one again, and who may."""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from editor.diff import documents_diff
from runner import embedded, events, services
from runner.event_schema import EVENT_SCHEMAS
from runner.models import Run
from tests.conftest import api_client
from tests.factories import UserFactory
from tests.runner.recipes import drive
from tests.triggers.conftest import SECRET_ENV
from tests.triggers.receiver import Receiver
from tests.triggers.recipes import STORY, callback, document, publish
from triggers.callbacks import backoff, sending, tasks
from triggers.callbacks import services as callback_services
from triggers.callbacks.hooks import callbacks_sweep, on_events_committed
from triggers.callbacks.models import CallbackAttempt, CallbackDelivery
from workflows import engine
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db

Queued = list[tuple[str, int, float]]


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Queued:
    """The attempts queued, as (delivery, attempt, countdown), instead of Celery messages."""
    seen: Queued = []

    def queue(delivery_id: object, number: int, *, countdown: float = 0) -> None:
        seen.append((str(delivery_id), number, countdown))

    monkeypatch.setattr(callback_services, "_queue", queue)
    return seen


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="cb-owner")


def finished_run(owner: Any, url: str, capture: Any, *on: str) -> Run:
    """Run a one-step recipe calling back `url` to its end, and hear its committed events."""
    recipe = publish(owner, [callback(url, *on)], review=False)
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "the sea"}))
    with capture(execute=True):
        on_events_committed(None, run_id=run.pk, events=list(run.events.order_by("seq")))
    return run


def attempt(delivery: CallbackDelivery, number: int, capture: Any) -> CallbackAttempt | None:
    with capture(execute=True):
        return callback_services.delivery_attempt(delivery_id=str(delivery.pk), number=number)


def test_callbacks_may_listen_to_every_event_a_run_stores() -> None:
    pushed_only = {"step.token", "step.tool_call"}
    assert set(engine.CALLBACK_EVENT_TYPES) == set(EVENT_SCHEMAS) - pushed_only


def test_a_failed_attempt_schedules_the_next_one_after_the_backoff(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500, 200]
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    assert delivery.event_type == "run.finished" and delivery.status == "pending"
    assert queued == [(str(delivery.pk), 1, 0)]

    first = attempt(delivery, 1, django_capture_on_commit_callbacks)
    assert first is not None
    assert (first.status_code, first.error) == (500, "the receiver answered 500")
    assert first.next_attempt_at is not None
    assert (first.next_attempt_at - timezone.now()).total_seconds() == pytest.approx(30, abs=2)
    [(_, number, countdown)] = queued[1:]
    assert number == 2 and countdown == pytest.approx(30, abs=2)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.next_attempt_at == first.next_attempt_at

    # The countdown's message, now rather than in 30 s.
    second = attempt(delivery, 2, django_capture_on_commit_callbacks)
    assert second is not None and second.status_code == 200 and second.next_attempt_at is None
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.delivered_at is not None
    # The same message delivered twice by the broker sends nothing more.
    assert attempt(delivery, 2, django_capture_on_commit_callbacks) is None
    assert len(receiver.received) == 2 and len(receiver.verified) == 2
    assert len(queued) == 2


def test_the_backoff_doubles_up_to_half_an_hour_and_gives_up_after_a_day() -> None:
    assert [backoff.retry_delay(n) for n in range(1, 10)] == [
        30,
        60,
        120,
        240,
        480,
        960,
        1800,
        1800,
        1800,
    ]
    start = timezone.now()
    now, retries = start, 0
    while at := backoff.next_attempt(series_started_at=start, retry=retries + 1, now=now):
        now, retries = at, retries + 1
    assert now - start <= timedelta(days=1) < now - start + timedelta(seconds=1800)
    assert retries == 52


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://10.0.0.7/hooks", "10.0.0.7, a private address"),
        ("http://169.254.169.254/latest/meta-data", "a link-local address"),
        ("http://0x7f000001:9/x", "0x7f000001 is 127.0.0.1, a loopback address"),
    ],
)
def test_a_private_url_off_the_allowlist_is_a_failed_attempt_not_an_error(
    owner: Any,
    queued: Queued,
    django_capture_on_commit_callbacks: Any,
    url: str,
    why: str,
    secret: str,
) -> None:
    run = finished_run(owner, url, django_capture_on_commit_callbacks)
    assert run.status == "succeeded"
    delivery = CallbackDelivery.objects.get(run=run)
    made = attempt(delivery, 1, django_capture_on_commit_callbacks)
    assert made is not None and made.status_code is None and made.next_attempt_at is None
    assert made.error.startswith("url refused: ") and why in made.error
    assert "add it to PROVIDER_URL_ALLOWLIST to allow it" in made.error
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert len(queued) == 1  # the first attempt's: no retry


def test_the_loopback_receiver_is_refused_unless_allowed(
    owner: Any,
    receiver: Receiver,
    queued: Queued,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1:11434"]
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    made = attempt(CallbackDelivery.objects.get(run=run), 1, django_capture_on_commit_callbacks)
    assert made is not None and "127.0.0.1, a loopback address" in made.error
    assert receiver.received == []


def test_a_redirect_is_not_followed(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [307]
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    made = attempt(CallbackDelivery.objects.get(run=run), 1, django_capture_on_commit_callbacks)
    assert made is not None and made.status_code == 307
    assert made.error == "redirects are not followed (to ?)"
    assert made.next_attempt_at is not None and len(receiver.received) == 1


def test_an_unset_secret_fails_the_attempt_sending_nothing(
    owner: Any,
    receiver: Receiver,
    queued: Queued,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    monkeypatch.delenv(SECRET_ENV)
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    made = attempt(CallbackDelivery.objects.get(run=run), 1, django_capture_on_commit_callbacks)
    assert made is not None and made.error == f"secret_env: env var {SECRET_ENV} is not set"
    assert made.next_attempt_at is None and receiver.received == []


def test_a_name_that_is_not_a_recipe_secret_is_never_read(
    owner: Any,
    receiver: Receiver,
    secret: str,
    queued: Queued,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    # A delivery recorded before the rule, naming an env var that is set but not a recipe's.
    monkeypatch.setenv("SECRET_KEY", secret)
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    CallbackDelivery.objects.filter(pk=delivery.pk).update(secret_env="SECRET_KEY")
    made = attempt(delivery, 1, django_capture_on_commit_callbacks)
    assert made is not None and made.error == "secret_env: env var SECRET_KEY is not set"
    assert receiver.received == []
    assert not sending.secret_is_set("SECRET_KEY")  # the tab does not tell either


@pytest.mark.parametrize("value", ["not base64 at all!", "whsec_c2hvcnQ=", "hunter2"])
def test_a_secret_that_is_not_one_fails_the_attempt_without_showing_it(
    owner: Any,
    receiver: Receiver,
    queued: Queued,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    value: str,
) -> None:
    monkeypatch.setenv(SECRET_ENV, value)
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    made = attempt(CallbackDelivery.objects.get(run=run), 1, django_capture_on_commit_callbacks)
    assert made is not None and made.error == (
        f"secret_env: env var {SECRET_ENV} does not hold a Standard Webhooks secret "
        "(whsec_ and the base64 of at least 16 random bytes)"
    )
    assert made.next_attempt_at is None and receiver.received == []


def test_the_secret_is_never_stored_shown_or_logged(
    owner: Any,
    receiver: Receiver,
    secret: str,
    queued: Queued,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver.statuses = [500]
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    attempt(delivery, 1, django_capture_on_commit_callbacks)
    web = Client()
    web.force_login(owner)
    key = secret.removeprefix("whsec_")
    shown = [
        json.dumps(list(CallbackDelivery.objects.values()), default=str),
        json.dumps(list(CallbackAttempt.objects.values()), default=str),
        api_client(owner).get(f"/api/runs/{run.pk}/callbacks").content.decode(),
        web.get(f"/runs/{run.pk}/").content.decode(),
        web.get("/recipes/notify/triggers/").content.decode(),
        caplog.text,
    ]
    assert SECRET_ENV in shown[2] and "attempt 1 failed" in caplog.text
    assert not [text for text in shown if key in text]


def test_the_api_lists_a_runs_deliveries_with_their_attempts(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    run = finished_run(
        owner, receiver.url, django_capture_on_commit_callbacks, "run.started", "run.finished"
    )
    started, finished = CallbackDelivery.objects.filter(run=run).order_by("event_seq")
    attempt(finished, 1, django_capture_on_commit_callbacks)
    answer = api_client(owner).get(f"/api/runs/{run.pk}/callbacks")
    assert answer.status_code == 200
    body = answer.json()
    assert [d["event_type"] for d in body] == ["run.started", "run.finished"]
    assert body[0]["attempt_log"] == [] and body[0]["status"] == "pending"
    assert body[1]["id"] == str(finished.pk) and body[1]["status"] == "delivered"
    assert body[1]["secret_env"] == SECRET_ENV and body[1]["url"] == receiver.url
    assert body[1]["payload"]["data"]["answer"] == STORY
    [made] = body[1]["attempt_log"]
    assert made["number"] == 1 and made["status_code"] == 204 and made["manual"] is False
    assert started.payload["data"]["event"] == {"status": "running"}


def test_send_again_queues_a_new_series_of_attempts(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    attempt(delivery, 1, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_client(owner).post(f"/api/runs/{run.pk}/callbacks/{delivery.pk}/resend")
    assert answer.status_code == 202
    assert answer.json()["status"] == "pending"
    assert queued[-1] == (str(delivery.pk), 2, 0)
    again = attempt(delivery, 2, django_capture_on_commit_callbacks)
    assert again is not None and again.manual and again.status_code == 204


def test_send_again_waits_for_an_attempt_in_flight(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    CallbackDelivery.objects.filter(pk=delivery.pk).update(attempts=1)  # claimed, not recorded
    answer = api_client(owner).post(f"/api/runs/{run.pk}/callbacks/{delivery.pk}/resend")
    assert answer.status_code == 409
    assert answer.json() == {"errors": ["attempt 1 of this callback is being made"]}


def test_only_who_may_see_the_run_sees_or_resends_its_callbacks(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    stranger = api_client(UserFactory(username="cb-stranger"))
    anonymous = api_client()
    listing, resend = (
        f"/api/runs/{run.pk}/callbacks",
        f"/api/runs/{run.pk}/callbacks/{delivery.pk}/resend",
    )
    assert stranger.get(listing).status_code == 404
    assert stranger.post(resend).status_code == 404
    assert anonymous.get(listing).status_code == 403
    assert anonymous.post(resend).status_code == 403
    assert (
        api_client(owner).post(f"/api/runs/{run.pk}/callbacks/{uuid.uuid4()}/resend").status_code
        == 404
    )
    assert len(queued) == 1  # nothing was sent again
    web = Client()
    web.force_login(UserFactory(username="cb-stranger"))
    assert web.get(f"/runs/{run.pk}/callbacks/").status_code == 404
    assert web.post(f"/runs/{run.pk}/callbacks/{delivery.pk}/resend/").status_code == 404


def test_the_monitor_shows_the_deliveries_and_sends_one_again_over_htmx(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500]
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    attempt(delivery, 1, django_capture_on_commit_callbacks)
    web = Client(enforce_csrf_checks=True)
    web.force_login(owner)
    page = web.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-callbacks"' in page and "the receiver answered 500" in page
    resend = f"/runs/{run.pk}/callbacks/{delivery.pk}/resend/"
    assert f'hx-post="{resend}"' in page and "Send again" in page
    assert web.post(resend, HTTP_HX_REQUEST="true").status_code == 403  # no CSRF token
    token = web.cookies["csrftoken"].value
    with django_capture_on_commit_callbacks(execute=True):
        answer = web.post(resend, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 200
    assert 'id="run-callbacks"' in answer.content.decode()
    assert queued[-1] == (str(delivery.pk), 2, 0)


def test_a_run_without_callbacks_shows_no_section(user: Any, recipe: Any) -> None:
    recipe_publish(recipe=recipe, user=user)
    run = drive(services.run_start(user=user, recipe=recipe, inputs={"topic": "x"}))
    web = Client()
    web.force_login(user)
    assert 'id="run-callbacks"' not in web.get(f"/runs/{run.pk}/").content.decode()


def test_the_triggers_tab_lists_the_callbacks_and_the_last_deliveries(
    owner: Any,
    receiver: Receiver,
    queued: Queued,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    web = Client()
    web.force_login(owner)
    tab = web.get("/recipes/notify/triggers/").content.decode()
    assert receiver.url in tab and "run.finished" in tab and SECRET_ENV in tab
    assert '<span class="ok">set</span>' in tab
    assert f"#{run.pk}</a>" in tab and "Pending" in tab
    monkeypatch.delenv(SECRET_ENV)
    assert "not set" in web.get("/recipes/notify/triggers/").content.decode()


def test_the_callbacks_are_exported_as_imported(owner: Any, receiver: Receiver) -> None:
    callbacks = [callback(receiver.url, "human_task.created", "run.finished")]
    publish(owner, callbacks)
    exported = api_client(owner).get("/api/recipes/notify/export").json()
    assert exported["callbacks"] == callbacks


def test_a_listener_that_fails_never_fails_the_commit(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    owner: Any,
    receiver: Receiver,
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr("triggers.callbacks.hooks.deliveries_record", broken)
    recipe = publish(owner, [callback(receiver.url)], review=False)
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "the sea"}))
    events._announce(run.pk, list(run.events.all()))  # as on commit
    assert "Error calling on_events_committed" in caplog.text
    assert "the database went away" in caplog.text
    assert not CallbackDelivery.objects.exists()


def test_the_sweep_records_the_deliveries_a_crash_lost(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    recipe = publish(owner, [callback(receiver.url)], review=False)
    # Its events committed, and the process died before its on-commit handler recorded them.
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "the sea"}))
    assert not CallbackDelivery.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.requeue_callbacks() == 0  # a minute's grace for the handler at work
    run.events.update(at=timezone.now() - timedelta(minutes=2))

    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.requeue_callbacks() == 1

    delivery = CallbackDelivery.objects.get(run=run)
    assert (delivery.event_type, delivery.url) == ("run.finished", receiver.url)
    assert queued == [(str(delivery.pk), 1, 0)]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.requeue_callbacks() == 0  # once only
    assert CallbackDelivery.objects.count() == 1 and len(queued) == 1
    # Events older than a day are history: not sent now.
    CallbackDelivery.objects.all().delete()
    run.events.update(at=timezone.now() - timedelta(days=2))
    assert tasks.requeue_callbacks() == 0 and not CallbackDelivery.objects.exists()


def test_the_embedded_beat_runs_the_callbacks_sweep() -> None:
    assert callbacks_sweep in embedded._duties


def test_overdue_deliveries_are_queued_again(
    owner: Any, receiver: Receiver, queued: Queued, django_capture_on_commit_callbacks: Any
) -> None:
    run = finished_run(owner, receiver.url, django_capture_on_commit_callbacks)
    delivery = CallbackDelivery.objects.get(run=run)
    long_ago = timezone.now() - timedelta(minutes=10)
    # Its first attempt claimed by a worker that died before recording it.
    CallbackDelivery.objects.filter(pk=delivery.pk).update(attempts=1, next_attempt_at=long_ago)
    assert callback_services.deliveries_overdue() == 1
    assert queued[-1] == (str(delivery.pk), 1, 0)
    assert attempt(delivery, 1, django_capture_on_commit_callbacks) is not None
    assert callback_services.deliveries_overdue() == 0


def test_a_versions_diff_says_when_its_callbacks_changed() -> None:
    url = "https://hooks.example.com/branchline"
    before = document([callback(url)])
    after = document([callback(url, "run.finished", "human_task.created")])
    assert documents_diff(before, after).recipe_fields == ["callbacks"]
    assert documents_diff(before, before).is_empty


def test_the_signature_holds_whatever_the_servers_time_zone(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        outcome = sending.send(
            url=receiver.url, message_id="msg-1", payload={"type": "t"}, secret_env=SECRET_ENV
        )
    finally:
        monkeypatch.undo()
        time.tzset()
    assert outcome.delivered
    [got] = receiver.received
    assert got.refused == "" and got.verified == {"type": "t"}
