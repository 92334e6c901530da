"""Publish a recipe, list its versions, compare two of them, restore one into the draft.

One template, `editor/recipe_versions.html`: the page, and its `versions` and `diff` partials
for the editor's side panel.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import RecipeConflict, recipe_publish
from workflows.validators import RecipeRejected, whole_number

from ..diff import documents_diff
from ..forms.recipe import PublishForm
from ..services import recipe_version_restore
from .editor import editable_recipe

TEMPLATE = "editor/recipe_versions.html"


def _template(request: HttpRequest, partial: str) -> str:
    return f"{TEMPLATE}#{partial}" if request.htmx else TEMPLATE


def _context(recipe: Recipe, **extra: Any) -> dict[str, Any]:
    published = recipe.versions.published()
    versions = list(published.select_related("created_by").order_by("-number"))
    return {"recipe": recipe, "versions": versions, "form": PublishForm(), **extra}


@login_required
@require_http_methods(["GET", "POST"])
def recipe_versions(request: HttpRequest, slug: str) -> HttpResponse:
    """List the versions; POST publishes the saved draft as a new version.

    The form carries the draft revision its page saw (the editor sends the revision of its last
    save): a draft saved elsewhere since is refused with 409, not published unseen.
    """
    recipe = editable_recipe(request, slug)
    if request.method == "GET":
        return render(request, _template(request, "versions"), _context(recipe))
    form = PublishForm(request.POST)
    errors: list[str] = []
    published = None
    conflict = False
    if form.is_valid():
        try:
            published = recipe_publish(
                recipe=recipe,
                user=request.user,
                note=form.cleaned_data["note"],
                expected_revision=form.cleaned_data["revision"],
            )
        except RecipeRejected as exc:
            errors = exc.errors
        except RecipeConflict as exc:
            errors, conflict = [str(exc)], True
        recipe.refresh_from_db()
    context = _context(recipe, publish_errors=errors, published=published)
    if not form.is_valid() or errors:
        context["form"] = form
    status = HTTPStatus.CONFLICT if conflict else HTTPStatus.OK
    return render(request, _template(request, "versions"), context, status=status)


def _document(recipe: Recipe, which: str) -> tuple[str, dict[str, Any]] | None:
    if which == "draft":
        return "the draft", document_from_recipe(recipe)
    if (number := whole_number(which)) is not None:
        version = recipe.versions.published().filter(number=number).first()
        if version is not None:
            return f"v{version.number}", version.document
    return None


@login_required
@require_GET
def version_diff(request: HttpRequest, slug: str) -> HttpResponse:
    """Show what changed between two versions (or a version and the draft)."""
    recipe = editable_recipe(request, slug)
    old = _document(recipe, request.GET.get("a", ""))
    new = _document(recipe, request.GET.get("b", "draft"))
    context = _context(recipe)
    if old is None or new is None:
        context["diff_error"] = "Choose two versions to compare."
    else:
        context.update(old_label=old[0], new_label=new[0], diff=documents_diff(old[1], new[1]))
    return render(request, _template(request, "diff"), context)


@login_required
@require_POST
def version_restore(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """Replace the draft with a published version (the editor reloads to show it)."""
    recipe = editable_recipe(request, slug)
    version = get_object_or_404(recipe.versions.published(), number=number)
    revision = request.POST.get("revision", "")
    errors: list[str] = []
    status = HTTPStatus.OK
    try:
        recipe_version_restore(
            recipe=recipe,
            version=version,
            expected_revision=whole_number(revision),
        )
    except RecipeRejected as exc:
        errors = exc.errors
    except RecipeConflict as exc:
        errors = [str(exc)]
        status = HTTPStatus.CONFLICT
    if not errors:
        if request.htmx:
            return HttpResponseClientRefresh()
        context = _context(recipe, restored=version)
    else:
        context = _context(recipe, restore_errors=errors)
    return render(request, _template(request, "versions"), context, status=status)
