from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from runner.inputs import coerce_cli_value
from runner.reruns import RerunInvalid, run_fork

from ._rerun import RerunCommand


class Command(RerunCommand):
    help = (
        "Fork a run at one of its steps: a new run with copies of the steps before it, that "
        "goes on from it; --wait prints its progress."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument("--at-seq", type=int, required=True, help="the step (its #) to fork at")
        parser.add_argument(
            "--response",
            default=None,
            help="record that step with this answer instead of running it (a human step: "
            "one of its options, or 'option: comment')",
        )
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="an input to change (the others are the run's)",
        )
        parser.add_argument(
            "--recipe-version", type=int, default=None, help="another published version"
        )
        parser.add_argument(
            "--script", default=None, help='dry run: JSON {"alias": ["reply"]} from the fork on'
        )
        parser.add_argument("--user", default=None, help="fork as this user (default: the run's)")
        self.add_follow_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        run = self.find_run(opts["run_id"])
        user = run.created_by
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user '{opts['user']}'")
        schema = run.version.document.get("inputs", {})
        inputs = {}
        for item in opts["input"]:
            name, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--input takes NAME=VALUE, not '{item}'")
            inputs[name] = coerce_cli_value(schema.get(name, {}), value)
        try:
            script = json.loads(opts["script"]) if opts["script"] is not None else None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--script is not JSON: {exc}") from None
        self.start_worker(opts)
        try:
            fork = run_fork(
                user=user,
                run=run,
                at_seq=opts["at_seq"],
                response=opts["response"],
                inputs=inputs,
                version=opts["recipe_version"],
                script=script,
            )
        except RerunInvalid as exc:
            raise self.refused(exc) from None
        self.stdout.write(
            f"run {fork.pk} of {fork.recipe.slug} {fork.version.label} queued: a fork of run "
            f"{run.pk} at step {fork.forked_at_seq}"
        )
        if opts["wait"]:
            self._follow(fork, opts["timeout"])
