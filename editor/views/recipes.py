"""The recipe list, and the pages that create a recipe: from scratch or from a file."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from workflows.apis.pagination import keyset_window
from workflows.selectors import recipes_listed
from workflows.services import RecipeConflict, recipe_import
from workflows.validators import RecipeRejected

from ..forms.recipe import ImportForm, NewRecipeForm
from ..services import recipe_create

RECIPES_PER_PAGE = 50


@login_required
def recipe_list(request: HttpRequest) -> HttpResponse:
    """List the recipes the user may see, by name, a page at a time, matching the search."""
    query = request.GET.get("q", "").strip()
    recipes = recipes_listed(request.user, query=query).select_related("owner")
    page = keyset_window(recipes, request.GET, per_page=RECIPES_PER_PAGE)
    cursor_error = (
        "This link does not name a place in the list of recipes." if page.bad_cursor else ""
    )
    context = {"page": page, "query": query, "cursor_error": cursor_error}
    return render(request, "editor/recipe_list.html", context, status=400 if cursor_error else 200)


@login_required
@require_http_methods(["GET", "POST"])
def recipe_new(request: HttpRequest) -> HttpResponse:
    """Create an empty recipe (then draw it), or import one from a file."""
    form = NewRecipeForm(request.POST if "create" in request.POST else None)
    import_form = ImportForm()
    import_errors: list[str] = []
    if request.method == "POST" and "create" in request.POST and form.is_valid():
        try:
            recipe = recipe_create(
                user=request.user,
                name=form.cleaned_data["name"],
                slug=form.cleaned_data["slug"],
                description=form.cleaned_data["description"],
            )
        except RecipeConflict as exc:
            form.add_error("slug", str(exc).partition(": ")[2])
        else:
            return redirect("recipe-editor", slug=recipe.slug)
    if request.method == "POST" and "import" in request.POST:
        import_form = ImportForm(request.POST, request.FILES)
        if import_form.is_valid():
            try:
                result = recipe_import(
                    user=request.user, data=import_form.cleaned_data["file"].read()
                )
            except (RecipeRejected, RecipeConflict) as exc:
                import_errors = exc.errors if isinstance(exc, RecipeRejected) else [str(exc)]
            else:
                messages.success(
                    request,
                    f"Imported “{result.recipe.name}”"
                    + (f" with {len(result.warnings)} lint warnings." if result.warnings else "."),
                )
                return redirect("recipe-editor", slug=result.recipe.slug)
    return render(
        request,
        "editor/recipe_new.html",
        {"form": form, "import_form": import_form, "import_errors": import_errors},
    )
