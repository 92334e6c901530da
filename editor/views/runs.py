"""Runs: start one from a form, list them with live status badges, watch one live, cancel it.

The monitor is rendered here from the database; its page script (static/monitor/monitor.js)
follows the run's websocket and asks these views again for the pieces that changed.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from runner import tracing
from runner.inputs import InputsInvalid
from runner.models import Run, RunEvent, StepRun
from runner.multipart import (
    RunUploadHandler,
    bound_uploads,
    file_bounds,
    posted_fields_checked,
    reads_its_own_upload,
)
from runner.run_files import TooManyUploads, file_response
from runner.selectors import run_file_get, run_get, run_steps, runs_listed, runs_of_recipe
from runner.services import RunFinished, RunNotStartable, run_cancel, run_start
from runner.status import TERMINAL, RunStatus
from workflows import engine
from workflows.apis.pagination import PageOfList, keyset_window
from workflows.models import Recipe, RecipeVersion
from workflows.selectors import recipe_get, recipes_visible_to

from ..catalog import catalog
from ..forms.testrun import TestRunForm
from .file_inputs import shown_files

MONITOR = "runs/monitor.html"
RUNS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@reads_its_own_upload  # CSRF checked by _run_new, once the uploads are bounded
@login_required
@require_http_methods(["GET", "POST"])
def run_new(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Start a run of the recipe's latest published version, optionally with scripted answers."""
    recipe = recipe_get(user=request.user, slug=slug)
    version = recipe.latest_version
    if version is None:
        return render(request, "runs/run_new.html", {"recipe": recipe, "form": None}, status=409)
    bounds = file_bounds(version.document.get("inputs", {}), prefix=TestRunForm.INPUT_PREFIX)
    return _run_new(request, recipe, version, bound_uploads(request, bounds))


@csrf_protect
def _run_new(
    request: HtmxHttpRequest, recipe: Recipe, version: RecipeVersion, uploads: RunUploadHandler
) -> HttpResponse:
    posted_fields_checked(request)
    posted = request.method == "POST"
    form = TestRunForm(
        request.POST if posted else None,
        request.FILES if posted else None,
        document=version.document,
    )
    refused = 400
    if uploads.refused is not None:
        form.add_error(None, str(uploads.refused).removeprefix("inputs: "))
        refused = uploads.refused.status
    elif posted and form.is_valid():
        try:
            run = run_start(
                user=request.user,
                recipe=recipe,
                inputs=form.inputs(),
                script=form.script() or None,
                classification=form.cleaned_data.get("classification") or None,
            )
        except TooManyUploads as exc:
            form.add_error(None, str(exc).removeprefix("inputs: "))
            refused = 429
        except InputsInvalid as exc:
            form.add_run_errors(exc.errors)
        except (RunNotStartable, engine.RecipeInvalid) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("run-monitor", run_id=run.pk)
    script_open = any(request.POST.get(field.html_name) for field in form.script_fields)
    return render(
        request,
        "runs/run_new.html",
        {"recipe": recipe, "version": version, "form": form, "script_open": script_open},
        status=refused if form.is_bound else 200,
    )


@login_required
@require_GET
def run_file(request: HtmxHttpRequest, run_id: int, file_id: uuid.UUID) -> FileResponse:
    """Download one of a run's files (to those who may see the run; 404 for anyone else)."""
    return file_response(run_file_get(user=request.user, run_id=run_id, file_id=file_id))


@login_required
@require_GET
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """List the runs the user may see, newest first, filtered by recipe and status."""
    runs = runs_listed(request.user)
    recipe_slug = request.GET.get("recipe", "")
    status = request.GET.get("status", "")
    if recipe_slug:
        runs = runs_of_recipe(runs, recipe_slug)
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    page = keyset_window(runs, request.GET, per_page=RUNS_PER_PAGE)
    cursor_error = "This link does not name a place in the list of runs." if page.bad_cursor else ""
    context = {
        "page": page,
        "count": _run_count(runs, page),
        "cursor_error": cursor_error,
        "recipes": recipes_visible_to(request.user),
        "statuses": RunStatus.choices,
        "status_labels": dict(RunStatus.choices),
        "recipe_slug": recipe_slug,
        "status": status if status in RunStatus.values else "",
        "terminal": TERMINAL,
    }
    template = "runs/run_list.html"
    if request.htmx:
        template += "#runs-table"
    return render(request, template, context, status=400 if cursor_error else 200)


