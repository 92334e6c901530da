"""The API does what its OpenAPI schema says, as an outside fuzzer (Schemathesis) sees it.

Schemathesis reads the schema that a live daphne process serves at `/api/schema/` and sends
generated requests, valid and invalid, to every operation with all its checks: no 5xx, only
documented status codes, content types and headers, answers that match their schema, valid
requests accepted and invalid ones refused, deleted objects gone, authentication enforced.
It runs its examples, coverage, fuzzing and stateful phases with a fixed seed and a bounded
number of examples per operation (`FUZZ_EXAMPLES`); raise it to fuzz longer, and change the
seed (`FUZZ_SEED`) to try other requests:

    FUZZ_EXAMPLES=500 FUZZ_SEED=7 .venv/bin/python -m pytest tests/test_api_fuzz.py

Its settings are in tests/api_fuzz.toml (what the generated requests may hold, and the
operations whose valid requests name server data that may not exist). The server runs on the
test database (SQLite by default, PostgreSQL with DATABASE_URL) with its embedded worker, signed
in as a staff reviewer who owns a published recipe, a run of it waiting for a decision and that
decision's open task: the fuzzer is given their ids besides the ones it makes up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.factories import ActorFactory, GroupFactory, UserFactory
from tests.live_server import LiveServer
from tests.runner.conftest import story_document
from tests.runner.worker_process import database_url

ROOT = Path(__file__).resolve().parents[1]
CONFIG = Path(__file__).with_name("api_fuzz.toml")
SEED = int(os.environ.get("FUZZ_SEED", "20261124"))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
# Twice or more what a run takes here (50 examples: two minutes on a fast day, five on a slow
# one; 300: seven on a fast one): reaching it fails the test instead of holding up the suite.
FUZZ_TIMEOUT_S = float(os.environ.get("FUZZ_TIMEOUT_S", str(max(600, EXAMPLES * 12))))

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(FUZZ_TIMEOUT_S + 120)]


@dataclass
class LiveApi:
    url: str
    token: str
    log: Path
    # Seeded values by the name of the fuzzer's dictionary that holds them.
    seeded: dict[str, list[Any]] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        """Send one JSON request as the seeded user; return the decoded answer."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                **headers,
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or "null")


def server_database_url() -> str:
    """Return the test database's URL for the server process (a file on SQLite)."""
    if connection.vendor == "postgresql":
        return database_url("branchline-fuzz-server")
    return f"sqlite:///{settings.DATABASES['default']['NAME']}"


def seed_user() -> str:
    """Create the fuzzer's user (staff, a reviewer) and the actors; return its API token."""
    editors = GroupFactory(name="test-editors")
    user = UserFactory(username="fuzzer", staff=True, groups=[editors])
    ActorFactory(name="test-writer", config={"replies": ["A story about a lighthouse keeper."]})
    ActorFactory(name="test-judge", config={"replies": ["5"]})
    ActorFactory(name="editors-desk", human=True, group=editors)
    return Token.objects.create(user=user).key


def seed_through_api(api: LiveApi) -> None:
    """Import and publish a recipe, start a run that waits for a reviewer; keep the ids."""
    api.call("POST", "/api/recipes/import", story_document())
    api.call("POST", "/api/recipes/story/publish", {"note": "first"})
    run = api.call("POST", "/api/recipes/story/runs", {"inputs": {"topic": "a lighthouse"}})
    deadline = time.monotonic() + 30
    while api.call("GET", f"/api/runs/{run['id']}/")["status"] != "waiting_human":
        if time.monotonic() > deadline:
            raise AssertionError(f"the seeded run does not wait for a reviewer:\n{api.log}")
        time.sleep(0.1)
    tasks = api.call("GET", "/api/tasks/")
    assert tasks, "the seeded run has an open task"
    api.seeded = {
        "slugs": ["story"],
        "runs": [str(run["id"])],
        "tasks": [str(task["id"]) for task in tasks],
        "actors": [str(actor["id"]) for actor in api.call("GET", "/api/actors/")["results"]],
        "groups": ["test-editors"],
        "decisions": tasks[0]["options"],
    }


def fuzz_config(api: LiveApi, path: Path) -> Path:
    """Write tests/api_fuzz.toml with the seeded ids, offered half of the time, to `path`."""
    bindings = {
        "path.slug": "slugs",
        "path.run_id": "runs",
        "path.task_id": "tasks",
        "path.id": "actors",
        "body.group": "groups",
        "body.decision": "decisions",
    }
    lines = [CONFIG.read_text(), "\n[dictionaries]"]
    lines += [
        f"{name} = {{ values = {json.dumps(values)} }}" for name, values in api.seeded.items()
    ]
    lines.append("\n[parameters]")
    lines += [
        f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}'
        for key, name in bindings.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def live_api(transactional_db: None, tmp_path: Path) -> Iterator[LiveApi]:
    """Serve the app with daphne on the test database, seeded; stop it before the flush."""
    token = seed_user()
    env = {
        **os.environ,
        "DATABASE_URL": server_database_url(),
        "DEBUG": "0",
        "SECRET_KEY": "fuzz-tests-only-not-a-secret",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "EMBEDDED_WORKER": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    # The embedded worker and the in-memory layer: nothing reaches another test's broker.
    env.pop("REDIS_URL", None)
    log = tmp_path / "daphne.log"
    with LiveServer(env, log=log) as server:
        api = LiveApi(url=server.url, token=token, log=log)
        seed_through_api(api)
        yield api


def test_the_api_keeps_every_promise_of_its_schema(live_api: LiveApi, tmp_path: Path) -> None:
    # The schema is for signed-in users: fetch it as one, and fuzz what the server served.
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(live_api.call("GET", "/api/schema/", Accept="application/vnd.oai.openapi+json"))
    )
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(fuzz_config(live_api, tmp_path / "api_fuzz.toml")),
        "run",
        str(schema),
        "--url",
        live_api.url,
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--seed",
        str(SEED),
        "--max-examples",
        str(EXAMPLES),
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--no-color",
    ]

    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=FUZZ_TIMEOUT_S,
        env={**os.environ, "FUZZ_TOKEN": live_api.token, "SCHEMATHESIS_TELEMETRY": "false"},
    )

    assert done.returncode == 0, (
        f"{done.stdout[-30000:]}\n{done.stderr[-5000:]}\n"
        f"server log:\n{live_api.log.read_text()[-5000:]}"
    )
