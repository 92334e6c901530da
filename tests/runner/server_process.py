"""The ASGI server (daphne) as a separate process, on the test database and broker.

It serves `config.asgi:application` as the README's production topology does, and sends the runs
it queues to the queue of the worker processes of `worker_process.py` (`QUEUE`), so that only
those take them.

`python -m tests.runner.server_process QUEUE [daphne options] config.asgi:application` is
`daphne` with that default queue.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from config.celery import app as celery_app
from tests.runner.worker_process import QUEUE, ROOT, database_url, worker_env

SERVER_APPLICATION_NAME = "branchline-test-server"
# Connections the kernel holds for daphne until it accepts them (`-b`/`-p` leave Twisted's 50):
# a burst of new connections beyond that overflows into SYN cookies, and some are reset.
LISTEN_BACKLOG = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """One daphne process on 127.0.0.1, in a process group of its own; `env` adds settings."""

    def __init__(self, log_dir: Path, **env: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"daphne-{self.port}.log"
        self.env = worker_env(
            DATABASE_URL=database_url(SERVER_APPLICATION_NAME),
            DEBUG="0",
            EMBEDDED_WORKER="0",
            LOG_LEVEL="WARNING",
            **env,
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.runner.server_process",
                    QUEUE,
                    "-v",
                    "0",
                    "-e",
                    f"tcp:port={self.port}:interface=127.0.0.1:backlog={LISTEN_BACKLOG}",
                    "config.asgi:application",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 60) -> ServerProcess:
        """Wait until the server accepts connections on its port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise AssertionError(f"daphne exited:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return self
            time.sleep(0.1)
        raise AssertionError(f"daphne did not start:\n{self.log_tail()}")

    def kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def main(argv: list[str]) -> None:
    # Imported here, in the server process only: daphne installs Twisted's asyncio reactor
    # when imported, which the test process that imports this module must not get.
    from daphne.cli import CommandLineInterface

    queue, *options = argv
    celery_app.conf.task_default_queue = queue
    CommandLineInterface().run(options)


if __name__ == "__main__":
    main(sys.argv[1:])
