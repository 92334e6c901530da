"""Receive a delivery to an inbound webhook: check it, then start its run, once.

The checks, in order, each with its answer (nothing is written before the signature passed):
the hook must exist in the latest published version (404; an unpublished recipe is 409), its
secret must be set on the server (503), and the request must carry a valid Standard Webhooks
signature made with it within the library's tolerance (401: forged, stale, or a message
already received at that timestamp, i.e. replayed). A signed delivery is then recorded: a
repeat of an accepted `webhook-id` (the sender sending it again, signed afresh) gets the first
run back, the hook's rate limit may refuse it (429, not recorded), and a body that is not JSON
(400) or a payload that does not give the recipe's inputs (422, naming the input) is recorded
as refused. An accepted delivery starts a run of the recipe's owner.
"""

from __future__ import annotations

import binascii
import hashlib
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from runner.inputs import InputsInvalid
from runner.models import Run
from runner.outages import BROKER_ERRORS
from runner.services import RunNotStartable, run_start
from runner.versions import version_graph
from workflows import engine
from workflows.engine.secrets import MIN_SIGNING_KEY_BYTES, secret_value, signing_key
from workflows.engine.webhooks import PayloadUnmapped, WebhookSpec, map_payload
from workflows.models import Recipe, RecipeVersion
from workflows.validators import json_value_errors, text_problem

from .models import WebhookDelivery

log = logging.getLogger(__name__)

