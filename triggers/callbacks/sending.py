"""Send one Standard Webhooks message: sign it with the secret of its env var, POST it through
the SSRF guard, and say how it went. No database here; `services` records the outcome.

The guard is the one actors and tool servers call through (`workflows.actor_urls`,
`workflows.guarded_http`) with the same allowlist (PROVIDER_URL_ALLOWLIST): the URL is checked
before the call, and every address is checked again as it is connected to. Redirects are not
followed: a 3xx is a failed attempt, like any answer but 2xx.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from standardwebhooks import Webhook

from workflows.actor_urls import Allowlist, NameUnresolved, URLRefused, check_base_url
from workflows.actor_urls import settings_allowlist as allowlist_setting
from workflows.engine.secrets import MIN_SIGNING_KEY_BYTES, secret_value, signing_key
from workflows.guarded_http import DeadlinePassed, call_deadline, guarded_client

TIMEOUT_S = 15.0
# The guard's ceiling on an answer's body, which is never read: only its status code counts.
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Branchline-Callbacks/1"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt went: the status code (None: no answer), or why it failed.

    `permanent`: trying again cannot help until someone changes something (the URL refused
    by the guard, the secret's env var unset).
    """

    status_code: int | None
    latency_ms: int | None
    error: str = ""
    permanent: bool = False

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def body_of(payload: dict[str, Any]) -> str:
    """Return the message body as sent (and signed): compact JSON."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def signer(secret_env: str) -> Webhook | str:
    """Return the signer of the secret in env var `secret_env`, or why there is none (the
    message names the variable, never its value)."""
    secret = secret_value(secret_env)
    if not secret:
        # Also for a name a recipe may not read (published before the rule): it is not read.
        return f"secret_env: env var {secret_env} is not set"
    key = signing_key(secret)
    if key is None:
        return (
            f"secret_env: env var {secret_env} does not hold a Standard Webhooks secret "
            f"(whsec_ and the base64 of at least {MIN_SIGNING_KEY_BYTES} random bytes)"
        )
    return Webhook(key)


def secret_is_set(secret_env: str) -> bool:
    """Tell whether env var `secret_env` holds a usable secret (for the editor's list)."""
    return isinstance(signer(secret_env), Webhook)


def send(*, url: str, message_id: str, payload: dict[str, Any], secret_env: str) -> Outcome:
    """POST the signed message to `url` once; never raise for what the network or the
    receiver does."""
    sign = signer(secret_env)
    if isinstance(sign, str):
        return Outcome(None, None, sign, permanent=True)
    allowlist = Allowlist.parse(allowlist_setting())
    try:
        _check(url, allowlist)
    except NameUnresolved as exc:
        return Outcome(None, None, f"url: {exc.reason}")
    except URLRefused as exc:
        return Outcome(None, None, f"url {exc.reason}", permanent=True)
    body = body_of(payload)
    # In UTC: the library's signer replaces a timestamp's zone with UTC, it does not convert.
    now = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": sign.sign(message_id, now, body),
    }
    client = guarded_client(allowlist, max_body_bytes=MAX_ANSWER_BYTES)
    started = time.monotonic()
    try:
        # Streamed and left unread: only the status code counts, whatever the body.
        with (
            call_deadline(started + TIMEOUT_S),
            client.stream(
                "POST", url, content=body.encode("utf-8"), headers=headers, timeout=TIMEOUT_S
            ) as response,
        ):
            status_code = response.status_code
            location = response.headers.get("location", "")[:200]
    except NameUnresolved as exc:
        return Outcome(None, _since(started), f"url: {exc.reason}")
    except URLRefused as exc:
        return Outcome(None, _since(started), f"url {exc.reason}", permanent=True)
    except (httpx.TimeoutException, DeadlinePassed):
        return Outcome(None, _since(started), f"no answer within {TIMEOUT_S:g} s")
    except httpx.HTTPError as exc:
        return Outcome(None, _since(started), f"{type(exc).__name__}: {exc}"[:500])
    latency = _since(started)
    if 300 <= status_code < 400:
        where = location or "?"
        return Outcome(status_code, latency, f"redirects are not followed (to {where})")
    if not 200 <= status_code < 300:
        return Outcome(status_code, latency, f"the receiver answered {status_code}")
    return Outcome(status_code, latency)


def _check(url: str, allowlist: Allowlist) -> None:
    """Check the URL with the guard (which refuses a query string on a base URL: the part
    checked is the URL without it, the address being the same)."""
    parts = urlsplit(url)
    check_base_url(
        urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), allowlist=allowlist
    )


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
