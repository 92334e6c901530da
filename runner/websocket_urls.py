"""Websocket URL routes (Channels); what each sends is described in `runner.consumers`."""

from __future__ import annotations

from django.urls import URLPattern, path

from . import consumers

websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<int:run_id>/", consumers.RunEventsConsumer.as_asgi()),
    path("ws/runs/", consumers.RunListConsumer.as_asgi()),
    path("ws/reviews/", consumers.ReviewsConsumer.as_asgi()),
]
