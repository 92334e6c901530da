"""The triggers' API routes (under /api/)."""

from __future__ import annotations

from django.urls import URLPattern, re_path

from .schedules import apis as schedules

SLUG = r"(?P<slug>[a-z0-9][a-z0-9_-]*)"
SCHEDULE = r"(?P<key>[a-z0-9][a-z0-9_-]*)"


def api(route: str, view: object, name: str) -> URLPattern:
    """Route `route` with or without a trailing slash, as the other APIs do."""
    return re_path(rf"^{route}/?$", view, name=name)  # type: ignore[arg-type]


urlpatterns: list[URLPattern] = [
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
