from __future__ import annotations

import json
import mimetypes
import re
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from runner import embedded, run_files, services
from runner.inputs import InputsInvalid, coerce_cli_value
from runner.models import Run
from runner.run_files import Upload
from runner.status import TERMINAL, RunStatus
from workflows.engine.files import FILES, is_file_type
from workflows.models import Recipe


class Command(BaseCommand):
    help = (
        "Start a run of a recipe's latest published version (--inputs-file: one run per line of "
        "a JSON Lines file); --wait prints its progress."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="an input; a file input's is NAME=@PATH (repeat it for each file of a files input)",
        )
        parser.add_argument("--script", default=None, help='dry run: JSON {"alias": ["reply"]}')
        parser.add_argument(
            "--inputs-file",
            default=None,
            metavar="FILE",
            help="start one run per line of FILE (JSON Lines, '-' for stdin), each line an "
            "object of inputs; all of them or none",
        )
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
        inputs: dict[str, Any] = {}
        for item in opts["input"]:
            name, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--input takes NAME=VALUE, not '{item}'")
            kind = schema.get(name, {}).get("type")
            if is_file_type(kind):
                upload = file_upload(name, value)
                if kind == FILES:
                    inputs.setdefault(name, []).append(upload)
                elif name in inputs:
                    raise CommandError(
                        f"--input {name}: takes one file; for several, its type is files"
                    )
                else:
                    inputs[name] = upload
                continue
            inputs[name] = coerce_cli_value(schema.get(name, {}), value)
        try:
            script = json.loads(opts["script"]) if opts["script"] else None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--script is not JSON: {exc}") from None
        if opts["inputs_file"] and opts["input"]:
            raise CommandError("--input and --inputs-file do not go together")
        if settings.EMBEDDED_WORKER and not opts["wait"]:
            # Without Redis the queue lives in this process: nobody else would see the run.
            self.stdout.write("no REDIS_URL: running it here (as with --wait)")
            opts["wait"] = True
        if opts["wait"] and settings.EMBEDDED_WORKER:
            embedded.start()  # the in-memory broker only reaches a worker in this process
        if opts["inputs_file"]:
            self._start_many(recipe, user, opts["inputs_file"], script, opts)
            return
        try:
            run = services.run_start(user=user, recipe=recipe, inputs=inputs, script=script)
        except run_files.TooManyUploads as exc:
            raise CommandError(str(exc)) from None
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

    def _start_many(
        self, recipe: Recipe, user: Any, path: str, script: object, opts: dict[str, Any]
    ) -> None:
        lines = read_inputs_file(path)
        items = [{"inputs": inputs, "script": script} for _, inputs in lines]
        try:
            runs = services.run_start_many(user=user, recipe=recipe, items=items)
        except InputsInvalid as exc:
            raise CommandError(
                "no run started; these lines do not fit the recipe:\n  "
                + "\n  ".join(_by_line(error, lines) for error in exc.errors)
            ) from None
        except services.RunNotStartable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{len(runs)} runs of {recipe.slug} v{runs[0].version.number} queued: "
            f"{runs[0].pk}..{runs[-1].pk}"
        )
        if opts["wait"]:
            self._follow_many([run.pk for run in runs], opts["timeout"])

    def _follow_many(self, run_ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            statuses = dict(
                Run.objects.filter(pk__in=run_ids)
                .values("status")
                .annotate(n=Count("pk"))
                .values_list("status", "n")
            )
            ended = sum(n for status, n in statuses.items() if status in TERMINAL)
            if ended == len(run_ids) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        summary = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
        if ended < len(run_ids):
            raise CommandError(f"after {timeout:.0f} s: {summary}; the rest go on without this")
        self.stdout.write(summary)
        if statuses.get(RunStatus.FAILED):
            raise CommandError(f"{statuses[RunStatus.FAILED]} of {len(run_ids)} runs failed")

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
                        + (f" ({run.outcome})" if run.outcome_beyond_status else "")
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


def file_upload(name: str, value: str) -> Upload:
    """The file `--input NAME=@PATH` names, as an upload (read no further than the limit)."""
    if not value.startswith("@"):
        raise CommandError(f"--input {name}: a file input takes @PATH (e.g. {name}=@report.pdf)")
    path = Path(value[1:]).expanduser()
    try:
        with path.open("rb") as opened:
            data = opened.read(int(settings.RUN_FILE_MAX_BYTES) + 1)
    except FileNotFoundError:
        raise CommandError(f"--input {name}: no file {path}") from None
    except OSError as exc:
        raise CommandError(f"--input {name}: {path} cannot be read: {exc.strerror}") from None
    return Upload(path.name, data, mimetypes.guess_type(path.name)[0])


def read_inputs_file(path: str) -> list[tuple[int, dict[str, Any]]]:
    """The (line number, inputs) of each non-blank line of a JSON Lines file ('-': stdin)."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"--inputs-file {path}: {exc}") from None
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            inputs = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--inputs-file {path}, line {number}: not JSON: {exc}") from None
        if not isinstance(inputs, dict):
            raise CommandError(f"--inputs-file {path}, line {number}: not an object of inputs")
        lines.append((number, inputs))
    if not lines:
        raise CommandError(f"--inputs-file {path}: no line of inputs")
    return lines


def _by_line(error: str, lines: list[tuple[int, dict[str, Any]]]) -> str:
    """`runs[i].inputs.x: ...` as `line N: inputs.x: ...`."""
    found = re.match(r"runs\[(\d+)\]\.", error)
    if found is None:
        return error
    return f"line {lines[int(found.group(1))][0]}: {error[found.end() :]}"


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
        until = f", until {data['resume_at']}" if data.get("resume_at") else ""
        return f"  → {data['kind']} {data.get('next_step') or ''} ({data['reason']}{until})"
    if type_ == "human_task.created":
        return f"  ⏸ waiting for a decision from {data['group']} (task {data['id']})"
    if type_ == "human_task.decided":
        return f"  ✋ {data.get('decided_by') or 'script'} chose {data['decision']}"
    return ""
