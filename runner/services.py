"""Start and cancel runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from workflows import engine
from workflows.models import Recipe, RecipeVersion

from . import dispatch, events, run_files, store, tracing
from .claims import SCRIPTED_TIMEOUT
from .human import tasks_close_for_run
from .inputs import InputsInvalid, check_inputs
from .models import Run
from .status import TERMINAL, Outcome, RunStatus
from .steps.sources import SCRIPT_PREFIX
from .steps.tool_calls import SCRIPT_PREFIX as TOOL_SCRIPT_PREFIX
from .versions import version_graph


class RunNotStartable(Exception):
    """The recipe has no published version, or the version asked for does not exist."""


class RunFinished(Exception):
    """The run has finished already."""


def check_script(script: object, graph: engine.RecipeGraph) -> dict[str, Any] | None:
    """Return a dry-run script normalised to alias -> answers, or raise InputsInvalid.

    A reviewer alias answers with one of its steps' options (`revise: comment` carries a
    comment) or `@timeout`, so that a typo fails here, not as a decision nobody offered.
    `sources.STEPKEY` gives the hits of a step with sources, per execution, instead of its
    searches: `[[{"document", "text", "score", "heading"?}, ...], ...]`. `tool.SERVER.TOOL`
    answers the calls of a tool the recipe's steps call, in order (text or JSON; `@error: why`
    fails a call), instead of its server. `http.STEPKEY` answers an http step's requests, in
    order: text (a 200 with that body) or `{"status", "body", "headers"?}`.
    """
    if script is None:
        return None
    if not isinstance(script, dict):
        raise InputsInvalid(["script: must be an object of actor alias: [answers]"])
    aliases = graph.actors
    errors: list[str] = []
    checked: dict[str, Any] = {}
    for alias, answers in script.items():
        if alias not in aliases and alias.startswith(SCRIPT_PREFIX):
            key = alias.removeprefix(SCRIPT_PREFIX)
            if not graph.has_step(key) or not graph.step(key).sources:
                errors.append(f"script.{alias}: no step '{key}' of this recipe searches sources")
                continue
            hits, problems = engine.read_script_hits(answers, f"script.{alias}")
            errors += problems
            checked[alias] = hits
            continue
        if alias not in aliases and alias.startswith(TOOL_SCRIPT_PREFIX):
            tool = alias.removeprefix(TOOL_SCRIPT_PREFIX)
            if tool not in {t for step in graph.steps for t in (step.tool, *step.tools) if t}:
                errors.append(f"script.{alias}: no step of this recipe calls the tool '{tool}'")
                continue
            tool_answers, problems = engine.read_script_tool(answers, f"script.{alias}")
            errors += problems
            checked[alias] = tool_answers
            continue
        if alias not in aliases and alias.startswith(engine.HTTP_SCRIPT_PREFIX):
            key = alias.removeprefix(engine.HTTP_SCRIPT_PREFIX)
            if not graph.has_step(key) or graph.step(key).kind != "http":
                errors.append(f"script.{alias}: no step '{key}' of this recipe is an http step")
                continue
            http_answers, problems = engine.read_script_http(answers, f"script.{alias}")
            errors += problems
            checked[alias] = http_answers
            continue
        if alias not in aliases:
            errors.append(
                f"script.{alias}: not an actor alias of this recipe ({', '.join(aliases)})"
            )
            continue
        if isinstance(answers, str):
            answers = [answers]
        if (
            not isinstance(answers, list)
            or not answers
            or not all(isinstance(a, str) for a in answers)
        ):
            errors.append(f"script.{alias}: must be a non-empty list of strings")
            continue
        options = {
            o
            for step in graph.steps
            if step.kind == "human" and step.actor == alias
            for o in step.options
        }
        if options:
            choices = sorted(options | {SCRIPTED_TIMEOUT})
            errors += [
                f"script.{alias}[{i}]: {answer.partition(':')[0].strip()!r} is not one of "
                f"{', '.join(choices)}"
                for i, answer in enumerate(answers)
                if answer.partition(":")[0].strip() not in choices
            ]
        checked[alias] = answers
    if errors:
        raise InputsInvalid(errors)
    return checked


def run_start(
    *,
    user: AbstractBaseUser,
    recipe: Recipe,
    inputs: object,
    script: object = None,
    version: int | None = None,
    snapshot: RecipeVersion | None = None,
    trigger: str = "",
    classification: str | None = None,
) -> Run:
    """Queue a run of the recipe's latest (or a given) published version, or of `snapshot`, a
    draft snapshot of the recipe (`workflows.services.recipe_draft_snapshot`: a test run of the
    draft as the editor shows it). `trigger` says what started it when no person did.
    `classification`: "bypass" or "ask", how its classify steps classify (None: as the
    CLASSIFICATION_BYPASS setting says)."""
    item = {"inputs": inputs, "script": script, "classification": classification}
    (run,) = _start_runs(user, recipe, [item], version, snapshot, name_items=False, trigger=trigger)
    return run


def run_start_many(
    *,
    user: AbstractBaseUser,
    recipe: Recipe,
    items: Sequence[dict[str, object]],
    version: int | None = None,
) -> list[Run]:
    """Queue a run of one version of the recipe for each item's `inputs` (and dry-run
    `script`), in one transaction: all of them, or, when any item is refused, none.

    InputsInvalid lists every item's problems, each prefixed `runs[i].`.
    """
    return _start_runs(user, recipe, items, version, None, name_items=True)


CLASSIFICATION_MODES = ("ask", "bypass")


def _options(item: dict[str, object]) -> dict[str, object]:
    """The run's start options, as `Run.options` keeps them (only what was asked)."""
    mode = item.get("classification")
    if mode is None:
        return {}
    if mode not in CLASSIFICATION_MODES:
        raise InputsInvalid([f"classification: must be ask or bypass, got {mode!r}"])
    return {"classification": mode}


