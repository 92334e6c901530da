"""The embedded default (one process, SQLite, no beat) starts the runs of schedules too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer
from tests.runner.test_embedded import api, wait_status

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from tests.runner.conftest import story_document
from workflows.models import Actor
from workflows.services import recipe_import, recipe_publish

owner = User.objects.create_user("olivia", password="x")
Group.objects.create(name="test-editors")
Actor.objects.create(name="test-writer", provider="scripted",
                     config={"replies": ["A story about a lighthouse keeper who found a map."]})
Actor.objects.create(name="test-judge", provider="scripted", config={"replies": ["9"]})
document = story_document()
document["schedules"] = [{"name": "minutely", "cron": "* * * * *", "inputs": {"topic": "owls"}}]
recipe = recipe_import(user=owner, data=document).recipe
recipe_publish(recipe=recipe, user=owner)
print(json.dumps({"token": Token.objects.create(user=owner).key}))
"""


@pytest.fixture
def embedded_server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "EMBEDDED_WORKER": "1",
        "SECRET_KEY": "embedded-test",
        "RUN_BEAT_INTERVAL_SECONDS": "1",
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


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_embedded_server_starts_a_schedules_run_on_its_minute(embedded_server: dict) -> None:
    deadline = time.monotonic() + 90  # the next minute, and a busy machine's seconds
    runs: list[dict[str, Any]] = []
    while not runs and time.monotonic() < deadline:
        runs = api(embedded_server, "GET", "/api/runs/?recipe=story")
        time.sleep(0.5)
    assert runs, "no run started within 90 s"
    (run,) = runs
    assert run["trigger"].startswith("schedule minutely at ")
    assert (run["created_by"], run["inputs"]) == ("olivia", {"topic": "owls"})
    wait_status(embedded_server, run["id"], "succeeded")
    (schedule,) = api(embedded_server, "GET", "/api/recipes/story/schedules")
    assert schedule["last_tick"]["run"] == run["id"]
    assert len(schedule["next_runs"]) == 3
