"""Compare two runs: both paths on one graph, and the steps side by side with what changed.

The page is a table first (it says everything without JavaScript); its script
(static/monitor/compare.js) draws the recipe's graph with the steps and branches each run took.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runner.compare import MAX_DIFF_CHARS, RunComparison, compare_runs, run_duration_ms
from runner.models import Run
from runner.selectors import run_get
from workflows.validators import whole_number

from ..catalog import catalog

TEMPLATE = "runs/compare.html"


@login_required
@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    """Compare run `a` with run `b`; from the run list, `run` twice (the older becomes A)."""
    if "a" not in request.GET and "b" not in request.GET and "run" in request.GET:
        return _from_selection(request, request.GET.getlist("run"))
    ids: dict[str, int] = {}
    errors = []
    for name in ("a", "b"):
        value = request.GET.get(name)
        number = None if value is None else whole_number(value)
        if number is None:
            problem = "is missing" if value is None else f"is not a run number: {value!r}"
            errors.append(f"Run {name.upper()} {problem}.")
        else:
            ids[name] = number
    if errors:
        return render(request, TEMPLATE, {"errors": errors}, status=400)
    # Either run unseen is no comparison (404), as for one run.
    run_a = run_get(user=request.user, run_id=ids["a"])
    run_b = run_get(user=request.user, run_id=ids["b"])
    comparison = compare_runs(run_a, run_b)
    context = {
        "comparison": comparison,
        "a": run_a,
        "b": run_b,
        "swap_url": _compare_url(run_b.pk, run_a.pk),
        "rows": _run_rows(comparison),
        "input_rows": _input_rows(run_a, run_b),
        "max_diff_chars": MAX_DIFF_CHARS,
        "graph": _graph(comparison),
        # The graph's labels are drawn from the catalog.
        "catalog": catalog(),
    }
    return render(request, TEMPLATE, context)


def _compare_url(a: int, b: int) -> str:
    return f"{reverse('run-compare-page')}?{urlencode({'a': a, 'b': b})}"


def _from_selection(request: HttpRequest, selected: list[str]) -> HttpResponse:
    """Open the comparison of the two runs ticked in the run list, or say what is wrong."""
    numbers = sorted({n for n in map(whole_number, selected) if n is not None})
    if len(numbers) != 2 or len(selected) != 2:
        errors = [f"Select exactly two runs to compare (you selected {len(selected)})."]
        return render(request, TEMPLATE, {"errors": errors}, status=400)
    return redirect(_compare_url(numbers[0], numbers[1]))


def _run_rows(comparison: RunComparison) -> list[dict[str, Any]]:
    """Return the run-level figures of A and B with their delta, as the summary table shows."""
    a, b, deltas = comparison.a, comparison.b, comparison.deltas
    steps_a = [p.a for p in comparison.steps if p.a is not None]
    steps_b = [p.b for p in comparison.steps if p.b is not None]
    return [
        {"label": "Steps", "a": len(steps_a), "b": len(steps_b), "delta": deltas.steps},
        {
            "label": "Latency of the steps (ms)",
            "a": sum(s.latency_ms or 0 for s in steps_a),
            "b": sum(s.latency_ms or 0 for s in steps_b),
            "delta": deltas.latency_ms,
        },
        {
            "label": "Duration (ms)",
            "a": run_duration_ms(a),
            "b": run_duration_ms(b),
            "delta": deltas.duration_ms,
        },
        {"label": "Tokens in", "a": a.tokens_in, "b": b.tokens_in, "delta": deltas.tokens_in},
        {"label": "Tokens out", "a": a.tokens_out, "b": b.tokens_out, "delta": deltas.tokens_out},
        {
            "label": "Model calls",
            "a": a.model_calls,
            "b": b.model_calls,
            "delta": deltas.model_calls,
        },
        {"label": "Cost", "a": a.cost, "b": b.cost, "delta": deltas.cost, "cost": True},
    ]


def _input_rows(a: Run, b: Run) -> list[tuple[str, tuple[Any, Any]]]:
    """Return each input by name with its value in A and in B (None: not given)."""
    inputs_a = a.inputs if isinstance(a.inputs, dict) else {}
    inputs_b = b.inputs if isinstance(b.inputs, dict) else {}
    names = [*inputs_a, *(n for n in inputs_b if n not in inputs_a)]
    return [(name, (inputs_a.get(name), inputs_b.get(name))) for name in names]


def _graph(comparison: RunComparison) -> dict[str, Any]:
    """Return what the page's script draws: one document holding both paths, and the paths."""
    first = comparison.first_branch_change
    return {
        "document": merged_document(comparison.a.version.document, comparison.b.version.document),
        "a": {"status": comparison.a.status, "path": _path(comparison, "a")},
        "b": {"status": comparison.b.status, "path": _path(comparison, "b")},
        "firstChange": (
            {"step": first.step_key, "a": first.a_branch, "b": first.b_branch} if first else None
        ),
    }


def _path(comparison: RunComparison, side: str) -> list[dict[str, Any]]:
    path = []
    for pair in comparison.steps:
        step = pair.a if side == "a" else pair.b
        if step is not None:
            branch = pair.a_branch if side == "a" else pair.b_branch
            path.append({"seq": step.seq, "step": step.step_key, "branch": branch})
    return path


def merged_document(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> dict[str, Any]:
    """Return B's recipe document with A's steps and branches that B lacks added, so that one
    graph can show both runs' paths when they ran different versions (or recipes)."""
    merged = copy.deepcopy(doc_b)
    steps = _dicts(merged.get("steps"))
    merged["steps"] = steps
    by_key = {step.get("key"): step for step in steps}
    for step_a in _dicts(doc_a.get("steps")):
        step_b = by_key.get(step_a.get("key"))
        if step_b is None:
            added = copy.deepcopy(step_a)
            # B's positions place B's steps: A's own would overlap them.
            added.pop("position", None)
            steps.append(added)
            by_key[added.get("key")] = added
            continue
        branches_b = _dicts(step_b.get("branches"))
        names = {branch.get("name") for branch in branches_b}
        extra = [
            copy.deepcopy(branch)
            for branch in _dicts(step_a.get("branches"))
            if branch.get("name") not in names
        ]
        if extra:
            step_b["branches"] = [*branches_b, *extra]
    return merged


def _dicts(value: Any) -> list[dict[str, Any]]:
    """Return the objects of a document's list (versions are checked, but pages stay safe)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
