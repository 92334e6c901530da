"""Test runs from the editor: a dry run with scripted answers, recipe tests, branch coverage.

A test run runs the recipe as the canvas shows it, saved or not: the panel posts the canvas
document, and the run pins a hidden draft snapshot of it (DESIGN.md §8). The recipe tests run
the latest published version. The editor highlights the path by step key and branch name.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runner.inputs import InputsInvalid
from runner.multipart import (
    RunUploadHandler,
    bound_uploads,
    posted_fields_checked,
    reads_its_own_upload,
)
from runner.run_files import TooManyUploads
from runner.selectors import run_get, run_steps
from runner.services import RunNotStartable, run_start
from workflows import engine
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_draft_snapshot
from workflows.validators import RecipeRejected, whole_number

from ..forms.testrun import RecipeTestForm, TestRunForm
from ..models import RecipeTest
from ..selectors import branch_coverage, recipe_tests, run_path
from ..services import (
    recipe_test_create,
    recipe_test_delete,
    recipe_tests_refresh,
    recipe_tests_run,
)
from .editor import BadDocument, bad_request, editable_recipe, posted_document

PANELS = "editor/panels.html"
TESTS = "editor/recipe_tests.html"


def _latest_document(recipe: Recipe) -> tuple[Any, dict[str, Any] | None]:
    version = recipe.latest_version
    return version, (version.document if version else None)


@reads_its_own_upload  # CSRF checked by _testrun_panel, once the uploads are bounded
@login_required
@require_POST
def testrun_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """Show the test-run form of the posted canvas document; with `start`, start a dry run of it.

    Without a posted `document`, the saved draft is used. The document is checked as saving it
    would be, and a document with errors is refused with them, nothing written; the run pins a
    hidden snapshot of it. Reopening the panel keeps the values typed (`input_*`, `script_*`).
    """
    recipe = editable_recipe(request, slug)
    # The inputs' own bounds are in the posted document, read with the files: each file is
    # kept to RUN_FILE_MAX_BYTES here, and checked against its input by run_start.
    return _testrun_panel(request, recipe, bound_uploads(request, {}))


@csrf_protect
def _testrun_panel(request: HttpRequest, recipe: Recipe, uploads: RunUploadHandler) -> HttpResponse:
    posted_fields_checked(request)
    if uploads.refused is not None:
        form = TestRunForm(request.POST, document=document_from_recipe(recipe))
        form.add_error(None, str(uploads.refused).removeprefix("inputs: "))
        context = {"recipe": recipe, "form": form, "run": None, "document_errors": []}
        return render(request, f"{PANELS}#testrun-panel", context, status=uploads.refused.status)
    try:
        document = (
            posted_document(request, recipe)
            if "document" in request.POST
            else document_from_recipe(recipe)
        )
    except BadDocument as exc:
        return bad_request(exc)
    starting = request.POST.get("start") == "1"
    if starting:
        form = TestRunForm(request.POST, request.FILES, document=document)
    else:
        typed = {k: v for k, v in request.POST.items() if k.startswith(("input_", "script_"))}
        form = TestRunForm(initial=typed, document=document)
    run = None
    document_errors: list[str] = []
    if starting and form.is_valid():
        try:
            # One transaction: inputs or a script refused by run_start leave no snapshot behind.
            with transaction.atomic():
                snapshot = recipe_draft_snapshot(
                    recipe=recipe, user=request.user, document=document
                )
                run = run_start(
                    user=request.user,
                    recipe=recipe,
                    inputs=form.inputs(),
                    script=form.script(),
                    snapshot=snapshot,
                )
        except RecipeRejected as exc:
            document_errors = exc.errors
        except TooManyUploads as exc:
            form.add_error(None, str(exc).removeprefix("inputs: "))
        except InputsInvalid as exc:
            form.add_run_errors(exc.errors)
        except (RunNotStartable, engine.RecipeInvalid) as exc:
            form.add_error(None, str(exc))
    context: dict[str, Any] = {
        "recipe": recipe,
        "form": form,
        "run": run,
        "document_errors": document_errors,
    }
    return render(request, f"{PANELS}#testrun-panel", context)


def _run_of(request: HttpRequest, recipe: Recipe, raw: str) -> Any:
    run_id = whole_number(raw)
    if run_id is None:
        raise Http404("No such run.")
    run = run_get(user=request.user, run_id=run_id)
    if run.recipe_id != recipe.pk:
        raise Http404("No such run.")
    return run


@login_required
@require_GET
def testrun_result(request: HttpRequest, slug: str) -> HttpResponse:
    """Show a finished test run: its path, every branch evaluation, and 'save as test'."""
    recipe = editable_recipe(request, slug)
    run = _run_of(request, recipe, request.GET.get("run", ""))
    path, _taken = run_path(run)
    form = RecipeTestForm(
        recipe=recipe,
        initial={
            "name": "",
            "inputs": run.inputs,
            "script": run.script or {},
            "expected_path": " → ".join(path),
            "expected_status": run.status,
        },
    )
    return render(
        request,
        f"{PANELS}#testrun-result",
        {
            "recipe": recipe,
            "run": run,
            "run_id": run.pk,
            "path": path,
            "steps": list(run_steps(run)),
            "form": form,
        },
    )


def _tests_context(request: HttpRequest, recipe: Recipe, **extra: Any) -> dict[str, Any]:
    running = recipe_tests_refresh(recipe=recipe)
    tests = list(recipe_tests(recipe=recipe))
    version, document = _latest_document(recipe)
    coverage = branch_coverage(document or document_from_recipe(recipe), tests)
    return {
        "recipe": recipe,
        "tests": tests,
        "running": running,
        "version": version,
        "coverage": coverage,
        "coverage_data": coverage.as_data(),
        **extra,
    }


def _tests_template(request: HttpRequest) -> str:
    return f"{TESTS}#tests" if request.htmx else TESTS


@login_required
@require_http_methods(["GET", "POST"])
def recipe_tests_page(request: HttpRequest, slug: str) -> HttpResponse:
    """List the recipe's tests with their results and the branch coverage; POST saves a test."""
    recipe = editable_recipe(request, slug)
    if request.method == "GET":
        return render(request, _tests_template(request), _tests_context(request, recipe))
    form = RecipeTestForm(request.POST, recipe=recipe)
    saved = None
    if form.is_valid():
        run_id = request.POST.get("run", "")
        saved = recipe_test_create(
            recipe=recipe,
            user=request.user,
            name=form.cleaned_data["name"],
            inputs=form.cleaned_data["inputs"],
            script=form.cleaned_data["script"],
            expected_path=form.cleaned_data["expected_path"],
            expected_status=form.cleaned_data["expected_status"],
            run_id=whole_number(run_id),
        )
    response = render(
        request,
        f"{PANELS}#test-save",
        {"recipe": recipe, "form": form, "saved": saved, "run_id": request.POST.get("run", "")},
    )
    if saved is not None:
        response["HX-Trigger"] = json.dumps({"recipe-tests-changed": {"name": saved.name}})
    return response


@login_required
@require_POST
def recipe_tests_run_all(request: HttpRequest, slug: str) -> HttpResponse:
    """Start a dry run for every test of the recipe."""
    recipe = editable_recipe(request, slug)
    recipe_tests_run(recipe=recipe, user=request.user)
    return render(request, _tests_template(request), _tests_context(request, recipe))


@login_required
@require_POST
def recipe_test_remove(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Delete one recipe test."""
    recipe = editable_recipe(request, slug)
    recipe_test_delete(test=get_object_or_404(RecipeTest, recipe=recipe, pk=pk))
    return render(request, _tests_template(request), _tests_context(request, recipe))
