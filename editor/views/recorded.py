"""Recorded runs as recipe tests: "Save as test" on a finished run's monitor, and "Replay
against the draft" on the recipe's tests page.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runner.models import Run
from runner.selectors import run_get

from ..forms.testrun import SaveAsTestForm
from ..models import RecipeTest
from ..recording import RunNotRecordable
from ..services import recipe_test_from_run, recipe_tests_replay
from .editor import BadDocument, editable_recipe, posted_document
from .runs import HtmxHttpRequest
from .testing import TESTS, _tests_context

SAVE_AS_TEST = "runs/_save_as_test.html"


@login_required
@require_POST
def run_save_as_test(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Save the user's own finished run, real or dry, as a test of its recipe under the name
    posted, then show the recipe's tests.

    Another user's run does not exist here (404), even one of a recipe shared with the user.
    A bad name or a run that cannot be saved answers with the form saying why.
    """
    run = run_get(user=request.user, run_id=run_id)
    if run.created_by_id != request.user.pk:
        raise Http404(f"No run {run_id}.")
    recipe = editable_recipe(request, run.recipe.slug)
    form = SaveAsTestForm(request.POST, recipe=recipe)
    save_error = ""
    if form.is_valid():
        try:
            test = recipe_test_from_run(run=run, user=request.user, name=form.cleaned_data["name"])
        except RunNotRecordable as exc:
            save_error = str(exc)
        else:
            return _saved(request, run, test)
    if request.htmx:
        context = {"run": run, "save_form": form, "save_error": save_error}
        return render(request, SAVE_AS_TEST, context)
    for error in [save_error] if save_error else form.errors.get("name", []):
        messages.error(request, error)
    return redirect("run-monitor", run_id=run.pk)


def _saved(request: HtmxHttpRequest, run: Run, test: RecipeTest) -> HttpResponse:
    messages.success(request, f"Run #{run.pk} is saved as the test “{test.name}”.")
    tests_page = reverse("recipe-tests", args=[run.recipe.slug])
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = tests_page
        return response
    return redirect(tests_page)


@login_required
@require_POST
def recipe_tests_replay_view(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Replay every test of the recipe against its draft and show which now part from their
    recorded path, where, and why.

    The saved draft is replayed, or the `document` posted with the request (the canvas).
    """
    recipe = editable_recipe(request, slug)
    document = None
    if "document" in request.POST:
        try:
            document = posted_document(request, recipe)
        except BadDocument as exc:
            return render(
                request, f"{TESTS}#replay", {"recipe": recipe, "replay_error": str(exc)}, status=400
            )
    report = recipe_tests_replay(recipe=recipe, user=request.user, document=document)
    if request.htmx:
        return render(request, f"{TESTS}#replay", {"recipe": recipe, "report": report})
    return render(request, TESTS, _tests_context(request, recipe, report=report))
