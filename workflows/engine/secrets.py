"""Which environment variables a recipe may read: its secrets.

An http step's `secret_env`, a webhook's and a callback's `secret_env` name env vars whose
values are sent or signed with and never kept. A recipe's author is not the server's operator,
so a recipe may read only the variables the operator set aside for recipes: those whose names
begin with `SECRET_ENV_PREFIX`. Never `SECRET_KEY`, `DATABASE_URL` or a provider's key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

SECRET_ENV_PREFIX = "BRANCHLINE_SECRET_"
MAX_SECRET_ENV_CHARS = 100
_NAME = re.compile(re.escape(SECRET_ENV_PREFIX) + r"[A-Z0-9_]+")


def secret_env_problem(name: object) -> str | None:
    """Return why `name` cannot name a recipe's secret (None: it can)."""
    if not isinstance(name, str) or not name:
        return f"must name an env var beginning with {SECRET_ENV_PREFIX}"
    if len(name) > MAX_SECRET_ENV_CHARS:
        return f"at most {MAX_SECRET_ENV_CHARS} characters"
    if not _NAME.fullmatch(name):
        return (
            # The name is not repeated: a secret pasted here by mistake is not shown again.
            f"not a recipe secret: a recipe reads only env vars named {SECRET_ENV_PREFIX}NAME "
            "(capitals, digits and _), which the server's operator sets aside for recipes"
        )
    return None


def secret_value(name: str) -> str:
    """Return the value of the recipe secret `name` ("" when unset). A name that fails
    `secret_env_problem` (a version published before the rule) is never read from the
    environment: its value, and whether it is set, stay the operator's."""
    if secret_env_problem(name) is not None:
        return ""
    return os.environ.get(name, "")


MIN_SIGNING_KEY_BYTES = 16


def signing_key(secret: str) -> bytes | None:
    """Return the key of a Standard Webhooks secret (`whsec_` and the base64 of at least
    `MIN_SIGNING_KEY_BYTES` bytes), or None when it is not one.

    Read strictly: the library's own reading skips what is not base64, and would sign or
    verify with whatever is left of a mistyped secret.
    """
    encoded = secret.strip().removeprefix("whsec_")
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) >= MIN_SIGNING_KEY_BYTES else None
