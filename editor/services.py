"""Write what the editor pages change: new recipes, drafts replaced from a file or a version,
recipe tests with the results of their runs, tests recorded from real runs, and replays of
the tests against the draft."""

from __future__ import annotations

import time
from contextlib import suppress
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from runner.actors import HUMAN_PREFIX
from runner.advance import advance
from runner.inputs import InputsInvalid
from runner.models import Run
from runner.selectors import run_steps
from runner.services import RunFinished, RunNotStartable, run_cancel, run_start
from runner.status import TERMINAL, RunStatus
from runner.versions import version_graph
from workflows import engine
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.recipe_format import DocumentError, load_document
from workflows.services import RecipeConflict, recipe_draft_snapshot, recipe_update
from workflows.validators import RecipeRejected

from .models import RecipeTest
from .recording import SOURCES_PREFIX, TOOL_PREFIX, RunNotRecordable, record_run
from .replay import DIFFERS, ERROR, ReplayReport, ReplayResult, last_attempts, replay_verdict
from .selectors import run_path


def recipe_create(*, user: AbstractBaseUser, name: str, slug: str, description: str = "") -> Recipe:
    """Create an empty draft owned by `user`; its steps are drawn in the editor."""
    try:
        with transaction.atomic():
            return Recipe.objects.create(slug=slug, name=name, description=description, owner=user)
    except IntegrityError:
        raise RecipeConflict(f"slug: a recipe '{slug}' exists already") from None


def recipe_draft_import(
    *, recipe: Recipe, data: str | bytes, expected_revision: int | None
) -> list[str]:
    """Replace the draft with a recipe file (its slug is ignored); return the lint warnings."""
    try:
        document = load_document(data, max_bytes=settings.RECIPE_MAX_BYTES)
    except DocumentError as exc:
        raise RecipeRejected(exc.errors) from None
    document["slug"] = recipe.slug
    return recipe_update(recipe=recipe, document=document, expected_revision=expected_revision)


def recipe_version_restore(
    *, recipe: Recipe, version: RecipeVersion, expected_revision: int | None
) -> list[str]:
    """Replace the draft with a published version's document; return the lint warnings."""
    document = {**version.document, "slug": recipe.slug}
    return recipe_update(recipe=recipe, document=document, expected_revision=expected_revision)


def recipe_test_create(
    *,
    recipe: Recipe,
    user: AbstractBaseUser,
    name: str,
    inputs: dict[str, Any],
    script: dict[str, list[str]],
    expected_path: list[str],
    expected_status: str = "",
    run_id: int | None = None,
) -> RecipeTest:
    """Save a test case; with the id of the run it was made from, that run is its first result."""
    test = RecipeTest.objects.create(
        recipe=recipe,
        name=name,
        inputs=inputs,
        script=script,
        expected_path=expected_path,
        expected_status=expected_status,
        created_by=user,
    )
    if run_id is not None and Run.objects.filter(pk=run_id, recipe=recipe).exists():
        test.last_run_id = run_id
        test.last_result = RecipeTest.Result.RUNNING
        test.last_run_at = timezone.now()
        test.save()
        recipe_tests_refresh(recipe=recipe)
        test.refresh_from_db()
    return test


def recipe_test_delete(*, test: RecipeTest) -> None:
    """Delete a recipe test."""
    test.delete()


def recipe_tests_run(*, recipe: Recipe, user: AbstractBaseUser) -> list[RecipeTest]:
    """Start a dry run of the latest published version for every test of the recipe (no
    model is called: see `recipe_test_script`)."""
    tests = list(RecipeTest.objects.filter(recipe=recipe).order_by("name"))
    latest = recipe.latest_version
    graph = None
    if latest is not None:
        with suppress(engine.RecipeInvalid):  # run_start says why the version cannot run
            graph, _document = version_graph(latest.pk, latest.created_at)
    for test in tests:
        test.last_run_at = timezone.now()
        test.last_path, test.last_taken = [], []
        script = recipe_test_script(test.script, graph) if graph else test.script
        try:
            run = run_start(
                user=user,
                recipe=recipe,
                inputs=test.inputs,
                script=script,
                version=latest.number if latest else None,
            )
        except InputsInvalid as exc:
            test.last_run_id, test.last_result = None, RecipeTest.Result.ERROR
            test.last_message = "; ".join(exc.errors)[:500]
        except (RunNotStartable, engine.RecipeInvalid) as exc:
            test.last_run_id, test.last_result = None, RecipeTest.Result.ERROR
            test.last_message = str(exc)[:500]
        else:
            test.last_run_id, test.last_result, test.last_message = (
                run.pk,
                RecipeTest.Result.RUNNING,
                "",
            )
        test.save()
    return tests


def _verdict(test: RecipeTest, run: Run, path: list[str]) -> tuple[str, str]:
    problems = []
    if path != test.expected_path:
        problems.append(
            f"took {' → '.join(path) or 'no step'}; expected {' → '.join(test.expected_path)}"
        )
    if test.expected_status and run.status != test.expected_status:
        problems.append(f"the run {run.status}; expected {test.expected_status}")
    if problems and run.error:
        problems.append(f"run error: {run.error}")
    if problems:
        return RecipeTest.Result.FAILED, "; ".join(problems)[:500]
    return RecipeTest.Result.PASSED, ""


