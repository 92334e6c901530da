"""The real-model tier: SmolLM2-135M-Instruct served by llama-cpp-python on loopback.

`make test-models` sets up `.venv-models` (requirements-models.txt) and runs these tests; the
default run leaves this folder out (`--ignore` in pyproject's pytest options). The model's
server (scripts/local_model.py: chat, tool calls and embeddings) starts once for the session.
Without `.venv-models` the tests are skipped, except under `CI=true`, where that is a failure.

The model is tiny and runs on the CPU: the actors ask at temperature 0 with a fixed seed and
for short answers, so a run takes seconds and reads the same each time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.factories import ActorFactory, UserFactory
from tests.live_server import ROOT, free_port
from tests.runner.conftest import runs_settled, worker
from tests.runner.event_checks import events_match_their_schema
from workflows.models import Actor

__all__ = ["events_match_their_schema", "runs_settled", "worker"]

MODELS_PYTHON = ROOT / ".venv-models" / "bin" / "python"
LAUNCHER = ROOT / "scripts" / "local_model.py"
MODEL = "smollm2-135m-instruct"
SEED = 42
# The chat format of llama-cpp-python that answers with tool calls (scripts/local_model.py).
CHAT_FORMAT = "chatml-function-calling"


@dataclass(frozen=True)
class ModelServer:
    """The local model's server: its OpenAI-compatible base URL, its address, its log."""

    base_url: str
    address: str
    log: Path
    launcher: subprocess.Popen[str]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """Serve the model for the session; fail (under CI) or skip when it cannot be served."""
    if not MODELS_PYTHON.exists():
        _unavailable(f"{MODELS_PYTHON} is missing: `make test-models` sets it up")
    port = free_port()
    log = tmp_path_factory.mktemp("model-server") / "server.log"
    command = [str(MODELS_PYTHON), str(LAUNCHER), "--port", str(port), "--log", str(log)]
    command += ["--chat-format", CHAT_FORMAT]
    began = time.monotonic()
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        assert process.stdout is not None
        # The launcher prints the server's URL once it answers, or exits within 120 s.
        ready = process.stdout.readline().strip()
        server = ModelServer(
            base_url=f"http://127.0.0.1:{port}/v1",
            address=f"127.0.0.1:{port}",
            log=log,
            launcher=process,
        )
        if not ready or process.poll() is not None:
            _unavailable(f"the model server did not start ({process.poll()}):\n{server.log_tail()}")
        print(f"\nmodel server ready in {time.monotonic() - began:.1f} s: {ready}")
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(autouse=True)
def allow_model_server(model_server: ModelServer, settings: Any) -> None:
    """Put the model's server (and only it) on the SSRF allowlist; a server that died during an
    earlier test fails the next with its log, not with the runner's "connection refused"."""
    if model_server.launcher.poll() is not None:
        pytest.fail(
            f"the model server exited ({model_server.launcher.returncode}) during an earlier "
            f"test:\n{model_server.log_tail()}"
        )
    settings.PROVIDER_URL_ALLOWLIST = [model_server.address]


@pytest.fixture
def owner(db: None) -> Any:
    return UserFactory(username="modeller")


def model_actor(server: ModelServer, name: str, max_tokens: int, **params: Any) -> Actor:
    """Create an actor of the local model as an OpenAI-compatible provider (no API key)."""
    return ActorFactory(
        name=name,
        provider=Actor.Provider.OPENAI,
        model=MODEL,
        base_url=server.base_url,
        api_key_env="",
        config={},
        params={"temperature": 0, "seed": SEED, "max_tokens": max_tokens, **params},
        timeout_s=120,
    )
