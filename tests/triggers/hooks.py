"""What the webhook tests share: a recipe with hooks, its secrets, and requests signed with
the standardwebhooks library's own signer."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks import Webhook

from tests.factories import recipe_document

SECRET_ENV = "BRANCHLINE_SECRET_TEST_HOOK"
PLAIN_ENV = "BRANCHLINE_SECRET_TEST_PLAIN_HOOK"
SECRET = "whsec_" + base64.b64encode(b"a test secret of thirty-two byte").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"another secret, also 32 bytes ..").decode()


def hooked_document(slug: str = "hooked") -> dict[str, Any]:
    """A recipe with two hooks: `ticket` reads `topic` from `issue.title`, `plain` takes the
    payload as its inputs."""
    return recipe_document(
        slug=slug,
        inputs={
            "topic": {"type": "string", "required": True},
            "tone": {"type": "string", "default": "calm"},
        },
        webhooks=[
            {"name": "ticket", "secret_env": SECRET_ENV, "inputs": {"topic": "issue.title"}},
            {"name": "plain", "secret_env": PLAIN_ENV},
        ],
    )


def signed(
    body: bytes | str | dict[str, Any],
    *,
    secret: str = SECRET,
    msg_id: str = "msg_1",
    at: datetime | None = None,
) -> tuple[bytes, dict[str, str]]:
    """Return the body and the Standard Webhooks headers that sign it with `secret`."""
    if isinstance(body, dict):
        body = json.dumps(body)
    text = body.decode() if isinstance(body, bytes) else body
    at = at or datetime.now(tz=UTC)
    return text.encode(), {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, at, text),
    }


@pytest.fixture
def own_rate_counters(settings: Any) -> None:
    """Give the test a cache of its own: the hooks' rate counters of other tests (or of an
    earlier session, in Redis) must not count against it."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"webhooks-{uuid.uuid4().hex}",
        }
    }
