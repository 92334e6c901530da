"""Callbacks out: a recipe's runs tell other systems of their events.

A recipe's `callbacks` (`workflows/engine/callbacks.py`) name the event types each listens to,
a URL and the env var of its secret. The runner says when a run's events are committed
(`runner.signals.run_events_committed`); `hooks` hears it, records one CallbackDelivery per
event and callback, and queues it; a Celery task (`tasks`) makes each attempt (`services`):
a Standard Webhooks message, signed, POSTed through the SSRF guard, retried with backoff for
a day (`backoff`), every attempt recorded. The run monitor and `/api/runs/{id}/callbacks`
show them, and may send one again.
"""
