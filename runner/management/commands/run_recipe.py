from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runner import embedded, services
from runner.inputs import InputsInvalid, coerce_cli_value
from runner.models import Run
from runner.status import TERMINAL, RunStatus
from workflows.models import Recipe


class Command(BaseCommand):
    help = "Start a run of a recipe's latest published version; --wait prints its progress."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE")
        parser.add_argument("--script", default=None, help='dry run: JSON {"alias": ["reply"]}')
        parser.add_argument("--user", default=None, help="run as this user (default: the owner)")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="follow the run until it stops (through any wait for a reviewer)",
        )
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait at most")

    def handle(self, *args: Any, **opts: Any) -> None:
        recipe = Recipe.objects.filter(slug=opts["slug"]).select_related("owner").first()
        if recipe is None:
            raise CommandError(f"no recipe '{opts['slug']}'")
        user = recipe.owner
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user '{opts['user']}'")
        version = recipe.latest_version
        schema = version.document.get("inputs", {}) if version else {}
        inputs = {}
        for item in opts["input"]:
            name, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--input takes NAME=VALUE, not '{item}'")
            inputs[name] = coerce_cli_value(schema.get(name, {}), value)
        try:
            script = json.loads(opts["script"]) if opts["script"] else None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--script is not JSON: {exc}") from None
        if settings.EMBEDDED_WORKER and not opts["wait"]:
            # Without Redis the queue lives in this process: nobody else would see the run.
            self.stdout.write("no REDIS_URL: running it here (as with --wait)")
            opts["wait"] = True
        if opts["wait"] and settings.EMBEDDED_WORKER:
            embedded.start()  # the in-memory broker only reaches a worker in this process
        try:
            run = services.run_start(user=user, recipe=recipe, inputs=inputs, script=script)
        except InputsInvalid as exc:
            raise CommandError(
                "the inputs do not fit the recipe:\n  " + "\n  ".join(exc.errors)
            ) from None
        except services.RunNotStartable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"run {run.pk} of {recipe.slug} v{run.version.number} queued")
        if not opts["wait"]:
            return
        self._follow(run, opts["timeout"])

    def _follow(self, run: Run, timeout: float) -> None:
        seen = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in run.events.filter(seq__gt=seen).order_by("seq"):
                seen = event.seq
                line = describe(event.type, event.data)
                if line:
                    self.stdout.write(line)
                if event.type == "run.status" and event.data.get("status") == "waiting_human":
                    task = run.tasks.select_related("group").order_by("-pk").first()
                    if task is not None:
                        self.stdout.write(waiting_for_reviewer(task.group.name, task.pk, timeout))
            run.refresh_from_db(fields=["status", "outcome", "error"])
            if run.status in TERMINAL:
                style = (
                    self.style.SUCCESS if run.status == RunStatus.SUCCEEDED else self.style.ERROR
                )
                self.stdout.write(
                    style(
                        f"run {run.pk} {run.status}"
                        + (f" ({run.outcome})" if run.outcome else "")
                        + (f": {run.error}" if run.error else "")
                    )
                )
                if run.status == RunStatus.FAILED:
                    raise CommandError(run.error or "the run failed")
                return
            time.sleep(0.2)
        raise CommandError(
            f"run {run.pk} is still {run.status} after {timeout:.0f} s; it goes on without "
            f"this command (follow it at {settings.SITE_URL}/runs/{run.pk}/)"
        )


def waiting_for_reviewer(group: str, task_id: int, timeout: float) -> str:
    """Return what to do when the followed run waits for a reviewer."""
    return (
        f"  The run waits for a reviewer of '{group}': decide in the inbox at "
        f"{settings.SITE_URL}/inbox/ (with `make run` serving) or with POST "
        f"/api/tasks/{task_id}/decide. This command keeps following it for up to "
        f"{timeout:.0f} s (--timeout); Ctrl-C stops following, not the run."
    )


def describe(type_: str, data: dict[str, Any]) -> str:
    """Return a one-line summary of a run event for the terminal."""
    if type_ == "step.started":
        return f"▶ #{data['seq']} {data['step']} ({data['kind']}, actor {data.get('actor') or '-'})"
    if type_ == "step.finished":
        text = (data.get("response") or data.get("error") or "").replace("\n", " ")
        return f"  {data['status']} in {data.get('latency_ms') or 0} ms: {text[:100]}"
    if type_ == "branch.evaluated":
        mark = "✔" if data["taken"] else ("·" if data["matched"] else "✗")
        return f"    {mark} {data['branch']}: {data['reason']}"
    if type_ == "branch.taken":
        return f"  → {data['kind']} {data.get('next_step') or ''} ({data['reason']})"
    if type_ == "human_task.created":
        return f"  ⏸ waiting for a decision from {data['group']} (task {data['id']})"
    if type_ == "human_task.decided":
        return f"  ✋ {data.get('decided_by') or 'script'} chose {data['decision']}"
    return ""
