"""Runs on the canvas: what the last runs of a published version did, as JSON for the editor's
overlay (static/editor/runs-overlay.js) to draw on the draft.

`GET /recipes/SLUG/runs-overlay/?version=N&last=M` answers, over the last M runs (default 50,
at most 100) of version N (default: the latest version that has runs), how many of them ran
each step and took each branch, with the newest of the runs that took it to link to. The
versions offered are the published ones: the hidden draft snapshots that the editor's test runs
pin are neither offered nor counted. Only recipes the user may see answer (another's is 404);
a bad `last` or `version` is a 400 that says why, a version the recipe does not have a 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from runner import stats
from runner.models import Run
from workflows.models import RecipeVersion
from workflows.selectors import recipe_get
from workflows.validators import whole_number

from ..selectors import document_outline


class OverlayRefused(ValueError):
    """The overlay was asked for something it does not draw (400)."""


def _errors(status: int, *messages: str) -> JsonResponse:
    return JsonResponse({"errors": list(messages)}, status=status)


def chosen_limit(request: HttpRequest) -> int:
    """Return how many runs were asked for (`?last=`), the default when none was."""
    raw = request.GET.get("last", "")
    if not raw:
        return stats.LAST_RUNS_DEFAULT
    limit = whole_number(raw)
    if limit is None or not 1 <= limit <= stats.LAST_RUNS_MAX:
        raise OverlayRefused(f"last: a whole number from 1 to {stats.LAST_RUNS_MAX}")
    return limit


def chosen_version(request: HttpRequest) -> int | None:
    """Return the version number asked for (`?version=`), or None for the default."""
    raw = request.GET.get("version", "")
    if not raw:
        return None
    number = whole_number(raw)
    if number is None:
        raise OverlayRefused("version: a version number, e.g. 3")
    return number


@login_required
@require_GET
def recipe_runs_overlay(request: HttpRequest, slug: str) -> JsonResponse:
    """Answer what the last runs of a version of the recipe did, per step and branch."""
    try:
        recipe = recipe_get(user=request.user, slug=slug)
    except Http404 as exc:
        return _errors(404, str(exc))
    try:
        limit = chosen_limit(request)
        number = chosen_version(request)
    except OverlayRefused as exc:
        return _errors(400, str(exc))
    versions = stats.versions_run(recipe=recipe)
    if number is None:
        version = next((v for v, has_runs in versions if has_runs), None)
    else:
        version = next((v for v, _ in versions if v.number == number), None)
        if version is None:
            return _errors(404, f"version: '{slug}' has no published version {number}")
    found = (
        stats.last_runs(user=request.user, version=version, limit=limit)
        if version is not None
        else stats.LastRuns(runs=[], visits={}, branches=[])
    )
    return JsonResponse(
        {
            "recipe": recipe.slug,
            "last": limit,
            "choices": list(stats.LAST_RUNS_CHOICES),
            "versions": [
                {"number": v.number, "label": v.label, "has_runs": has_runs}
                for v, has_runs in versions
            ],
            "version": _version(version),
            "runs": [_run(run) for run in found.runs],
            "steps": [{"step": key, "runs": n} for key, n in sorted(found.visits.items())],
            "branches": [
                {
                    "step": b.step,
                    "branch": b.branch,
                    "runs": b.runs,
                    "taken": b.taken,
                    "run_ids": list(b.run_ids),
                }
                for b in found.branches
            ],
        }
    )


def _version(version: RecipeVersion | None) -> dict[str, Any] | None:
    """Return the version's number and label, and its steps' keys with their branches' names
    (the canvas marks the draft's branches that the version does not have)."""
    if version is None:
        return None
    graph = [
        {"step": step.key, "branches": [b.name for b in step.branches]}
        for step in document_outline(version.document)
    ]
    return {"number": version.number, "label": version.label, "graph": graph}


def _run(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": reverse("run-monitor", args=[run.pk]),
        "status": run.status,
        "status_label": run.get_status_display(),
        "outcome": run.outcome,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
