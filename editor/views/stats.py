"""A recipe's and an actor's figures, drawn for people who would rather look than read.

Each page shows runs over time by outcome, tokens and cost over time, latency percentiles and
the share of each branch taken, over the last 7, 30 or 90 days. The charts are SVG drawn on the
server (`editor/charts.py`), each with a table of the same numbers: no script needed. Only the
runs the user may see are counted (`runner.stats` scopes every read).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runner import judge_thresholds, stats, step_works
from runner.status import Outcome
from workflows.adapters import document_from_recipe
from workflows.engine.thresholds import MIN_RUNS
from workflows.models import Actor
from workflows.selectors import actors_list, recipe_get

from .. import charts
from ..charts import Chart, Series

RECIPE_TEMPLATE = "stats/recipe_stats.html"
ACTOR_TEMPLATE = "stats/actor_stats.html"

# Outcomes in the order a stacked bar shows them (good ones at the bottom), with their colors.
OUTCOME_COLORS = {
    Outcome.COMPLETED.value: "#12805c",
    Outcome.APPROVED.value: "#0e9384",
    Outcome.ERROR_HANDLED.value: "#b54708",
    Outcome.ENDED.value: "#667085",
    Outcome.FAILED.value: "#c4320a",
    Outcome.CANCELLED.value: "#98a2b3",
    stats.IN_PROGRESS: "#2f5bea",
}


class RangeRefused(ValueError):
    """The page was asked for a range it does not offer."""


def chosen_days(request: HttpRequest) -> int:
    """Return the range the page was asked for (`?days=`), the default when none was."""
    raw = request.GET.get("days", "")
    if not raw:
        return stats.DEFAULT_RANGE
    if raw.isascii() and raw.isdigit() and int(raw) in stats.RANGES:
        return int(raw)
    choices = ", ".join(str(d) for d in stats.RANGES)
    raise RangeRefused(f"days: choose one of {choices}")


@login_required
@require_GET
def recipe_stats(request: HttpRequest, slug: str) -> HttpResponse:
    """Show a recipe's runs, usage, latency and branches over the chosen range."""
    recipe = recipe_get(user=request.user, slug=slug)
    scope = stats.recipe_scope(user=request.user, recipe=recipe)
    # Each LLM step has a "what works" page: its actors and prompt variants compared.
    works_steps = step_works.llm_steps(step_works.recipe_graph(recipe))
    context = {
        "recipe": recipe,
        "works_steps": works_steps,
        # What each judge branch's runs suggest for its threshold, in the draft as it stands.
        "judge_advice": judge_thresholds.branch_advice(
            user=request.user, recipe=recipe, document=document_from_recipe(recipe)
        ),
        "judge_min_runs": MIN_RUNS,
    }
    return _stats_page(request, RECIPE_TEMPLATE, context, scope, _recipe_charts)


@login_required
@require_GET
def actor_stats(request: HttpRequest, name: str) -> HttpResponse:
    """Show what an actor did in the runs the user may see, over the chosen range.

    Actors are shared by every recipe (any user may name one), so any user may open an actor's
    page, and sees there only the runs of recipes they may see. Steps and calls name their actor
    as it was called then: an actor renamed or deleted since keeps its page while such runs
    exist, and so does a reviewer group (`@human:GROUP`).
    """
    actor = actors_list().filter(name=name).first()
    scope = stats.actor_scope(user=request.user, name=name)
    if actor is None and stats.scope_is_empty(scope):
        raise Http404(f"No actor '{name}'.")
    context: dict[str, Any] = {
        "actor": actor,
        "name": name,
        "prices": _prices(actor) if actor else "",
    }
    return _stats_page(request, ACTOR_TEMPLATE, context, scope, _actor_charts)


def _stats_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    scope: stats.Scope,
    page_charts: Callable[[stats.Scope, stats.Window], dict[str, Any]],
) -> HttpResponse:
    """Render a stats page over the range asked for, or the page with why it refused it (400).

    Every page has the charts of `_common`; `page_charts` returns the page's own.
    """
    context["ranges"] = stats.RANGES
    try:
        days = chosen_days(request)
    except RangeRefused as exc:
        context.update(days=None, range_error=str(exc))
        return render(request, template, context, status=400)
    window = stats.stats_window(days)
    context.update(days=days, **_common(scope, window), **page_charts(scope, window))
    return render(request, template, context)


def _recipe_charts(scope: stats.Scope, window: stats.Window) -> dict[str, Any]:
    """Return a recipe's step latency by step and by actor, and the branches its steps took."""
    by_step, capped = stats.latency_percentiles(scope.steps, window, group=("step_key",))
    by_actor, actor_capped = stats.latency_percentiles(scope.steps, window, group=("actor_name",))
    by_actor = [p for p in by_actor if p.label]  # steps without an actor (decision trees)
    return {
        "capped": capped or actor_capped,
        "latency": _latency_chart(
            "latency-steps", "Step latency by step", by_step, category_label="Step"
        ),
        "actor_latency": _latency_chart(
            "latency-actors",
            "Step latency by actor",
            by_actor,
            category_label="Actor",
            links=[reverse("actor-stats", args=[p.label]) for p in by_actor],
        ),
        "branches": _branches_chart(
            stats.branches_taken(scope.steps, window, group=("step_key",)), category_label="Step"
        ),
    }


