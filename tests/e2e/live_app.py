"""Fixtures for browser tests of the live pages: the app as a user starts it, and Chromium.

`app_server` is daphne in its own process with the embedded worker and the in-memory channel
layer (websockets included), on a SQLite file this session migrates and seeds with the demo
(users `demo` and `reviewer`, given passwords here); `login(username)` opens a signed-in browser
context; `stub_llm` is an OpenAI-compatible stub the server may call, for actors whose answers
must stream slowly. Chromium is the conftest's `chromium`, one per session.

A test module loads them with `pytest_plugins = ("tests.e2e.live_app",)`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.live_server import LiveServer, free_port
from tests.runner.providers.stub_server import StubServer

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"demo": "e2e-demo-password", "reviewer": "e2e-reviewer-password"}

SET_PASSWORDS = """
from django.contrib.auth import get_user_model
for name, password in {passwords!r}.items():
    user = get_user_model().objects.get(username=name)
    user.set_password(password)
    user.save()
"""


@dataclass
class AppServer:
    url: str
    env: dict[str, str]
    log: Path
    passwords: dict[str, str] = field(default_factory=lambda: dict(PASSWORDS))

    def manage(self, *args: str) -> str:
        """Run a management command against the server's database; return its output."""
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=self.env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout


@pytest.fixture(scope="session")
def stub_llm() -> Iterator[StubServer]:
    """Serve the OpenAI wire format locally; the app server may call it (it is allowlisted)."""
    with StubServer() as server:
        yield server


@pytest.fixture(scope="session")
def app_server(
    tmp_path_factory: pytest.TempPathFactory, stub_llm: StubServer
) -> Iterator[AppServer]:
    """Start the app with its embedded worker on a fresh, seeded SQLite database."""
    workdir = tmp_path_factory.mktemp("e2e-server")
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir / 'e2e.sqlite3'}",
        "EMBEDDED_WORKER": "1",
        # DEBUG serves the static files from the source folders (no collectstatic needed).
        "DEBUG": "1",
        "SECRET_KEY": "e2e-only",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "RUN_BEAT_INTERVAL_SECONDS": "0.5",
        "PROVIDER_URL_ALLOWLIST": stub_llm.address,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)
    server = AppServer(url=f"http://127.0.0.1:{port}", env=env, log=workdir / "server.log")
    server.manage("migrate", "--noinput", "-v0")
    server.manage("seed_demo")
    server.manage("shell", "-c", SET_PASSWORDS.format(passwords=server.passwords))
    with LiveServer(env, log=server.log, port=port):
        yield server


class Session:
    """One user's browser context, logged in, collecting the page errors it sees."""

    def __init__(self, browser: Any, server: AppServer, username: str) -> None:
        self.server = server
        self.context = browser.new_context(
            base_url=server.url, viewport={"width": 1280, "height": 900}
        )
        self.errors: list[str] = []
        page = self.new_page()
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", server.passwords[username])
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/")
        page.close()

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        return page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def login(chromium: Any, app_server: AppServer) -> Iterator[Any]:
    """Return `login(username)`: a new browser context signed in as that demo user."""
    sessions: list[Session] = []

    def open_session(username: str) -> Session:
        session = Session(chromium, app_server, username)
        sessions.append(session)
        return session

    yield open_session
    for session in sessions:
        session.close()
