"""Write what the editor pages change: new recipes, drafts replaced from a file or a version,
and recipe tests with the results of their runs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from runner.inputs import InputsInvalid
from runner.models import Run
from runner.services import RunNotStartable, run_start
from runner.status import TERMINAL, RunStatus
from workflows import engine
from workflows.models import Recipe, RecipeVersion
from workflows.recipe_format import DocumentError, load_document
from workflows.services import RecipeConflict, recipe_update
from workflows.validators import RecipeRejected

from .models import RecipeTest
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
    """Start a dry run of the latest published version for every test of the recipe."""
    tests = list(RecipeTest.objects.filter(recipe=recipe).order_by("name"))
    for test in tests:
        test.last_run_at = timezone.now()
        test.last_path, test.last_taken = [], []
        try:
            run = run_start(user=user, recipe=recipe, inputs=test.inputs, script=test.script)
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
