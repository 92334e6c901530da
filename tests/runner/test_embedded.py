"""The embedded default: one ASGI server process with its own worker, on a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from runner import services
from tests.runner.conftest import story_document
from workflows.models import Actor
from workflows.services import recipe_import, recipe_publish

owner = User.objects.create_user("olivia", password="x")
Group.objects.create(name="test-editors")
Actor.objects.create(name="test-writer", provider="scripted",
                     config={"replies": ["A story about a lighthouse keeper who found a map."]})
Actor.objects.create(name="test-judge", provider="scripted", config={"replies": ["9"]})
recipe = recipe_import(user=owner, data=story_document()).recipe
recipe_publish(recipe=recipe, user=owner)
left_over = services.run_start(user=owner, recipe=recipe, inputs={"topic": "left over"})
print(json.dumps({"token": Token.objects.create(user=owner).key, "left_over": left_over.pk}))
"""


@pytest.fixture
def embedded_server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "EMBEDDED_WORKER": "1",
        "SECRET_KEY": "embedded-test",
        "RUN_BEAT_INTERVAL_SECONDS": "0.5",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    out = subprocess.run(
        [*manage, "shell", "-c", "import json\n" + SETUP],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    setup = json.loads(out.strip().splitlines()[-1])
    with LiveServer(env, log=tmp_path / "daphne.log") as server:
        yield {"url": server.url, **setup}


def api(server: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        server["url"] + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {server['token']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_status(
    server: dict[str, Any], run_id: int, status: str, timeout: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api(server, "GET", f"/api/runs/{run_id}/")
        if run["status"] == status:
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} is {run['status']}, not {status}")


@pytest.mark.slow
def test_the_embedded_server_runs_a_recipe_with_nothing_but_python(embedded_server: dict) -> None:
    run = api(embedded_server, "POST", "/api/recipes/story/runs", {"inputs": {"topic": "owls"}})

    finished = wait_status(embedded_server, run["id"], "succeeded")

    assert [s["step"] for s in finished["steps"]] == ["write"]
    assert finished["outcome"] == "approved"


@pytest.mark.slow
def test_the_embedded_server_picks_up_runs_left_queued(embedded_server: dict) -> None:
    wait_status(embedded_server, embedded_server["left_over"], "succeeded")


DELAYED = {
    "format": "branchline.recipe/v1",
    "slug": "delayed",
    "name": "Delayed retry",
    "inputs": {"topic": {"type": "string", "required": True}},
    "actors": {"writer": "test-writer"},
    "steps": [
        {
            "key": "write",
            "name": "Write",
            "actor": "writer",
            "prompt": "Write about {topic}",
            "branches": [
                {
                    "name": "model_timeout",
                    "priority": 5,
                    "when": {"type": "execution_timeout", "operator": "equals", "value": True},
                    "action": "REQUEST_MORE_DETAIL",
                    "target": "@repeat",
                    "params": {"retry_suffix": "Again.", "delay_seconds": 1.5},
                }
            ],
        }
    ],
}


@pytest.mark.slow
def test_the_embedded_worker_waits_for_a_retrys_delay(embedded_server: dict) -> None:
    api(embedded_server, "POST", "/api/recipes/import", DELAYED)
    api(embedded_server, "POST", "/api/recipes/delayed/publish", {})
    script = {"writer": ["@timeout", "A story about owls."]}
    run = api(
        embedded_server,
        "POST",
        "/api/recipes/delayed/runs",
        {"inputs": {"topic": "owls"}, "script": script},
    )

    finished = wait_status(embedded_server, run["id"], "succeeded")

    first, second = finished["steps"]
    waited = datetime.fromisoformat(second["started_at"]) - datetime.fromisoformat(
        first["finished_at"]
    )
    assert (first["status"], second["response"]) == ("timed_out", "A story about owls.")
    assert waited.total_seconds() >= 1.5
