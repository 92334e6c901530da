"""The tools API's routes (under /api/)."""

from __future__ import annotations

from workflows.urls import SLUG, api

from .apis import views

SERVER = f"tool-servers/{SLUG.replace('slug', 'name')}"

urlpatterns = [
    api("tools", views.ToolListApi.as_view(), "tool-list"),
    api("tool-servers", views.ToolServerListApi.as_view(), "tool-server-list"),
    api(SERVER, views.ToolServerDetailApi.as_view(), "tool-server-detail"),
    api(f"{SERVER}/discover", views.ToolServerDiscoverApi.as_view(), "tool-server-discover"),
]
