"""The step panel's tool call: the arguments form of the tool just picked (an htmx partial)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from ..forms.tools import ToolSections
from .editor import editable_recipe

TOOLS = "editor/_tools.html"


@login_required
@require_POST
def tool_arguments(request: HttpRequest, slug: str) -> HttpResponse:
    """Answer with the argument fields of the posted tool, keeping the values typed so far."""
    editable_recipe(request, slug)
    # Only the tool's fields are read: the post is the panel's tool section, nothing is stored.
    tools = ToolSections(request.POST, step={})
    # Fields not filled in yet are not mistakes: the errors show when the step is applied.
    return render(request, f"{TOOLS}#tool-arguments", {"tools": tools, "quiet": True})
