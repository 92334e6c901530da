"""Debian's Prometheus (apt package `prometheus`) for the tests of /metrics: `promtool check
metrics` on a scrape's body, and a `prometheus` server of its own that scrapes the app.

    with PrometheusServer(docs_scrape_config(...), tmp_path) as prometheus:
        prometheus.targets()["branchline"]["health"]  # "up"

The server listens on a free loopback port and keeps its data in the given directory; leaving
the `with` stops it (SIGTERM, then SIGKILL if it lingers) and waits until it is gone.
"""

from __future__ import annotations

import contextlib
import copy
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.live_server import free_port
from tests.runner.servers import file_tail, wait_until
from tests.runner.worker_process import ROOT

DOCS_CONFIG = ROOT / "docs" / "prometheus.yml"


def promtool_check_metrics(body: str) -> tuple[int, str]:
    """Return promtool's exit code and what it printed about a scrape's body in the text
    format (it reads no other): (0, "") when it finds nothing to flag."""
    done = subprocess.run(
        ["promtool", "check", "metrics"],
        input=body,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def docs_scrape_config(
    *, target: str, token_file: Path, interval: str = "1s", unauthenticated_job: str = ""
) -> dict[str, Any]:
    """Return the scrape config of docs/prometheus.yml with this test's target, token file and
    interval put in; with `unauthenticated_job`, a second job of that name sends no token."""
    config: dict[str, Any] = yaml.safe_load(DOCS_CONFIG.read_text())
    (job,) = config["scrape_configs"]
    job["scrape_interval"] = interval
    job["scrape_timeout"] = interval
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"] = [{"targets": [target]}]
    if unauthenticated_job:
        anonymous = {key: value for key, value in job.items() if key != "authorization"}
        config["scrape_configs"].append(
            {**copy.deepcopy(anonymous), "job_name": unauthenticated_job}
        )
    return config


class PrometheusServer:
    """`prometheus` with `config`, its storage and log in `directory`, on 127.0.0.1."""

    def __init__(self, config: dict[str, Any], directory: Path) -> None:
        self.config = config
        self.config_path = directory / "prometheus.yml"
        self.storage = directory / "prometheus-data"
        self.log_path = directory / "prometheus.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        command = [
            "prometheus",
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.storage}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until(self.ready, 30, f"Prometheus on port {self.port} is ready", self.log_tail)
        return self

    def ready(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log_tail()}")
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """Return the `data` of a successful answer of the HTTP API (`/api/v1/<path>`)."""
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        response.raise_for_status()
        answer = response.json()
        assert answer["status"] == "success", answer
        return answer["data"]

    def targets(self) -> dict[str, dict[str, Any]]:
        """Return the active targets by job name (each job here has one target)."""
        return {t["labels"]["job"]: t for t in self.api("targets", state="active")["activeTargets"]}

    def query(self, expression: str) -> dict[str, float]:
        """Return the instant vector of `expression` now: each series' job to its value."""
        result = self.api("query", query=expression)
        assert result["resultType"] == "vector", result
        return {series["metric"]["job"]: float(series["value"][1]) for series in result["result"]}

    def stop(self, timeout: float = 10) -> None:
        """Stop the server as a service manager would (SIGTERM), and for good if it lingers."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log_path, lines)

    def __enter__(self) -> PrometheusServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