# The Standard Webhooks headers: the message's id, when it was signed, its signature(s).
ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER = (
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
MAX_ID_LENGTH = 255
RATE_WINDOW_SECONDS = 60
TRIGGER_CHARS: int = Run._meta.get_field("trigger").max_length  # type: ignore[assignment]


class HookRefused(Exception):
    """The delivery is refused with HTTP `status`; `errors` say why as `path: message`."""

    def __init__(self, status: int, errors: list[str], *, retry_after: int | None = None) -> None:
        super().__init__("; ".join(errors))
        self.status = status
        self.errors = errors
        self.retry_after = retry_after


@dataclass(frozen=True)
class Received:
    """An accepted delivery and its run; `repeat` when the run was started by an earlier one."""

    delivery: WebhookDelivery
    run: Run
    repeat: bool


@dataclass(frozen=True)
class Hook:
    """A hook as the latest published version of its recipe declares it."""

    recipe: Recipe
    version: RecipeVersion
    spec: WebhookSpec


def webhook_find(*, slug: str, name: str) -> Hook:
    """Return the hook `name` of the recipe `slug`'s latest published version.

    Refuse 404 when there is no such recipe or hook, 409 when the recipe is not published.
    """
    recipe = Recipe.objects.select_related("owner").filter(slug=slug).first()
    if recipe is None:
        raise HookRefused(404, [f"slug: no recipe '{slug}'"])
    version = recipe.latest_version
    if version is None:
        raise HookRefused(
            409, [f"slug: '{slug}' is not published; its hooks take deliveries once it is"]
        )
    try:
        graph, _ = version_graph(version.pk, version.created_at)
    except engine.RecipeInvalid:
        graph = None  # published before a check it fails: it cannot run (409 below)
    spec = next((h for h in graph.webhooks if h.name == name), None) if graph else None
    if graph is not None and spec is None:
        # The caller is not signed in: the hooks the recipe has are not listed to it.
        raise HookRefused(
            404, [f"name: no hook '{name}' in the published version {version.number} of '{slug}'"]
        )
    if spec is None:
        raise HookRefused(409, [f"version: {version.number} of '{slug}' cannot run"])
    return Hook(recipe=recipe, version=version, spec=spec)


def hook_secrets(spec: WebhookSpec) -> list[str]:
    """Return the secrets set on the server for `spec` (several, space separated, while one
    is being rotated); an empty list when its variable is unset or empty."""
    return secret_value(spec.secret_env).split()


def webhook_receive(*, slug: str, name: str, body: bytes, headers: Mapping[str, str]) -> Received:
    """Check a delivery to the hook `name` of recipe `slug` and start its run once.

    Raise HookRefused with the answer's status and reasons.
    """
    hook = webhook_find(slug=slug, name=name)
    message_id, signed_at = _verify(hook.spec, body, headers)
    body_sha256 = hashlib.sha256(body).hexdigest()
    earlier = WebhookDelivery.objects.filter(
        recipe=hook.recipe, hook=hook.spec.name, webhook_id=message_id
    )
    if earlier.filter(signed_at=signed_at).exists():
        raise HookRefused(
            401,
            [
                f"{ID_HEADER}: this message was received already (same id and timestamp): a "
                "replay; a sender's retry is signed afresh"
            ],
        )
    if (accepted := _accepted(earlier, body_sha256)) is not None:
        return accepted
    if (retry_after := _take_rate_slot(hook)) is not None:
        raise HookRefused(
            429,
            [f"$: the hook takes {settings.WEBHOOK_MAX_PER_MINUTE} deliveries a minute"],
            retry_after=retry_after,
        )
    record = _Recorder(hook, message_id, signed_at, body_sha256)
    try:
        inputs = _inputs(hook.spec, body)
    except HookRefused as exc:
        raise record.refused(exc.status, exc.errors) from None
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(
                **record.fields, status=WebhookDelivery.Status.ACCEPTED, http_status=201
            )
            run = run_start(
                user=hook.recipe.owner,
                recipe=hook.recipe,
                inputs=inputs,
                version=hook.version.number,
                # Shown on the run's page and in the API, as a schedule's runs say theirs.
                trigger=f"webhook {hook.spec.name}, message {message_id}"[:TRIGGER_CHARS],
            )
            delivery.run = run
            delivery.save(update_fields=["run"])
    except IntegrityError:
        # The same message, sent again at once, was accepted meanwhile (the insert waited).
        if (accepted := _accepted(earlier, body_sha256)) is not None:
            return accepted
        raise
    except InputsInvalid as exc:
        raise record.refused(422, exc.errors) from None
    except RunNotStartable as exc:
        raise record.refused(409, [str(exc)]) from None
    return Received(delivery=delivery, run=run, repeat=False)


def _verify(spec: WebhookSpec, body: bytes, headers: Mapping[str, str]) -> tuple[str, datetime]:
    """Return the message's id and signing time once its signature is valid for one of the
    hook's secrets; refuse 401 when it does not hold, 503 when the server has no secret (a
    server's fault: Standard Webhooks senders retry a 5xx, which then succeeds once it is set)."""
    values = {h: headers.get(h, "") for h in (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)}
    if missing := [h for h, value in values.items() if not value]:
        raise HookRefused(401, [f"{h}: required (a Standard Webhooks signature)" for h in missing])
    message_id = values[ID_HEADER]
    if len(message_id) > MAX_ID_LENGTH or (problem := text_problem(message_id)):
        raise HookRefused(400, [f"{ID_HEADER}: {problem or f'at most {MAX_ID_LENGTH} characters'}"])
    secrets = hook_secrets(spec)
    if not secrets:
        raise HookRefused(
            503,
            [
                "$: this hook's secret is not set on the server (the recipe's Triggers tab "
                "names its environment variable)"
            ],
        )
    keys = [signing_key(secret) for secret in secrets]
    if None in keys:
        log.error("webhook %s: %s is not a Standard Webhooks secret", spec.name, spec.secret_env)
        raise HookRefused(
            503,
            [
                "$: this hook's secret on the server is not a Standard Webhooks secret (whsec_ "
                f"and the base64 of at least {MIN_SIGNING_KEY_BYTES} bytes)"
            ],
        )
    signers = [Webhook(key) for key in keys if key is not None]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HookRefused(400, ["$: the body is not UTF-8 text"]) from None
    reason = "no signature matches the hook's secret"
    for signer in signers:
        try:
            signer.verify(text, values, json_parse=False)
        except WebhookVerificationError as exc:
            reason = _reason(str(exc), reason)
            continue
        except (ValueError, binascii.Error):  # a signature that is not `v1,BASE64`
            reason = "not a list of v1,BASE64 signatures"
            continue
        return message_id, _signed_at(values[TIMESTAMP_HEADER])
    header = TIMESTAMP_HEADER if "tolerance" in reason or "Unix" in reason else SIGNATURE_HEADER
    raise HookRefused(401, [f"{header}: {reason}"])


def _reason(message: str, previous: str) -> str:
    """Say in our words why the library refused a signature (a stale time beats a mismatch:
    every secret meets the same timestamp)."""
    if "too old" in message or "too new" in message:
        return f"outside the tolerance of 5 minutes ({message.removeprefix('Message ').lower()})"
    if "Invalid Signature Headers" in message:
        return "not a Unix time in seconds"
    return previous


def _signed_at(timestamp: str) -> datetime:
    # The library accepted it as a number and signs its whole seconds.
    return datetime.fromtimestamp(math.floor(float(timestamp)), tz=UTC)


def _accepted(earlier: QuerySet[WebhookDelivery], body_sha256: str) -> Received | None:
    """Return the accepted delivery of this message id, if any, as a repeat."""
    delivery = earlier.filter(status=WebhookDelivery.Status.ACCEPTED).select_related("run").first()
    if delivery is None:
        return None
    if delivery.body_sha256 != body_sha256:
        raise HookRefused(422, [f"{ID_HEADER}: this id was accepted before with another payload"])
    if delivery.run is None:
        raise HookRefused(409, [f"{ID_HEADER}: accepted before; its run was deleted since"])
    return Received(delivery=delivery, run=delivery.run, repeat=True)


def _take_rate_slot(hook: Hook) -> int | None:
    """Count a delivery against the hook's limit; return the seconds to wait when it is
    used up, None when it may go on. One counter per hook and minute, shared by every
    process through the cache (Redis when REDIS_URL is set)."""
    now = time.time()
    window = int(now // RATE_WINDOW_SECONDS)
    key = f"webhook-rate:{hook.recipe.pk}:{hook.spec.name}:{window}"
    try:
        cache.add(key, 0, timeout=RATE_WINDOW_SECONDS * 2)
        count = cache.incr(key)
    except (*BROKER_ERRORS, ValueError):
        # Redis is away (or dropped the key between the two calls): a limit is not worth
        # refusing a signed delivery for.
        log.warning("webhook rate limit not counted for %s", hook.spec.name, exc_info=True)
        return None
    if count <= settings.WEBHOOK_MAX_PER_MINUTE:
        return None
    return max(1, math.ceil(RATE_WINDOW_SECONDS - now % RATE_WINDOW_SECONDS))


def _inputs(spec: WebhookSpec, body: bytes) -> dict[str, object]:
    """Return the run inputs of a signed body; raise HookRefused (400, 422) when it gives none."""
    try:
        payload = engine.strict_json(body.decode("utf-8"))
    except ValueError as exc:
        raise HookRefused(400, [f"$: the body is not JSON: {exc}"]) from None
    except RecursionError:
        raise HookRefused(400, ["$: the body is nested too deeply"]) from None
    if errors := json_value_errors(payload):
        raise HookRefused(400, errors)
    try:
        return map_payload(spec, payload)
    except PayloadUnmapped as exc:
        raise HookRefused(422, exc.errors) from None


class _Recorder:
    """Record a signed delivery that is refused, with its reasons."""

    def __init__(self, hook: Hook, message_id: str, signed_at: datetime, body_sha256: str) -> None:
        self.fields = {
            "recipe": hook.recipe,
            "hook": hook.spec.name,
            "webhook_id": message_id,
            "signed_at": signed_at,
            "body_sha256": body_sha256,
        }

    def refused(self, status: int, errors: list[str]) -> HookRefused:
        WebhookDelivery.objects.create(
            **self.fields,
            status=WebhookDelivery.Status.REFUSED,
            http_status=status,
            error="; ".join(errors),
        )
        return HookRefused(status, errors)
