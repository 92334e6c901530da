"""The triggers' API routes (under /api/)."""

from __future__ import annotations

from django.urls import URLPattern

from .callbacks.urls import urlpatterns as callback_urls

urlpatterns: list[URLPattern] = [*callback_urls]
