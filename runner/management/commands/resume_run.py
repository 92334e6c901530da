from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from runner.reruns import RerunInvalid, RunNotResumable, run_resume

from ._rerun import RerunCommand


class Command(RerunCommand):
    help = (
        "Resume a failed or cancelled run: a new attempt of the step it stopped at, in the same "
        "run; --wait prints its progress."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--recipe-version",
            type=int,
            default=None,
            help="go on on this published version of the recipe",
        )
        parser.add_argument(
            "--actor", default=None, help="run the step with this model alias of the recipe"
        )
        self.add_follow_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        run = self.find_run(opts["run_id"])
        self.start_worker(opts)
        try:
            run = run_resume(run=run, version=opts["recipe_version"], actor=opts["actor"])
        except RerunInvalid as exc:
            raise self.refused(exc) from None
        except RunNotResumable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"run {run.pk} of {run.recipe.slug} {run.version.label} queued again at step "
            f"'{run.next['step']}'"
        )
        if opts["wait"]:
            self._follow(run, opts["timeout"])
