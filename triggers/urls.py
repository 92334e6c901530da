"""The triggers' API routes (under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

from workflows.urls import SLUG, api

from .callbacks.urls import urlpatterns as callback_urls
from .webhooks.apis import WebhookApi

urlpatterns: list[URLPattern | URLResolver] = [
    api(f"hooks/{SLUG}/(?P<name>[a-z0-9][a-z0-9_-]*)", WebhookApi.as_view(), "webhook"),
    *callback_urls,
]
