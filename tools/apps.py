from __future__ import annotations

from django.apps import AppConfig


class ToolsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tools"
    verbose_name = "Tools (MCP servers)"
