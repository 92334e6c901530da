"""Input and output shapes of the tools API. Header values never appear: only the names of
the env vars that hold them."""

from __future__ import annotations

from rest_framework import serializers

from workflows.apis.schema import StrictText
from workflows.models import SLUG_VALIDATOR

from ..models import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, ToolServer


class ToolOutput(serializers.Serializer):
    name = serializers.CharField(help_text="SERVER.TOOL, as recipes name it")
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.JSONField(help_text="the JSON schema of its arguments")
    server = serializers.CharField()


class CachedToolOutput(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.JSONField()


class ToolServerOutput(serializers.ModelSerializer):
    tools = CachedToolOutput(many=True, help_text="as listed by the last discovery")
    header_envs = serializers.DictField(
        child=serializers.CharField(), help_text="{header name: the env var holding its value}"
    )

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
            "tools",
            "discovered_at",
            "discovery_error",
            "created_at",
            "updated_at",
        ]


class ToolServerCreateInput(StrictText, serializers.Serializer):
    name = serializers.CharField(
        max_length=100, validators=[SLUG_VALIDATOR], help_text="recipes name tools SERVER.TOOL"
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    transport = serializers.ChoiceField(choices=ToolServer.Transport.choices)
    url = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default="", help_text="http: endpoint"
    )
    header_envs = serializers.DictField(
        child=serializers.CharField(max_length=128),
        required=False,
        default=dict,
        help_text="{header name: ENV_VAR_NAME}; the value is read from the env at call time",
    )
    command = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="stdio: a name in MCP_STDIO_COMMANDS",
    )
    timeout_s = serializers.IntegerField(
        min_value=1, max_value=MAX_TIMEOUT_S, default=DEFAULT_TIMEOUT_S
    )
    enabled = serializers.BooleanField(default=True)


class ToolServerPatchInput(ToolServerCreateInput):
    """The settings to change; the others are kept."""
