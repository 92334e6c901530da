"""What `resume_run` and `fork_run` share: finding the run, starting a worker here when there
is no other, and following the run as `run_recipe --wait` does."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from runner import embedded
from runner.models import Run
from runner.reruns import RerunInvalid

from .run_recipe import Command as RunRecipeCommand


class RerunCommand(RunRecipeCommand):
    """A command that runs a run again from one of its steps, and may follow it."""

    def add_follow_arguments(self, parser: CommandParser) -> None:
        """Add `--wait` and `--timeout`, as `run_recipe` has them."""
        parser.add_argument(
            "--wait",
            action="store_true",
            help="follow the run until it stops (through any wait for a reviewer)",
        )
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait at most")

    def find_run(self, run_id: int) -> Run:
        """Return the run, or stop with a CommandError naming the id."""
        run = (
            Run.objects.select_related("recipe", "version", "created_by").filter(pk=run_id).first()
        )
        if run is None:
            raise CommandError(f"no run {run_id}")
        return run

    def start_worker(self, opts: dict[str, Any]) -> None:
        """Start the embedded worker when the queue lives in this process (no Redis)."""
        if settings.EMBEDDED_WORKER and not opts["wait"]:
            # Without Redis the queue lives in this process: nobody else would see the run.
            self.stdout.write("no REDIS_URL: running it here (as with --wait)")
            opts["wait"] = True
        if opts["wait"] and settings.EMBEDDED_WORKER:
            embedded.start()

    def refused(self, exc: RerunInvalid) -> CommandError:
        """Return the CommandError that lists why a resume or a fork was refused."""
        return CommandError("refused:\n  " + "\n  ".join(exc.errors))