def _start_runs(
    user: AbstractBaseUser,
    recipe: Recipe,
    items: Sequence[dict[str, object]],
    version: int | None,
    snapshot: RecipeVersion | None,
    *,
    name_items: bool,
    trigger: str = "",
) -> list[Run]:
    pinned = _version_to_run(recipe, version, snapshot)
    try:
        graph, document = version_graph(pinned.pk, pinned.created_at)  # parsed once per process
    except engine.RecipeInvalid as exc:
        # Published before a check it fails was added (e.g. the bounds on regexes).
        raise RunNotStartable(
            f"version: {pinned.label} of '{recipe.slug}' cannot run: {'; '.join(exc.errors)}"
        ) from None
    schema = document.get("inputs", {})
    # Counted before any is read: a flood of refused uploads is still a flood.
    run_files.take_upload_slots(
        user, sum(run_files.upload_count(schema, item.get("inputs")) for item in items)
    )
    runs: list[Run] = []
    files: list[list[run_files.PendingFile]] = []
    errors: list[str] = []
    for index, item in enumerate(items):
        try:
            with_refs, pending = run_files.take_uploads(schema, item.get("inputs"))
            checked_inputs = check_inputs(schema, with_refs)
            checked_script = check_script(item.get("script"), graph)
        except InputsInvalid as exc:
            prefix = f"runs[{index}]." if name_items else ""
            errors += [prefix + error for error in exc.errors]
            continue
        state = engine.RunState.start(graph, checked_inputs, max_steps=settings.RUN_MAX_STEPS)
        runs.append(
            Run(
                recipe=recipe,
                version=pinned,
                created_by=user,
                inputs=checked_inputs,
                script=checked_script,
                options=_options(item),
                state=state.to_dict(),
                next={"step": graph.steps[0].key},
                enqueued_at=timezone.now(),
                trigger=trigger,
            )
        )
        files.append(pending)
    if errors:
        raise InputsInvalid(errors)
    with run_files.storing() as keep, transaction.atomic():
        store.start_many(runs, [events.run_queued(version=pinned.number)])
        for run, pending in zip(runs, files, strict=True):
            keep(run.pk, pending)
        for run in runs:
            dispatch.send_on_commit(run.pk)
    return runs


def input_schema(recipe: Recipe, version: int | None = None) -> dict[str, Any]:
    """The inputs the version of the recipe a run would start on takes (none when it cannot
    start: starting it says why)."""
    try:
        pinned = _version_to_run(recipe, version, None)
        _, document = version_graph(pinned.pk, pinned.created_at)
    except (RunNotStartable, engine.RecipeInvalid):
        return {}
    schema = document.get("inputs", {})
    return schema if isinstance(schema, dict) else {}


def _version_to_run(
    recipe: Recipe, version: int | None, snapshot: RecipeVersion | None
) -> RecipeVersion:
    """The draft snapshot given, or the published version asked for, or the latest one."""
    if snapshot is not None:
        if snapshot.recipe_id != recipe.pk or not snapshot.is_draft_snapshot:
            raise RunNotStartable(f"version: not a draft snapshot of '{recipe.slug}'")
        return snapshot
    # The document is left to version_graph, which parses it once per process.
    published = RecipeVersion.objects.published().filter(recipe=recipe).defer("document")
    pinned = (
        published.filter(number=version).first()
        if version
        else published.order_by("-number").first()
    )
    if pinned is None:
        raise RunNotStartable(
            f"version: '{recipe.slug}' has no version {version}"
            if version
            else f"'{recipe.slug}' has no published version yet: publish it first"
        )
    return pinned


def run_cancel(*, run: Run) -> Run:
    """Stop a run before its next step and close its open tasks."""
    with transaction.atomic():
        locked = store.lock(run.pk)
        if locked.status in TERMINAL:
            raise RunFinished(f"The run has {locked.status} already.")
        pending = tasks_close_for_run(locked)
        pending.append(
            events.run_finished(status=RunStatus.CANCELLED, outcome=Outcome.CANCELLED, error="")
        )
        store.cancel(locked, pending)
    tracing.run_finished(
        run_id=locked.pk,
        created_at=locked.created_at,
        workflow=run.recipe.slug,
        status=locked.status,
        outcome=locked.outcome,
        error="",
    )
    return locked
