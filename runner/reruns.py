"""Run again from a step: resume a stopped run, or fork a run at one of its steps.

**Resume.** A failed or cancelled run is queued again at the step it stopped at: the step
that failed, or the one it was at or about to run when it was cancelled. It runs as a new
attempt of that step, in the same run, with a new seq: every StepRun it has is kept, and
the run's state goes on from where it was. It may go on on another published version of
its recipe (one that has that step), or with another actor for an llm step.

**Fork.** A new run linked to its parent (`Run.parent`, `Run.forked_at_seq`) starts with
copies of the parent's steps before `at_seq` and their evaluations, and the state the parent
had after them, rebuilt by replaying them (`engine.replay`: nothing is evaluated again);
then it runs the step at `at_seq` and goes on. That step may be given an answer instead of
being run (`steps.given`), and the fork may have other inputs, another version or a script.
The parent is not changed.
"""

from __future__ import annotations

from collections import Counter
from contextlib import suppress
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from workflows import engine
from workflows.engine.files import file_refs, is_file_type
from workflows.engine.replay import RecordedStep, replay
from workflows.models import Recipe, RecipeVersion

from . import dispatch, events, run_files, store
from .inputs import InputsInvalid, check_inputs
from .models import ModelCall, Run, RunEvent, RunFile, StepRun
from .selectors import run_steps
from .services import check_script
from .status import RunStatus, StepStatus
from .steps import TRANSIENT, classify, decision_tree, given, sources, tool_calls
from .versions import version_graph

RESUMABLE = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
# The kinds whose actor a resume may change: those that run `next["actor"]`.
ACTOR_KINDS = frozenset({"llm"})


class RunNotResumable(Exception):
    """The run is not stopped, or has nowhere to go on from (the message says why)."""


