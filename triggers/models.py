"""The triggers' models, each kept in its own module."""

from __future__ import annotations

from .webhooks.models import WebhookDelivery

__all__ = ["WebhookDelivery"]
