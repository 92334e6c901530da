"""The triggers' models, each kind in its own package."""

from __future__ import annotations

from .callbacks.models import CallbackAttempt, CallbackDelivery
from .schedules.models import MissedTicks, Schedule, ScheduleTick
from .webhooks.models import WebhookDelivery

__all__ = [
    "CallbackAttempt",
    "CallbackDelivery",
    "MissedTicks",
    "Schedule",
    "ScheduleTick",
    "WebhookDelivery",
]
