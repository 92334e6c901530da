"""The pages people use: recipe list (more pages join as they are built)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from workflows.selectors import recipes_visible_to


@login_required
def recipe_list(request: HttpRequest) -> HttpResponse:
    recipes = recipes_visible_to(request.user).prefetch_related("versions")
    query = request.GET.get("q", "").strip()
    if query:
        recipes = recipes.filter(
            Q(name__icontains=query) | Q(slug__icontains=query) | Q(description__icontains=query)
        )
    return render(request, "editor/recipe_list.html", {"recipes": recipes, "query": query})