class RerunInvalid(Exception):
    """What was asked of a resume or a fork does not fit the run; `errors` lists every
    `field: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


# --------------------------------------------------------------------------------------------
# Resume


def run_resume(*, run: Run, version: int | None = None, actor: str | None = None) -> Run:
    """Queue a failed or cancelled run again at the step it stopped at: a new attempt of it.

    `version` moves the run to that published version of its recipe (it must have the step);
    `actor` runs the step with that alias of the recipe instead of its own (an llm step's).
    """
    with transaction.atomic():
        locked = store.lock(run.pk)
        if locked.status not in RESUMABLE:
            raise RunNotResumable(
                f"Only a failed or cancelled run can be resumed; run {locked.pk} is "
                f"{locked.get_status_display().lower()}."
            )
        state = engine.RunState.from_dict(locked.state)
        if state.step_count >= state.max_steps:
            raise RunNotResumable(
                f"Run {locked.pk} has used its {state.max_steps} steps: it would fail again at once."
            )
        pinned = locked.version if version is None else _published(locked.recipe, version)
        graph, document = _graph(pinned, locked.recipe)
        current = graph
        if pinned.pk != locked.version_id:
            # Its own version may no longer read: where it stopped then comes from its rows.
            with suppress(engine.RecipeInvalid):
                current, _ = version_graph(locked.version_id, locked.version.created_at)
        at, pending = _stopped_at(locked, current)
        errors: list[str] = []
        key = at["step"]
        if not graph.has_step(key):
            errors.append(
                f"version: {pinned.label} has no step '{key}', where run {locked.pk} stopped"
            )
        if pinned.pk != locked.version_id:
            state.step_order = [step.key for step in graph.steps]
            errors += _fit_problems(locked, graph, document)
        if actor is not None and graph.has_step(key):
            errors += _actor_problems(graph, graph.step(key), actor)
            at = {**at, "actor": actor}
        if errors:
            raise RerunInvalid(errors)
        if pending is not None:
            # A human step that opened its task, which was closed when the run stopped: its
            # StepRun is kept, and the step's new attempt takes the next seq.
            state.record(pending.step_key, pending.response, overlay_facts=False)
            locked.next_seq += 1
        locked.version, locked.state = pinned, state.to_dict()
        store.resume(locked, None, [events.run_queued(version=pinned.number)], at=at)
        dispatch.send_on_commit(locked.pk)
    return locked


def _stopped_at(run: Run, graph: engine.RecipeGraph) -> tuple[dict[str, Any], StepRun | None]:
    """Return where a stopped run goes on (its `next`), and the StepRun of a human step that
    waited for its task when the run stopped (None if there is none).

    In order: the run's own `next` (a cancelled run keeps it); the human step at its next seq;
    the step a worker had started at its next seq (a run that failed because its workers kept
    dying on it); the step that failed; the first step (nothing ran yet); the step the last
    branch taken went to (a run failed because its version can no longer be read).
    """
    seq = run.next_seq
    pending = run.steps.filter(seq=seq).order_by("-attempt").first()
    if run.next.get("step"):
        return dict(run.next), None if run.next.get("resume_task") else pending
    if pending is not None:
        return {"step": pending.step_key}, pending
    started = _event(run, "step.started", seq)
    if started is not None:
        return {"step": started["step"]}, None
    last = run.steps.filter(seq=seq - 1).order_by("-attempt").first()
    if last is not None and last.status in (StepStatus.FAILED, StepStatus.TIMED_OUT):
        return {"step": last.step_key}, None
    if seq == 1 and graph.steps:
        return {"step": graph.steps[0].key}, None
    taken = _event(run, "branch.taken", seq - 1)
    if taken is not None and taken.get("next_step"):
        return {"step": taken["next_step"]}, None
    raise RunNotResumable(f"Run {run.pk} has no step left to resume: its last step ended it.")


def _event(run: Run, type_: str, seq: int) -> dict[str, Any] | None:
    """Return the data of the run's latest event of `type_` about step `seq`, if any."""
    found = (
        RunEvent.objects.filter(run=run, type=type_, data__seq=seq)
        .order_by("-seq")
        .values_list("data", flat=True)
        .first()
    )
    return found if isinstance(found, dict) else None


def _actor_problems(graph: engine.RecipeGraph, step: engine.StepSpec, alias: str) -> list[str]:
    """Return why `alias` cannot run `step` instead of its own actor (nothing when it can)."""
    if step.kind not in ACTOR_KINDS:
        return [
            f"actor: step '{step.key}' is a {step.kind} step: only an llm step's actor can be changed"
        ]
    models = sorted(a for a, name in graph.actors.items() if not name.startswith("@human:"))
    if alias not in models:
        return [f"actor: {alias!r} is not a model alias of this recipe ({', '.join(models)})"]
    return []


# --------------------------------------------------------------------------------------------
# Fork


def run_fork(
    *,
    user: AbstractBaseUser,
    run: Run,
    at_seq: int,
    response: str | None = None,
    inputs: dict[str, Any] | None = None,
    version: int | None = None,
    script: object = None,
) -> Run:
    """Start a new run from `run`'s step `at_seq`: with copies of the steps before it, and
    the state after them; the parent is not changed.

    `response` records the step at `at_seq` with that answer instead of running it (its
    branches are evaluated on it). `inputs` replace the parent's of those names (null drops
    one); `version` is another published version of the recipe (it must have every step the
    fork copies or runs); `script` makes the fork a dry run with those answers from its
    first step on (without, it keeps the parent's script, where the parent was in it).
    """
    steps = list(run_steps(run).filter(seq__lte=at_seq))
    at = next((s for s in reversed(steps) if s.seq == at_seq), None)
    if at is None:
        last = run.steps.order_by("-seq").values_list("seq", flat=True).first()
        raise RerunInvalid(
            [
                f"at_seq: run {run.pk} has steps 1 to {last}"
                if last
                else f"at_seq: run {run.pk} has no step yet"
            ]
        )
    history = [s for s in steps if s.seq < at_seq]
    pinned = run.version if version is None else _published(run.recipe, version)
    graph, document = _graph(pinned, run.recipe)
    errors: list[str] = []
    missing = sorted({s.step_key for s in [*history, at] if not graph.has_step(s.step_key)})
    if missing:
        errors.append(
            f"version: {pinned.label} has no step {', '.join(map(repr, missing))} of the "
            f"steps the fork copies or runs"
        )
    checked_inputs: dict[str, Any] = {}
    files: list[run_files.PendingFile] = []
    try:
        schema = document.get("inputs", {})
        given_inputs = inputs or {}
        run_files.take_upload_slots(user, run_files.upload_count(schema, given_inputs))
        uploaded, files = run_files.take_uploads(
            {name: spec for name, spec in schema.items() if name in given_inputs}, given_inputs
        )
        # The parent's files are copied: each run owns its files (and deletes them with it).
        kept, copies = run_files.copies_for(
            run.pk, {name: value for name, value in run.inputs.items() if name not in given_inputs}
        )
        files += copies
        errors += foreign_files(schema, kept, {str(copy.id) for copy in copies})
        checked_inputs = check_inputs(schema, {**kept, **uploaded})
    except InputsInvalid as exc:
        errors += exc.errors
    checked_script: dict[str, Any] | None = None
    try:
        checked_script = check_script(run.script if script is None else script, graph)
    except InputsInvalid as exc:
        errors += exc.errors
    next_: dict[str, Any] = {"step": at.step_key}
    if response is not None and graph.has_step(at.step_key):
        try:
            given.read(graph.step(at.step_key), response)
        except given.AnswerRefused as exc:
            errors.append(f"response: {exc}")
        next_[given.ANSWER] = response
    if errors:
        raise RerunInvalid(errors)
    state = engine.RunState.start(graph, checked_inputs, max_steps=settings.RUN_MAX_STEPS)
    move = replay(graph, state, [_recorded(s) for s in _latest_per_seq(history)])
    if state.step_count != at_seq - 1:
        raise RerunInvalid([f"at_seq: run {run.pk}'s steps before {at_seq} are not one per seq"])
    if (
        move is not None
        and move.kind in ("repeat", "retry_actor")
        and move.next_step == at.step_key
    ):
        # The parent ran the step again: so does the fork, with the same suffix or actor.
        if move.prompt_suffix:
            next_["prompt_suffix"] = move.prompt_suffix
        if move.kind == "retry_actor":
            next_["actor"] = state.actor_override = at.actor_alias or move.actor
        # And with the same prompt variant (a suffix the parent's attempt was recorded with
        # comes back through `prompt_suffix`).
        if not at.variant.startswith(engine.SUFFIX_MARK):
            next_["variant"] = at.variant
    if move is not None and move.feedback and move.next_step == at.step_key:
        # The parent sent a failure (RECLASSIFICATION, REPLANNING) or a reviewer's comment
        # to the step as its {feedback}: so does the fork.
        next_["feedback"] = move.feedback
    calls = _calls_before(run, at_seq, history)
    if script is not None:
        # A new script answers from its first answer on.
        calls = {alias: n for alias, n in calls.items() if alias not in (checked_script or {})}
    fork = Run(
        recipe=run.recipe,
        version=pinned,
        created_by=user,
        inputs=checked_inputs,
        script=checked_script,
        options=dict(run.options or {}),  # classified as its parent was
        state=state.to_dict(),
        next=next_,
        next_seq=at_seq,
        calls=calls,
        parent=run,
        forked_at_seq=at_seq,
        enqueued_at=timezone.now(),
    )
    with run_files.storing() as keep, transaction.atomic():
        store.start(fork, [events.run_queued(version=pinned.number)], history=history)
        keep(fork.pk, files)
        dispatch.send_on_commit(fork.pk)
    return fork


def _latest_per_seq(steps: list[StepRun]) -> list[StepRun]:
    """Return the latest attempt at each seq, in seq order (the one the state recorded)."""
    latest: dict[int, StepRun] = {}
    for step in steps:
        if step.seq not in latest or step.attempt > latest[step.seq].attempt:
            latest[step.seq] = step
    return [latest[seq] for seq in sorted(latest)]


def _recorded(step: StepRun) -> RecordedStep:
    """Return a StepRun as the engine's replay reads it: its result, the branch taken."""
    selected = step.details.get("selected") if step.kind == "classify" else None
    result = engine.StepResult(
        step_key=step.step_key,
        response=step.response,
        decision=step.decision or None,
        comment=step.response if step.kind == "human" else None,
        route_selection=tuple(selected) if isinstance(selected, list) else None,
        hits=() if "retrieval" in step.details else None,
        # How it failed, for the severity of a branch that sent the failure back.
        error=step.error or None,
        timed_out=step.status == StepStatus.TIMED_OUT,
        transient=bool(step.details.get(TRANSIENT)),
        classification_failure=step.details.get(classify.FAILURE) or None,
        http_status=(step.details.get("http") or {}).get("status"),
        # The facts a decision tree's detectors found (a judge is not asked again).
        facts=step.details.get(decision_tree.DETECTED) if step.kind == decision_tree.KIND else None,
    )
    taken = next((e.branch for e in step.evaluations.all() if e.taken), None)
    return RecordedStep(result, taken=taken, actor=step.actor_alias or None)


def _calls_before(run: Run, at_seq: int, history: list[StepRun]) -> dict[str, int]:
    """Return how many answers each scripted alias (or scripted actor) had given `run` before
    step `at_seq`: where the fork goes on in the answers its actors and script give in order."""
    counts: Counter[str] = Counter(
        ModelCall.objects.filter(run=run, seq__lt=at_seq)
        .exclude(purpose=ModelCall.Purpose.EMBEDDING)
        .values_list("actor_alias", flat=True)
    )
    script = run.script or {}
    for step in history:
        if step.kind == "human" and step.actor_alias in script:
            counts[step.actor_alias] += 1  # a scripted reviewer's decision
        if "retrieval" in step.details and sources.script_key(step.step_key) in script:
            counts[sources.script_key(step.step_key)] += 1
        for call in step.details.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("scripted"):
                counts[tool_calls.script_key(str(call.get("tool", "")))] += 1
        http_record = step.details.get("http")
        if isinstance(http_record, dict) and http_record.get("scripted"):
            attempts = http_record.get("attempts")
            counts[engine.http_script_key(step.step_key)] += len(attempts or [])
    return dict(counts)


# --------------------------------------------------------------------------------------------
# Both


def _published(recipe: Recipe, number: int) -> RecipeVersion:
    """Return the recipe's published version `number`; raise RerunInvalid if it has none."""
    found = RecipeVersion.objects.published().filter(recipe=recipe, number=number).first()
    if found is None:
        raise RerunInvalid([f"version: '{recipe.slug}' has no published version {number}"])
    return found


def _graph(version: RecipeVersion, recipe: Recipe) -> tuple[engine.RecipeGraph, dict[str, Any]]:
    """Return the version's parsed graph and document; raise RerunInvalid if it cannot run."""
    try:
        return version_graph(version.pk, version.created_at)
    except engine.RecipeInvalid as exc:
        raise RerunInvalid(
            [f"version: {version.label} of '{recipe.slug}' cannot run: {'; '.join(exc.errors)}"]
        ) from None


def foreign_files(schema: dict[str, Any], inputs: dict[str, Any], owned: set[str]) -> list[str]:
    """Why a file input of `schema` holds a ref to no file in `owned` (the run's own files):
    a value that was no file input's in another version, shaped like a ref, names no file a
    run may take as its own."""
    return [
        f"inputs.{name}: not a file given to this run; upload one"
        for name, spec in schema.items()
        if is_file_type(spec.get("type"))
        and inputs.get(name) is not None
        and not all(ref.get("file") in owned for ref in file_refs(inputs[name]))
    ]


def _fit_problems(run: Run, graph: engine.RecipeGraph, document: dict[str, Any]) -> list[str]:
    """Return why the run's inputs or script do not fit another version (nothing if they do)."""
    errors: list[str] = []
    schema = document.get("inputs", {})
    own = {str(pk) for pk in RunFile.objects.filter(run=run).values_list("pk", flat=True)}
    errors += foreign_files(schema, run.inputs, own)
    try:
        check_inputs(schema, run.inputs)
    except InputsInvalid as exc:
        errors += exc.errors
    try:
        check_script(run.script, graph)
    except InputsInvalid as exc:
        errors += exc.errors
    return errors
