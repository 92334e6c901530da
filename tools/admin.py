"""Tool servers in the admin (staff only, as the admin is): settings checked as the API
checks them, the discovered tools read-only, and an action that discovers them again."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from . import client, services
from .models import ToolServer


class ToolServerForm(ModelForm):
    class Meta:
        model = ToolServer
        fields = [
            "name",
            "description",
            "transport",
            "url",
            "header_envs",
            "command",
            "timeout_s",
            "enabled",
        ]
        help_texts = {
            "header_envs": '{"Header-Name": "ENV_VAR_NAME"}: the value is read from that env '
            "var at call time, never stored.",
            "command": "stdio: a name in settings.MCP_STDIO_COMMANDS.",
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        problems = services.settings_errors(
            transport=cleaned.get("transport") or "",
            url=cleaned.get("url") or "",
            command=cleaned.get("command") or "",
            header_envs=cleaned.get("header_envs") if "header_envs" in cleaned else {},
            timeout_s=cleaned.get("timeout_s"),
        )
        for problem in problems:
            field, _, message = problem.partition(": ")
            field = field.split(".", 1)[0]
            self.add_error(field if field in self.fields else None, message)
        return cleaned


@admin.register(ToolServer)
class ToolServerAdmin(admin.ModelAdmin):
    form = ToolServerForm
    list_display = ["name", "transport", "url", "command", "enabled", "tool_count", "discovered_at"]
    list_filter = ["transport", "enabled"]
    search_fields = ["name", "description", "url"]
    readonly_fields = ["tools", "discovered_at", "discovery_error", "created_at", "updated_at"]
    actions = ["discover_tools"]

    @admin.display(description="tools")
    def tool_count(self, obj: ToolServer) -> int:
        return len(obj.tools) if isinstance(obj.tools, list) else 0

    def save_model(
        self, request: HttpRequest, obj: ToolServer, form: ModelForm, change: bool
    ) -> None:
        if change and {"transport", "url", "command"} & set(form.changed_data):
            # The cached tools were another endpoint's.
            obj.tools, obj.discovered_at, obj.discovery_error = [], None, ""
        super().save_model(request, obj, form, change)

    @admin.action(description="Discover the tools of the selected servers")
    def discover_tools(self, request: HttpRequest, queryset: QuerySet[ToolServer]) -> None:
        for server in queryset:
            try:
                tools = client.discover(server)
            except client.ToolError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(
                    request, f"{server.name}: {len(tools)} tool(s) found.", messages.SUCCESS
                )