def _run_count(runs: QuerySet[Run], page: PageOfList) -> int:
    """Return how many runs the list holds: counted only when it has more than one page."""
    return runs.count() if page.has_other_pages and not page.bad_cursor else len(page.items)


@login_required
@require_GET
def run_monitor(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Show a run: status, the timeline of its steps with their evaluations, its graph."""
    # The run first: its event_seq is where the websocket resumes, and everything read after it
    # is at least as new, so a replayed event may only repeat what the page shows already.
    run = run_get(user=request.user, run_id=run_id)
    steps = list(run_steps(run).select_related("task__group", "task__decided_by"))
    group_ids = set(request.user.groups.values_list("pk", flat=True))
    files = shown_files(run)
    given = {f.file.input_name for f in files}
    context = {
        "run": run,
        # A file input's value is its files' refs: the files are listed on their own.
        "inputs": {name: value for name, value in run.inputs.items() if name not in given},
        "files": files,
        "steps": steps,
        "running": _running_step(run, steps),
        "reviewer_group_ids": group_ids,
        "trace": _trace(run),
        "monitor": {
            "run": run.pk,
            "after": run.event_seq,
            "status": run.status,
            "document": run.version.document,
            "path": _path(steps),
            "cardUrl": reverse("run-step-card", args=[run.pk, 0]),
            "headerUrl": reverse("run-header", args=[run.pk]),
        },
        # The graph's labels are drawn from the catalog.
        "catalog": catalog(),
    }
    return render(request, MONITOR, context)


@login_required
@require_GET
def run_header(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Render the monitor's header (status, outcome, error, Cancel) for the page to swap in."""
    run = run_get(user=request.user, run_id=run_id)
    return render(request, f"{MONITOR}#run-header", {"run": run})


@login_required
@require_GET
def run_step_card(request: HtmxHttpRequest, run_id: int, seq: int) -> HttpResponse:
    """Render one step card of the monitor's timeline."""
    run = run_get(user=request.user, run_id=run_id)
    step = (
        run_steps(run)
        .select_related("task__group", "task__decided_by")
        .filter(seq=seq)
        .order_by("-attempt")
        .first()
    )
    if step is None:
        raise Http404(f"Run {run.pk} has no step {seq} yet.")
    group_ids = set(request.user.groups.values_list("pk", flat=True))
    return render(
        request, f"{MONITOR}#step-card", {"run": run, "step": step, "reviewer_group_ids": group_ids}
    )


@login_required
@require_POST
def run_cancel_view(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Cancel the run; htmx swaps the header, a plain form post goes back to the monitor."""
    run = run_get(user=request.user, run_id=run_id)
    error = ""
    try:
        run = run_cancel(run=run)
    except RunFinished as exc:
        error = str(exc)
        run.refresh_from_db()
    if request.htmx:
        return render(request, f"{MONITOR}#run-header", {"run": run, "cancel_error": error})
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Run {run.pk} was cancelled.")
    return redirect("run-monitor", run_id=run.pk)


def _trace(run: Run) -> dict[str, str] | None:
    """Return the run's trace id and its link, when runs are traced or a link is configured."""
    url = tracing.trace_url(run.pk, run.created_at)
    if not url and not tracing.enabled():
        return None
    return {"id": tracing.trace_id_hex(run.pk, run.created_at), "url": url}


def _running_step(run: Run, steps: list[StepRun]) -> dict[str, Any] | None:
    """Return the step that started but has not committed yet (its card streams text), if any."""
    if run.status in TERMINAL:
        return None
    last_seq = steps[-1].seq if steps else 0
    started = (
        RunEvent.objects.filter(run=run, type="step.started", data__seq__gt=last_seq)
        .order_by("-seq")
        .first()
    )
    return started.data if started else None


def _path(steps: list[StepRun]) -> list[dict[str, Any]]:
    """Return the steps the run went through and the branch each took, for the graph."""
    path = []
    for step in steps:
        taken = next((e.branch for e in step.evaluations.all() if e.taken), None)
        path.append({"seq": step.seq, "step": step.step_key, "branch": taken})
    return path