def recipe_tests_refresh(*, recipe: Recipe) -> bool:
    """Record the result of every test whose run has finished; return whether any still runs."""
    still_running = False
    for test in RecipeTest.objects.filter(recipe=recipe, last_result=RecipeTest.Result.RUNNING):
        run = Run.objects.filter(pk=test.last_run_id, recipe=recipe).first()
        if run is None:
            test.last_result, test.last_message = RecipeTest.Result.ERROR, "the run was deleted"
            test.save()
            continue
        if run.status not in TERMINAL and run.status != RunStatus.WAITING_HUMAN:
            still_running = True
            continue
        path, taken = run_path(run)
        test.last_path, test.last_taken = path, taken
        test.last_result, test.last_message = _verdict(test, run, path)
        test.save()
    return still_running


# -- recorded runs, replays and synchronous test runs ------------------------------------------


def recipe_test_from_run(*, run: Run, user: AbstractBaseUser, name: str = "") -> RecipeTest:
    """Save a finished run of the recipe, real or dry, as a recipe test of its recipe.

    Its model answers (the step's, its judge's, classifier's and evaluators'), its reviewers'
    decisions, its tools' results and its searches' hits become the script; its inputs the
    test's inputs; its path and status what the test expects. Raise RunNotRecordable saying
    why a run cannot be saved (still running, cancelled, answers not kept). A dry run is
    recorded the same way: what its script answered and what its unscripted actors did.
    """
    if run.status not in TERMINAL:
        state = (
            "waits for a reviewer"
            if run.status == RunStatus.WAITING_HUMAN
            else f"is still {run.status}"
        )
        raise RunNotRecordable(f"run #{run.pk} {state}: save it as a test once it has finished")
    if run.status == RunStatus.CANCELLED:
        raise RunNotRecordable(
            f"run #{run.pk} was cancelled: its path stops where it was stopped, not where the "
            "recipe led it"
        )
    saved = RecipeTest.objects.filter(source_run=run).values_list("name", flat=True).first()
    if saved is not None:
        raise RunNotRecordable(f"run #{run.pk} is saved as the test '{saved}' already")
    try:
        graph, _document = version_graph(run.version_id, run.version.created_at)
    except engine.RecipeInvalid as exc:
        raise RunNotRecordable(
            f"the version that run #{run.pk} ran no longer parses: {'; '.join(exc.errors)}"
        ) from None
    recording = record_run(run, last_attempts(list(run_steps(run))), graph)
    path, _taken = run_path(run)
    base = name.strip() or f"Run #{run.pk}"
    taken_names = set(
        RecipeTest.objects.filter(recipe_id=run.recipe_id, name__startswith=base).values_list(
            "name", flat=True
        )
    )
    unique = next(
        candidate
        for candidate in (base, *(f"{base} ({n})" for n in range(2, len(taken_names) + 3)))
        if candidate not in taken_names
    )
    try:
        with transaction.atomic():
            return RecipeTest.objects.create(
                recipe_id=run.recipe_id,
                name=unique,
                inputs=recording.inputs,
                script=recording.script,
                expected_path=path,
                expected_status=run.status,
                created_by=user,
                source_run=run,
            )
    except IntegrityError:
        raise RunNotRecordable(
            f"a test called '{unique}' was saved meanwhile: save run #{run.pk} again"
        ) from None


# Every model alias a test's script leaves out answers this, so that no test calls a model.
NO_RECORDED_ANSWER = "@error: no scripted answer for '{alias}' (recipe tests never call a model)"
# How long one test's dry run may take in this process before it counts as an error.
RUN_HERE_TIMEOUT_S = 60.0


def recipe_test_script(
    script: dict[str, Any], graph: engine.RecipeGraph, *, fit: bool = False
) -> dict[str, Any]:
    """Return a test's script for a dry run of `graph` that calls no model.

    Each model alias of the recipe that the script leaves out fails its calls with a clear
    error (actors of the `scripted` provider, which cost nothing, answer as usual). With
    `fit`, the answers for aliases, tools and searches the recipe no longer has are dropped,
    so that a recorded run can be replayed on a changed draft.
    """
    checked = dict(script or {})
    if fit:
        tools = {t for step in graph.steps for t in (step.tool, *step.tools) if t}
        searching = {step.key for step in graph.steps if step.sources}
        checked = {
            key: answers
            for key, answers in checked.items()
            if key in graph.actors
            or (key.startswith(TOOL_PREFIX) and key.removeprefix(TOOL_PREFIX) in tools)
            or (key.startswith(SOURCES_PREFIX) and key.removeprefix(SOURCES_PREFIX) in searching)
        }
    missing = {
        alias: reference
        for alias, reference in graph.actors.items()
        if alias not in checked and not reference.startswith(HUMAN_PREFIX)
    }
    free = set(
        Actor.objects.filter(name__in=missing.values())
        .filter(Q(kind=Actor.Kind.HUMAN) | Q(provider="scripted"))
        .values_list("name", flat=True)
    )
    for alias, reference in missing.items():
        if reference not in free:
            checked[alias] = [NO_RECORDED_ANSWER.format(alias=alias)]
    return checked


