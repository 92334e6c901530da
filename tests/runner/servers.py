"""Throwaway services for the outage tests: a Redis and a PostgreSQL cluster of their own, which
a test may stop, kill, freeze and restart, and `celery beat` beside the worker processes.

The shared PostgreSQL (5432) and Redis (6379) are never touched: each service here is a child
process on a free loopback port, with its files in a temporary directory, gone when it stops.
PostgreSQL refuses to run as root, so as root its cluster belongs to the `postgres` user.

The application's processes (daphne, `celery worker`, `celery beat`) are given the production
environment of `stack_env`: DEBUG off, no embedded worker, these services' URLs.

`python -m tests.runner.servers seed` reads a JSON description of users, groups, actors and
recipes on stdin, writes them with the ORM into the database of `DATABASE_URL`, and prints what
a client needs to sign in (an API token and a session cookie) as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from celery import Celery

from tests.live_server import free_port
from tests.runner.worker_process import QUEUE, ROOT, WorkerProcess

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
SECRET_KEY = "outage-tests-only-not-a-secret"


def pg_bin(name: str) -> str | None:
    """Return the path of a PostgreSQL server program (initdb, pg_ctl), newest version first."""
    for directory in PG_BIN_DIRS:
        if (directory / name).exists():
            return str(directory / name)
    return shutil.which(name)


def require_binaries(
    *, postgres: bool = False, redis: bool = True, prometheus: bool = False
) -> None:
    """Skip unless the service programs are installed; with CI=true, fail instead."""
    missing = []
    if redis and not shutil.which("redis-server"):
        missing.append("redis-server")
    if postgres:
        missing += [name for name in ("initdb", "pg_ctl") if pg_bin(name) is None]
    if prometheus:  # Debian's package `prometheus` brings both
        missing += [name for name in ("prometheus", "promtool") if not shutil.which(name)]
    if not missing:
        return
    reason = "throwaway services need these programs: " + ", ".join(missing)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def wait_until(check: Any, timeout: float, what: str, detail: Any = None) -> None:
    """Call `check` until it is true; fail after `timeout` seconds, saying what was awaited."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting until {what}{extra}")
        time.sleep(0.05)


def file_tail(path: Path, lines: int = 40) -> str:
    """Return the last `lines` lines of a log file."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


class RedisServer:
    """A `redis-server` that keeps nothing on disk: a restart comes back empty, as a cache
    node that was replaced. The port stays the same across restarts."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.log_path = directory / f"redis-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        command += ["--dir", str(self.directory), "--logfile", str(self.log_path)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)
        wait_until(self.answers, 10, f"redis on port {self.port} answers", self.log_tail)
        return self

    def answers(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"redis exited:\n{self.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server (SIGTERM: a shutdown; SIGKILL: a crash) and wait until it is gone."""
        if self.process is None:
            return
        if self.frozen:
            self.thaw()
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def freeze(self) -> None:
        """SIGSTOP the server: connections stay open and nothing answers, as in a long stall."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def log_tail(self, lines: int = 20) -> str:
        return file_tail(self.log_path, lines)


class PostgresCluster:
    """A PostgreSQL cluster of its own (initdb into a temporary directory), trusting loopback.

    `stop` and `start` take it down and up on the same port, as a restart or failover does.
    """

    def __init__(self) -> None:
        # Not under pytest's tmp_path: as root the cluster belongs to `postgres`, who must be
        # able to reach its directory.
        self.directory = Path(tempfile.mkdtemp(prefix="branchline-pg-"))
        self.data = self.directory / "data"
        self.log_path = self.directory / "postgres.log"
        self.port = free_port()
        self.owner = "postgres" if os.geteuid() == 0 else None
        if self.owner:
            entry = pwd.getpwnam(self.owner)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)

    def _run(self, *command: str, timeout: float = 60) -> None:
        prefix = ["runuser", "-u", self.owner, "--"] if self.owner else []
        result = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=timeout, check=False
        )
        if result.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}\n{self.log_tail()}"
            )

    def init(self) -> PostgresCluster:
        initdb = pg_bin("initdb")
        assert initdb is not None
        self._run(
            initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        return self

    def start(self) -> None:
        # fsync off: what a commit wrote still reaches the kernel, which a stopped server
        # (even one killed with `-m immediate`) does not lose; only a machine crash would.
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=200"
        )
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl is not None
        self._run(
            pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.log_path), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` disconnects every client; `immediate` is a crash."""
        pg_ctl = pg_bin("pg_ctl")
        assert pg_ctl is not None
        self._run(pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str = "postgres", application_name: str = "") -> str:
        query = f"?application_name={application_name}" if application_name else ""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}{query}"

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def destroy(self) -> None:
        with contextlib.suppress(AssertionError):
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        return file_tail(self.log_path, lines)