def _actor_charts(scope: stats.Scope, window: stats.Window) -> dict[str, Any]:
    """Return an actor's step latency and the branches taken after its steps, by recipe and step."""
    group = scope.step_group
    by_step, capped = stats.latency_percentiles(scope.steps, window, group=group)
    return {
        "capped": capped,
        "latency": _latency_chart(
            "latency-steps",
            "Step latency by recipe and step",
            by_step,
            category_label="Recipe · step",
        ),
        "branches": _branches_chart(
            stats.branches_taken(scope.steps, window, group=group), category_label="Recipe · step"
        ),
    }


# -- the charts both pages have ---------------------------------------------------------------


def _common(scope: stats.Scope, window: stats.Window) -> dict[str, Any]:
    """Return the runs, tokens and cost charts of a scope, and the range's totals."""
    per_day = stats.runs_per_day(scope, window)
    usage = stats.usage_per_day(scope, window)
    days = [d.isoformat() for d in window.dates]
    axis = [_short_day(d) for d in window.dates]
    outcomes = [o for o in OUTCOME_COLORS if any(per_day[d].get(o) for d in window.dates)]
    runs = charts.stacked_bars(
        key="runs",
        title="Runs by outcome",
        description=f"Runs started on each of the last {window.days} days, by outcome.",
        categories=days,
        axis_labels=axis,
        series=[
            Series(o, tuple(per_day[d].get(o, 0) for d in window.dates), OUTCOME_COLORS[o])
            for o in outcomes
        ],
    )
    tokens = charts.stacked_bars(
        key="tokens",
        title="Tokens",
        description=f"Tokens sent to and received from models on each of the last {window.days} days.",
        categories=days,
        axis_labels=axis,
        series=[
            Series("input", tuple(usage.tokens_in[d] for d in window.dates), "#2f5bea"),
            Series("output", tuple(usage.tokens_out[d] for d in window.dates), "#7a5af8"),
        ],
    )
    cost = charts.line_chart(
        key="cost",
        title="Cost",
        description=f"Cost of the model calls on each of the last {window.days} days, per currency.",
        categories=days,
        axis_labels=axis,
        series=[
            Series(currency, tuple(float(per[d]) for d in window.dates))
            for currency, per in sorted(usage.cost.items())
        ],
        fmt=charts.amount,
    )
    counted = [sum(per_day[d].values()) for d in window.dates]
    failed = sum(per_day[d].get(Outcome.FAILED.value, 0) for d in window.dates)
    return {
        "window": window,
        "runs_chart": runs,
        "tokens_chart": tokens,
        "cost_chart": cost,
        "totals": {
            "runs": sum(counted),
            "failed": failed,
            "calls": usage.calls,
            "unpriced_calls": usage.unpriced_calls,
            "tokens": usage.total_tokens,
            "cost": [
                (currency, charts.amount(float(total)))
                for currency, total in sorted(usage.total_cost().items())
            ],
            "tokens_text": charts.integer(usage.total_tokens),
            "calls_text": charts.integer(usage.calls),
        },
    }


def _latency_chart(
    key: str,
    title: str,
    rows: Sequence[stats.Percentiles],
    *,
    category_label: str,
    links: Sequence[str] = (),
) -> Chart:
    return charts.grouped_hbars(
        key=key,
        title=title,
        description="Median (p50) and 95th percentile (p95) of the steps' latency.",
        categories=[p.label for p in rows],
        series=[
            Series("p50", tuple(p.p50_ms for p in rows), "#2f5bea"),
            Series("p95", tuple(p.p95_ms for p in rows), "#f79009"),
        ],
        fmt=charts.duration_ms,
        category_label=category_label,
        extra=[("Steps", [charts.integer(p.count) for p in rows])],
        links=links,
    )


def _branches_chart(rows: list[tuple[str, list[tuple[str, int]]]], *, category_label: str) -> Chart:
    return charts.share_hbars(
        key="branches",
        title="Branches taken",
        description="How often each branch was taken after each step.",
        rows=rows,
        category_label=category_label,
        part_label="Branch",
    )


def _prices(actor: Actor) -> str:
    """Say what the actor's tokens cost now (calls keep the price they were made at)."""
    if actor.price_in_per_million is None and actor.price_out_per_million is None:
        return ""

    def price(value: Decimal | None) -> str:
        return charts.NO_VALUE if value is None else charts.amount(float(value))

    return (
        f"{price(actor.price_in_per_million)} in, {price(actor.price_out_per_million)} out "
        f"per million tokens ({actor.currency})"
    )


def _short_day(day: date) -> str:
    return f"{day:%b} {day.day}"
