"""The triggers' API routes (under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

from workflows.urls import SLUG, api

from .callbacks.urls import urlpatterns as callback_urls
from .schedules import apis as schedules
from .webhooks.apis import WebhookApi

SCHEDULE = r"(?P<key>[a-z0-9][a-z0-9_-]*)"

urlpatterns: list[URLPattern | URLResolver] = [
    api(f"hooks/{SLUG}/(?P<name>[a-z0-9][a-z0-9_-]*)", WebhookApi.as_view(), "webhook"),
    *callback_urls,
    api(f"recipes/{SLUG}/schedules", schedules.ScheduleListApi.as_view(), "schedule-list"),
    api(
        f"recipes/{SLUG}/schedules/{SCHEDULE}/pause",
        schedules.SchedulePauseApi.as_view(),
        "schedule-pause",
    ),
    api(
        f"recipes/{SLUG}/schedules/{SCHEDULE}/resume",
        schedules.ScheduleResumeApi.as_view(),
        "schedule-resume",
    ),
]
