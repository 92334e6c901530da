"""Debian's Prometheus scrapes /metrics of the app served by daphne, with the scrape config of
docs/prometheus.yml: with the token its target is up and the series it stores read what the
database holds; a job without the token is down, refused with a 401.

Prometheus asks for OpenMetrics first, so this scrapes the OpenMetrics body (promtool, in
test_metrics.py, lints the text format).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from runner.models import Run
from runner.status import RunStatus
from tests.runner.prometheus import PrometheusServer, docs_scrape_config
from tests.runner.server_process import SERVER_APPLICATION_NAME, ServerProcess
from tests.runner.servers import require_binaries, wait_until
from tests.runner.test_metrics import TOKEN, make_run, make_step
from tests.runner.worker_process import require_services, wait_for_worker_sessions_to_close
from workflows.models import Recipe
from workflows.services import recipe_publish

NO_TOKEN_JOB = "branchline-no-token"
# A scrape every second: each wait below lasts a few scrapes at most.
WAIT = 30


@pytest.fixture
def app(transactional_db: None, tmp_path: Path) -> Iterator[ServerProcess]:
    """The app served by daphne on the test database, with a metrics token."""
    require_binaries(redis=False, prometheus=True)
    require_services()
    server = ServerProcess(tmp_path, METRICS_TOKEN=TOKEN)
    try:
        with server:
            yield server
    finally:
        wait_for_worker_sessions_to_close(application_name=SERVER_APPLICATION_NAME)


@pytest.fixture
def prometheus(app: ServerProcess, tmp_path: Path) -> Iterator[PrometheusServer]:
    """Prometheus scraping the app every second: the docs' job, and a second without token."""
    token_file = tmp_path / "metrics-token"
    token_file.write_text(f"{TOKEN}\n")
    config = docs_scrape_config(
        target=f"127.0.0.1:{app.port}", token_file=token_file, unauthenticated_job=NO_TOKEN_JOB
    )
    with PrometheusServer(config, tmp_path) as server:
        yield server


def succeeded_runs() -> float:
    return float(Run.objects.filter(status=RunStatus.SUCCEEDED).count())


def scraped(prometheus: PrometheusServer) -> bool:
    """Whether the token's job has been scraped and the other refused. A first scrape of a
    cold server on a busy machine may run out of its time: the next one counts."""
    targets = prometheus.targets()
    return (
        set(targets) == {"branchline", NO_TOKEN_JOB}
        and targets["branchline"]["health"] == "up"
        and targets[NO_TOKEN_JOB]["health"] == "down"
    )


def test_prometheus_scrapes_the_figures_with_the_token_and_is_refused_without(
    prometheus: PrometheusServer, app: ServerProcess, recipe: Recipe, user: Any
) -> None:
    version = recipe_publish(recipe=recipe, user=user)
    with transaction.atomic():  # one scrape sees both
        run = make_run(version, user, RunStatus.SUCCEEDED)
        make_step(run, 1, actor_name="scripted-writer", latency_ms=80)

    def logs() -> str:
        return f"{prometheus.targets()}\n{prometheus.log_tail()}\n{app.log_tail()}"

    wait_until(lambda: scraped(prometheus), WAIT, "both jobs were scraped", logs)
    targets = prometheus.targets()
    assert targets["branchline"]["health"] == "up", targets
    assert targets["branchline"]["lastError"] == ""
    assert targets[NO_TOKEN_JOB]["health"] == "down", targets
    assert "HTTP status 401" in targets[NO_TOKEN_JOB]["lastError"], targets
    assert prometheus.query("up") == {"branchline": 1.0, NO_TOKEN_JOB: 0.0}

    succeeded = 'branchline_runs{status="succeeded"}'
    wait_until(
        lambda: prometheus.query(succeeded) == {"branchline": succeeded_runs()},
        WAIT,
        "Prometheus stored the succeeded runs the database holds",
        logs,
    )
    assert succeeded_runs() == 1
    latency = 'branchline_step_latency_seconds_bucket{kind="llm",actor="scripted-writer",le="+Inf"}'
    assert prometheus.query(latency) == {"branchline": 1.0}

    make_run(version, user, RunStatus.SUCCEEDED)

    wait_until(
        lambda: prometheus.query(succeeded) == {"branchline": succeeded_runs()},
        WAIT,
        "a later scrape counted the new run",
        logs,
    )
    assert succeeded_runs() == 2


def test_without_prometheus_a_ci_run_fails_instead_of_skipping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing installed there
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="prometheus, promtool"):
        require_binaries(redis=False, prometheus=True)

    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="prometheus, promtool"):
        require_binaries(redis=False, prometheus=True)
