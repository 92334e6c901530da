"""Fixtures of the triggers' tests: a callback receiver on loopback, with its secret in an env
var and its address allowed by the SSRF guard's allowlist; the runner's worker fixtures."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.runner.conftest import runs_settled  # noqa: F401 (a fixture)
from tests.triggers.receiver import Receiver, serve

SECRET_ENV = "BRANCHLINE_SECRET_TEST_CALLBACK"


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "whsec_" + base64.b64encode(os.urandom(24)).decode("ascii")
    monkeypatch.setenv(SECRET_ENV, value)
    return value


@pytest.fixture
def receiver(secret: str, settings: Any) -> Iterator[Receiver]:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1"]
    yield from serve(Receiver(secret))


@pytest.fixture
def worker(celery_worker: Any, transactional_db: None) -> Any:
    return celery_worker
