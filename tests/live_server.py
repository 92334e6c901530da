"""The app served by daphne in a process of its own: the one way the tests and benchmarks start a
live server (browser tests, the embedded default, the API fuzzer, load and fault tests).

    with LiveServer(env, log=tmp_path / "daphne.log") as server:
        urllib.request.urlopen(server.url + "/login/")

`env` is the server's whole environment (settings come from it, as in production).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Connections the kernel holds for daphne until it accepts them (`-b`/`-p` leave Twisted's 50):
# a burst of new connections beyond that overflows into SYN cookies, and some are reset.
LISTEN_BACKLOG = 1024


def free_port() -> int:
    """Return a loopback port nothing listens on (until something binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """daphne serving `config.asgi` on 127.0.0.1, in a process group of its own.

    `module` is what `python -m` runs: daphne itself, or a wrapper that takes daphne's options.
    Another server on a port of its own overrides `name` and `command`.
    """

    name = "daphne"

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        log: Path | None = None,
        port: int | None = None,
        module: Sequence[str] = ("daphne",),
        verbosity: int = 1,
    ) -> None:
        self.env = dict(env)
        self.log_path = log
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.module = list(module)
        self.verbosity = verbosity
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """Return the server's command line (daphne serving the app on `port`)."""
        endpoint = f"tcp:port={self.port}:interface=127.0.0.1:backlog={LISTEN_BACKLOG}"
        options = ["-v", str(self.verbosity), "-e", endpoint]
        return [sys.executable, "-m", *self.module, *options, "config.asgi:application"]

    def start(self) -> LiveServer:
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(self.log_path.open("ab")) if self.log_path else None
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env,
                stdout=out or subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() takes all it started
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 60) -> LiveServer:
        """Wait until the server accepts connections; fail with its log if it does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 10) -> None:
        """Stop the server as an operator would (SIGTERM), then for good if it lingers."""
        if not self.alive:
            return
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the server's process group: nothing of it gets to clean up."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = 60) -> str:
        if self.log_path is None:
            return "(no log kept)"
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LiveServer:
        try:
            return self.start().wait_ready()
        except BaseException:
            self.kill()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