def stack_env(*, database_url: str, redis_url: str, **overrides: Any) -> dict[str, str]:
    """Return the settings of the application's processes on the throwaway services, in
    production mode (DEBUG off, no embedded worker), for `WorkerProcess`, daphne and beat."""
    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": SECRET_KEY,
        "DEBUG": "0",
        "EMBEDDED_WORKER": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "INFO",
    }
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def process_env(env: dict[str, str]) -> dict[str, str]:
    """Return this process's environment with `env` over it, and the checkout importable."""
    merged = dict(os.environ)
    merged.update(env)
    merged["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return merged


def manage(env: dict[str, str], *args: str, stdin: str = "", timeout: float = 120) -> str:
    """Run a Python module (`-m ...`) or `manage.py` command with `env`; return its output."""
    command = [sys.executable, *args] if args[0] == "-m" else [sys.executable, "manage.py", *args]
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=process_env(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def seed(env: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """Write `spec` into the database of `env` (see `seed_main`); return the credentials."""
    out = manage(env, "-m", "tests.runner.servers", "seed", stdin=json.dumps(spec))
    return json.loads(out.strip().splitlines()[-1])


class Beat:
    """`celery beat`: the reaper and task timeouts on their schedule, sent to the workers'
    queue (`QUEUE`)."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_path = log_dir / "beat.log"
        self.schedule = log_dir / "beat-schedule"
        self.env = process_env(env)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Beat:
        command = [sys.executable, "-m", "tests.runner.servers", "beat", QUEUE]
        command += ["-l", "info", "-s", str(self.schedule), "--pidfile="]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
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

    def kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log_path, lines)


def wait_worker_ready(worker: WorkerProcess, broker_url: str, timeout: float = 90) -> None:
    """Wait until a worker on the throwaway broker answers a ping."""
    # Not the current app: the runner's tasks (`shared_task`) are sent through the current app.
    app = Celery("outage-probe", broker=broker_url, set_as_current=False)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not worker.alive:
                raise AssertionError(f"worker {worker.name} exited:\n{worker.log_tail()}")
            if app.control.ping(destination=[worker.hostname], timeout=0.5):
                return
        raise AssertionError(f"worker {worker.name} did not start:\n{worker.log_tail()}")
    finally:
        app.close()


# --- run inside the application's processes ---------------------------------------------------


def seed_main() -> None:
    """Write the users, groups, actors and recipes of the JSON on stdin; print credentials."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from tests.factories import ActorFactory
    from workflows.services import recipe_import, recipe_publish

    spec = json.load(sys.stdin)
    user = User.objects.create_user(spec["user"], password=None)
    for name in spec.get("groups", []):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    for fields in spec.get("actors", []):
        ActorFactory(**fields)
    for document in spec.get("recipes", []):
        recipe = recipe_import(user=user, data=document).recipe
        recipe_publish(recipe=recipe, user=user)
    client = Client()
    client.force_login(user)
    token = Token.objects.create(user=user).key
    print(json.dumps({"token": token, "cookie": f"sessionid={client.cookies['sessionid'].value}"}))


def beat_main(queue: str, options: list[str]) -> None:
    from config.celery import app

    app.conf.task_default_queue = queue
    app.start(["beat", *options])


if __name__ == "__main__":
    if sys.argv[1] == "seed":
        seed_main()
    elif sys.argv[1] == "beat":
        beat_main(sys.argv[2], sys.argv[3:])
