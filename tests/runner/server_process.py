"""The ASGI server (daphne) as a separate process, on the test database and broker.

It serves `config.asgi:application` as the README's production topology does, and sends the runs
it queues to the queue of the worker processes of `worker_process.py` (`QUEUE`), so that only
those take them.

`python -m tests.runner.server_process QUEUE [daphne options] config.asgi:application` is
`daphne` with that default queue.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from config.celery import app as celery_app
from tests.live_server import LiveServer, free_port
from tests.runner.worker_process import QUEUE, database_url, worker_env

SERVER_APPLICATION_NAME = "branchline-test-server"


class ServerProcess(LiveServer):
    """One daphne process on the test database and broker; `env` adds settings."""

    def __init__(self, log_dir: Path, **env: Any) -> None:
        port = free_port()
        super().__init__(
            worker_env(
                DATABASE_URL=database_url(SERVER_APPLICATION_NAME),
                DEBUG="0",
                EMBEDDED_WORKER="0",
                LOG_LEVEL="WARNING",
                **env,
            ),
            log=log_dir / f"daphne-{port}.log",
            port=port,
            module=["tests.runner.server_process", QUEUE],
            verbosity=0,
        )


def main(argv: list[str]) -> None:
    # Imported here, in the server process only: daphne installs Twisted's asyncio reactor
    # when imported, which the test process that imports this module must not get.
    from daphne.cli import CommandLineInterface

    queue, *options = argv
    celery_app.conf.task_default_queue = queue
    CommandLineInterface().run(options)


if __name__ == "__main__":
    main(sys.argv[1:])
