"""MCP servers whose tools recipes call (`SERVER.TOOL`), registered by staff.

Secrets stay out of the row: `header_envs` names the env var of each header, read at call
time; a stdio server names an entry of settings.MCP_STDIO_COMMANDS, never a command line.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from workflows.models import SLUG_VALIDATOR

DEFAULT_TIMEOUT_S = 30
MAX_TIMEOUT_S = 600


class ToolServer(models.Model):
    """One MCP server and the tools it listed when last discovered."""

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP"
        STDIO = "stdio", "stdio (a configured command)"

    # A slug without dots: recipes name tools `SERVER.TOOL`.
    name = models.CharField(max_length=100, unique=True, validators=[SLUG_VALIDATOR])
    description = models.TextField(blank=True)
    transport = models.CharField(max_length=10, choices=Transport.choices)
    # http: the endpoint (e.g. https://tools.example.com/mcp), checked like actor base URLs.
    url = models.CharField(max_length=2000, blank=True)
    # {header name: ENV_VAR_NAME}; the values are read from the environment at call time.
    header_envs = models.JSONField(default=dict, blank=True)
    # stdio: a name in settings.MCP_STDIO_COMMANDS.
    command = models.CharField(max_length=100, blank=True)
    timeout_s = models.PositiveIntegerField(
        default=DEFAULT_TIMEOUT_S,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TIMEOUT_S)],
    )
    enabled = models.BooleanField(default=True)
    # The cache of the last discovery: [{"name", "description", "input_schema"}].
    tools = models.JSONField(default=list, blank=True)
    discovered_at = models.DateTimeField(null=True, blank=True)
    discovery_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(transport__in=["http", "stdio"]),
                name="tool_server_transport_known",
            ),
        ]

    def __str__(self) -> str:
        return self.name
