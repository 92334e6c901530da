"""Callback tasks: thin, they take ids, and a message delivered twice sends nothing twice."""

from __future__ import annotations

from celery import shared_task

from . import hooks, services


@shared_task(name=services.SEND_TASK, acks_late=True)
def send_callback(delivery_id: str, number: int) -> bool:
    """Make attempt `number` of a callback delivery (nothing if it was made already)."""
    return services.delivery_attempt(delivery_id=delivery_id, number=number) is not None


@shared_task(name="triggers.requeue_callbacks")
def requeue_callbacks() -> int:
    """Record the deliveries a crash lost, and queue again those whose attempt is overdue
    (its message was lost)."""
    return hooks.callbacks_sweep()
