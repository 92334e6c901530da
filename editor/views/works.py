"""A recipe step's "what works" page: which actors and prompt variants succeed on it, at what
latency and cost, what the learner would pick now and why, and the choices it made.

The figures come from `runner.step_works` (the runs the user may see; the learner's own
evidence and rule); the chart is SVG drawn on the server (`editor/charts.py`) with a table of
the same numbers, so the page needs no script.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runner import step_works
from runner.step_works import StepWorks
from workflows.selectors import recipe_get

from .. import charts
from ..charts import Chart, Series

TEMPLATE = "stats/step_works.html"
RATE_COLOR = "#12805c"
WEIGHTED_COLOR = "#2f5bea"


@login_required
@require_GET
def step_works_page(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    """Show what works on one LLM step of a recipe (404 for a step it does not have)."""
    recipe = recipe_get(user=request.user, slug=slug)
    graph = step_works.recipe_graph(recipe)
    context: dict[str, Any] = {"recipe": recipe, "key": key}
    try:
        works = step_works.step_works(user=request.user, recipe=recipe, graph=graph, key=key)
    except step_works.StepUnknown as exc:
        context["missing"] = str(exc)
        context["steps"] = step_works.llm_steps(graph)
        return render(request, TEMPLATE, context, status=404)
    pick = works.pick_record
    context.update(
        works=works,
        chart=_rates_chart(works),
        rows=_rows(works),
        pick_rate=percent(100 * pick.weighted_rate) if pick else "",
    )
    return render(request, TEMPLATE, context)


def _rows(works: StepWorks) -> list[dict[str, Any]]:
    """Return each arm's figures as the table shows them."""
    return [
        {
            "arm": a,
            "success_rate": charts.NO_VALUE
            if a.success_rate is None
            else percent(100 * a.success_rate),
            "weighted_rate": percent(100 * a.weighted_rate),
            "latency": _shown(a.mean_latency_ms, charts.duration_ms),
            "cost": _shown(a.mean_cost, charts.amount),
            "tokens": _shown(a.mean_tokens, charts.integer),
        }
        for a in works.arms
    ]


def _shown(value: float | None, fmt: charts.Format) -> str:
    return charts.NO_VALUE if value is None else fmt(value)


def _rates_chart(works: StepWorks) -> Chart:
    """Draw each arm's success rate and the learner's weighted rate, on a 0 to 100% scale."""
    arms = [a for a in works.arms if a.attempts]
    return charts.grouped_hbars(
        key="success-rates",
        title="Success rate by actor and prompt",
        description=(
            "Share of the judged attempts that succeeded, and the learner's weighted rate "
            "(recent attempts weigh more; an arm with little evidence stays near 50%)."
        ),
        categories=[a.label for a in arms],
        series=[
            Series(
                "success rate",
                tuple(_percent(a.success_rate) for a in arms),
                RATE_COLOR,
            ),
            Series(
                "learner's weighted rate",
                tuple(_percent(a.weighted_rate) for a in arms),
                WEIGHTED_COLOR,
            ),
        ],
        fmt=percent,
        category_label="Actor · prompt",
        extra=[
            ("Judged", [charts.integer(a.judged) for a in arms]),
            ("Succeeded", [charts.integer(a.successes) for a in arms]),
        ],
        maximum=100,
    )


def percent(value: float) -> str:
    """Format a rate given in percent: `67%`."""
    return f"{value:.0f}%"


def _percent(rate: float | None) -> float | None:
    return None if rate is None else 100 * rate