def _run_here(run: Run, *, timeout_s: float) -> bool:
    """Execute the run's steps in this process until it rests (finished, or waiting for a
    reviewer); return False if it still ran after `timeout_s` (it is cancelled then).

    A worker may take the run's queued message meanwhile: the run's lease lets only one of
    them execute each step, and this waits for the other.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        advance(run.pk, time_slice=max(0.0, deadline - time.monotonic()))
        run.refresh_from_db()
        if run.status in TERMINAL or run.status == RunStatus.WAITING_HUMAN:
            return True
        if time.monotonic() >= deadline:
            _stop(run)
            return False
        time.sleep(0.02)


def _stop(run: Run) -> None:
    """Cancel a test's run that did not finish (closing a reviewer task it opened)."""
    with suppress(RunFinished):
        run_cancel(run=run)
    run.refresh_from_db()


def recipe_test_run_here(
    *,
    test: RecipeTest,
    user: AbstractBaseUser,
    snapshot: RecipeVersion | None = None,
    timeout_s: float = RUN_HERE_TIMEOUT_S,
) -> RecipeTest:
    """Run one test as a dry run in this process, record its result, and return the test.

    It runs the recipe's latest published version, or `snapshot` (a draft snapshot). Models
    the script leaves out are not called (`recipe_test_script`). A run left waiting for a reviewer
    (its script decides nothing for them) is judged as it stands, then cancelled, so that no
    reviewer is left a task by a test.
    """
    recipe = test.recipe
    test.last_run_at = timezone.now()
    test.last_path, test.last_taken = [], []
    test.last_run_id = None
    try:
        version = snapshot or recipe.latest_version
        if version is None:
            raise RunNotStartable(f"'{recipe.slug}' has no published version yet: publish it first")
        graph, _document = version_graph(version.pk, version.created_at)
        run = run_start(
            user=user,
            recipe=recipe,
            inputs=test.inputs,
            script=recipe_test_script(test.script, graph),
            version=None if snapshot else version.number,
            snapshot=snapshot,
        )
    except (InputsInvalid, engine.RecipeInvalid) as exc:
        test.last_result, test.last_message = RecipeTest.Result.ERROR, "; ".join(exc.errors)[:500]
    except RunNotStartable as exc:
        test.last_result, test.last_message = RecipeTest.Result.ERROR, str(exc)[:500]
    else:
        test.last_run_id = run.pk
        finished = _run_here(run, timeout_s=timeout_s)
        path, taken = run_path(run)
        test.last_path, test.last_taken = path, taken
        if finished:
            test.last_result, test.last_message = _verdict(test, run, path)
        else:
            test.last_result = RecipeTest.Result.ERROR
            test.last_message = f"the run did not finish within {timeout_s:g} s"
        if run.status == RunStatus.WAITING_HUMAN:
            _stop(run)
    test.save()
    return test


def recipe_tests_replay(
    *, recipe: Recipe, user: AbstractBaseUser, document: dict[str, Any] | None = None
) -> ReplayReport:
    """Replay every test of the recipe against its draft (or `document`), in this process.

    Each test's recorded answers drive a dry run of a snapshot of the draft; the report says,
    per test, whether it takes the recorded path, and where it leaves it: the step whose
    branches now lead elsewhere, the branch taken now and before, and their reasons. The
    tests' own results (of the published version) are left as they are.
    """
    report = ReplayReport()
    try:
        snapshot = recipe_draft_snapshot(recipe=recipe, user=user, document=document)
        graph, _document = version_graph(snapshot.pk, snapshot.created_at)
    except (RecipeRejected, engine.RecipeInvalid) as exc:
        report.errors = list(exc.errors)
        return report
    report.version_label = snapshot.label
    for test in RecipeTest.objects.filter(recipe=recipe).select_related("source_run"):
        try:
            run = run_start(
                user=user,
                recipe=recipe,
                inputs=test.inputs,
                script=recipe_test_script(test.script, graph, fit=True),
                snapshot=snapshot,
            )
        except InputsInvalid as exc:
            report.results.append(ReplayResult(test, ERROR, message="; ".join(exc.errors)))
            continue
        except RunNotStartable as exc:
            report.results.append(ReplayResult(test, ERROR, message=str(exc)))
            continue
        if not _run_here(run, timeout_s=RUN_HERE_TIMEOUT_S):
            message = f"the replay did not finish within {RUN_HERE_TIMEOUT_S:g} s"
            report.results.append(ReplayResult(test, ERROR, run=run, message=message))
            continue
        steps = last_attempts(list(run_steps(run)))
        report.results.append(replay_verdict(test, run, steps))
        if run.status == RunStatus.WAITING_HUMAN:
            _stop(run)
    report.results.sort(key=lambda r: (r.verdict != DIFFERS, r.verdict != ERROR, r.test.name))
    return report
