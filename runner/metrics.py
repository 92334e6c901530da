"""`/metrics`: the figures operators watch, in the Prometheus text format.

Nothing is counted in memory: a collector reads the database at each scrape (through
`runner.stats`), so every web process answers the same, whichever served the runs. It is
registered in a registry of its own, not prometheus_client's global one, which would add the
process's own figures and whatever else a library registered there.

Families (all prefixed `branchline_`):
- `runs{status}`: runs in each status;
- `run_queue_waiting`, `run_queue_oldest_seconds`: runs with a step to execute that no
  worker holds, and how long the oldest has been waiting since it was queued;
- `human_tasks_open{group}`: decisions reviewers owe;
- `step_latency_seconds{kind,actor}`: a gauge histogram of the steps that finished in the
  last METRICS_LATENCY_WINDOW_HOURS (it goes down as steps leave the window: read it with
  `histogram_quantile` directly, not over `rate()`);
- `model_calls_total{actor,purpose}`, `model_call_errors_total{actor,purpose}`,
  `model_tokens_total{actor,direction}`, `model_cost_total{actor,currency}`: every model call
  recorded, counted since the first.

Who may read it: a signed-in staff user, or a scraper that sends
`Authorization: Bearer <METRICS_TOKEN>`. Anyone else gets 401 (403 for a signed-in user who
is not staff). docs/prometheus.yml is a Prometheus scrape job for it.
"""

from __future__ import annotations

import hmac
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from . import stats

# Upper bounds of the step latency buckets, in seconds: model answers take from a fraction
# of a second to minutes, a reviewer's decision hours.
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 14400, 86400)
_BEARER = "bearer "


class DatabaseCollector(Collector):
    """Read Branchline's figures from the database at every scrape."""

    def collect(self) -> Iterator[Metric]:
        """Yield the metric families listed in the module's docstring."""
        now = timezone.now()
        yield from self._runs(now)
        yield self._open_tasks()
        yield self._step_latency(now)
        yield from self._model_calls()

    def _runs(self, now: datetime) -> Iterator[Metric]:
        runs = GaugeMetricFamily("branchline_runs", "Runs in each status.", labels=["status"])
        for status, count in stats.runs_by_status().items():
            runs.add_metric([status], count)
        yield runs
        queue = stats.run_queue(now=now)
        yield GaugeMetricFamily(
            "branchline_run_queue_waiting",
            "Runs with a step to execute that no worker holds (queued or handed back).",
            value=queue.waiting,
        )
        oldest = (
            (now - queue.oldest_enqueued_at).total_seconds() if queue.oldest_enqueued_at else 0.0
        )
        yield GaugeMetricFamily(
            "branchline_run_queue_oldest_seconds",
            "Seconds since the longest-waiting run was queued (0 when none waits).",
            value=max(oldest, 0.0),
        )

    def _open_tasks(self) -> Metric:
        tasks = GaugeMetricFamily(
            "branchline_human_tasks_open", "Open human tasks per reviewer group.", labels=["group"]
        )
        for group, count in sorted(stats.open_tasks_by_group().items()):
            tasks.add_metric([group], count)
        return tasks

    def _step_latency(self, now: datetime) -> Metric:
        hours = settings.METRICS_LATENCY_WINDOW_HOURS
        family = GaugeHistogramMetricFamily(
            "branchline_step_latency_seconds",
            f"Latency of the steps that finished in the last {hours} h, by step kind and actor.",
            labels=["kind", "actor"],
        )
        bounds_ms = [round(bound * 1000) for bound in LATENCY_BUCKETS]
        since = now - timedelta(hours=hours)
        for row in stats.step_latency_buckets(since=since, bounds_ms=bounds_ms):
            buckets = [
                (_bound(bound), float(count))
                for bound, count in zip(LATENCY_BUCKETS, row.counts, strict=True)
            ]
            buckets.append(("+Inf", float(row.count)))
            family.add_metric([row.kind, row.actor], buckets, row.sum_ms / 1000)
        return family

    def _model_calls(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "branchline_model_calls",
            "Model calls made, by actor and purpose.",
            labels=["actor", "purpose"],
        )
        errors = CounterMetricFamily(
            "branchline_model_call_errors",
            "Model calls that failed, by actor and purpose.",
            labels=["actor", "purpose"],
        )
        tokens = CounterMetricFamily(
            "branchline_model_tokens",
            "Tokens sent to (input) and received from (output) models, by actor.",
            labels=["actor", "direction"],
        )
        cost = CounterMetricFamily(
            "branchline_model_cost",
            "Cost of the model calls of actors with prices, by actor and currency.",
            labels=["actor", "currency"],
        )
        per_purpose: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        per_actor: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        per_currency: dict[tuple[str, str], float] = defaultdict(float)
        for row in stats.model_call_totals():
            per_purpose[row.actor, row.purpose][0] += row.calls
            per_purpose[row.actor, row.purpose][1] += row.errors
            per_actor[row.actor][0] += row.tokens_in
            per_actor[row.actor][1] += row.tokens_out
            if row.cost is not None and row.currency:
                per_currency[row.actor, row.currency] += float(row.cost)
        for (actor, purpose), (n, failed) in sorted(per_purpose.items()):
            calls.add_metric([actor, purpose], n)
            errors.add_metric([actor, purpose], failed)
        for actor, (sent, received) in sorted(per_actor.items()):
            tokens.add_metric([actor, "input"], sent)
            tokens.add_metric([actor, "output"], received)
        for (actor, currency), total in sorted(per_currency.items()):
            cost.add_metric([actor, currency], total)
        yield from (calls, errors, tokens, cost)


def _bound(seconds: float) -> str:
    # The `le` label as Prometheus's own clients write it: 1.0, not 1.
    return repr(float(seconds))


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(DatabaseCollector())


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """Return why the request may not read the metrics, or None if it may."""
    authorization = request.headers.get("Authorization", "")
    if authorization:
        if authorization[: len(_BEARER)].lower() == _BEARER:
            if _token_matches(authorization[len(_BEARER) :].strip()):
                return None
            return _unauthorized("the metrics token is wrong")
        if not request.user.is_authenticated:
            return _unauthorized("send the metrics token as `Authorization: Bearer <token>`")
    if not request.user.is_authenticated:
        return _unauthorized("sign in as staff, or send the metrics token")
    if not request.user.is_staff:
        return HttpResponse(
            "Only staff may read the metrics.\n", status=403, content_type="text/plain"
        )
    return None


def _token_matches(given: str) -> bool:
    expected = settings.METRICS_TOKEN
    # Compared in constant time; no token configured accepts none.
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _unauthorized(reason: str) -> HttpResponse:
    response = HttpResponse(f"Unauthorized: {reason}.\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="branchline metrics"'
    return response


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Answer a scrape with the current figures, in the format the scraper asks for."""
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(REGISTRY), content_type=content_type)
