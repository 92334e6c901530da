"""The triggers' models, each kind in its own module."""

from __future__ import annotations

from .callbacks.models import CallbackAttempt, CallbackDelivery
from .webhooks.models import WebhookDelivery

__all__ = ["CallbackAttempt", "CallbackDelivery", "WebhookDelivery"]
