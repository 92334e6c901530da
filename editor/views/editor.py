"""The graph editor page and its side panels (htmx partials of `editor/recipe_editor.html`
and `editor/panels.html`).

The page holds the draft as a format-v1 document; the panels post it with their form fields,
so each form sees the current, unsaved document and answers with the edited piece.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from runner import judge_thresholds
from workflows.adapters import document_from_recipe
from workflows.engine.thresholds import MIN_RUNS, is_judge_condition
from workflows.models import Recipe
from workflows.selectors import recipe_get
from workflows.services import RecipeConflict
from workflows.validators import RecipeRejected, json_value_errors, whole_number

from ..catalog import catalog
from ..forms.actors import starter_actors
from ..forms.branch import BranchPanel
from ..forms.builders import ROUTES, TREE, RoutesBuilder, TreeBuilder, route_targets
from ..forms.document import DocumentContext
from ..forms.live import (
    ADD_ALIAS,
    ADD_INPUT,
    LiveAnswer,
    alias_fixes,
    declared_aliases,
    declared_inputs,
    field_errors,
    live_apply,
    prompt_fixes,
)
from ..forms.recipe import ImportForm, RecipeSettings
from ..forms.step import StepForm
from ..selectors import (
    document_outline,
    document_problems,
    names_in_scope,
    unknown_template_names,
)
from ..services import recipe_draft_import

PANELS = "editor/panels.html"


def editable_recipe(request: HttpRequest, slug: str) -> Recipe:
    """Return a recipe the user may edit; 404 if they may not see it, 403 if not change it."""
    recipe = recipe_get(user=request.user, slug=slug)
    if not request.user.has_perm("workflows.change_recipe", recipe):
        raise PermissionDenied("You may not change this recipe.")
    return recipe


class BadDocument(Exception):
    """The posted document is not a JSON object (a bug or a hand-made request)."""


def posted_document(request: HttpRequest, recipe: Recipe) -> dict[str, Any]:
    """Return the document a panel posted, with the recipe's own slug."""
    try:
        document = json.loads(request.POST.get("document", ""))
    except (ValueError, RecursionError):  # not JSON, a 5000-digit number, too deep
        raise BadDocument("document: not JSON") from None
    if not isinstance(document, dict):
        raise BadDocument("document: a recipe is a JSON object")
    if errors := json_value_errors(document, at="document"):
        raise BadDocument(errors[0])  # NUL, a lone surrogate, NaN: nothing a panel can show
    steps = document.get("steps")
    if steps is not None and not (
        isinstance(steps, list) and all(isinstance(s, dict) for s in steps)
    ):
        raise BadDocument("document.steps: a list of step objects")
    document["slug"] = recipe.slug
    return document


def _index(request: HttpRequest, name: str, limit: int) -> int:
    raw = request.POST.get(name, "")
    index = whole_number(raw)
    if index is None or index >= limit:
        raise BadDocument(f"{name}: no such item")
    return index


def bad_request(exc: Exception) -> HttpResponse:
    return HttpResponseBadRequest(f"The editor sent something unexpected ({exc}). Reload the page.")


def editor_config(recipe: Recipe, user_id: int, document: dict[str, Any]) -> dict[str, Any]:
    slug = recipe.slug
    actors = document.get("actors") if isinstance(document.get("actors"), dict) else {}
    return {
        "slug": slug,
        "revision": recipe.revision,
        # Saved with errors (kept as written): the save state says so until they are fixed.
        "unfinished": recipe.draft_document is not None,
        # Copied steps are kept per user in the browser (clipboard.js).
        "user": user_id,
        # A new step with no alias that suits it starts with one of these (toolbar.js).
        "starterActors": starter_actors({str(a): str(r) for a, r in actors.items()}),
        "urls": {
            "check": reverse("recipe-check", args=[slug]),
            "stepPanel": reverse("recipe-step-panel", args=[slug]),
            "branchPanel": reverse("recipe-branch-panel", args=[slug]),
            "recipePanel": reverse("recipe-settings-panel", args=[slug]),
            "toolArguments": reverse("recipe-tool-arguments", args=[slug]),
            "testrunPanel": reverse("recipe-testrun", args=[slug]),
            "testrunResult": reverse("recipe-testrun-result", args=[slug]),
            "tests": reverse("recipe-tests", args=[slug]),
            "versions": reverse("recipe-versions", args=[slug]),
            "triggers": reverse("recipe-triggers", args=[slug]),
            "runsOverlay": reverse("recipe-runs-overlay", args=[slug]),
            "save": reverse("recipe-detail", args=[slug]),
            "events": "/api/runs/{id}/events",
            "run": "/api/runs/{id}",
        },
    }


@login_required
@require_GET
def recipe_editor(request: HttpRequest, slug: str) -> HttpResponse:
    """Show the canvas, the step/branch list, the lint panel and the side panels."""
    recipe = editable_recipe(request, slug)
    document = document_from_recipe(recipe)
    latest = recipe.latest_version
    return render(
        request,
        "editor/recipe_editor.html",
        {
            "recipe": recipe,
            "document": document,
            "config": editor_config(recipe, request.user.pk, document),
            # The canvas labels, the step kinds offered: drawn from the engine's catalog.
            "catalog": catalog(),
            "latest_version": latest,
        },
    )


@login_required
@require_POST
def recipe_check(request: HttpRequest, slug: str) -> HttpResponse:
    """Lint the posted document; answer with the lint panel."""
    recipe = editable_recipe(request, slug)
    try:
        document = posted_document(request, recipe)
    except BadDocument as exc:
        return bad_request(exc)
    problems = document_problems(document)
    return render(
        request,
        "editor/recipe_editor.html#lint",
        {
            "recipe": recipe,
            "problems": problems,
            "errors": [p for p in problems if p.is_error],
            "warnings": [p for p in problems if not p.is_error],
            "checked": True,
        },
    )


def _step_branches(document: dict[str, Any], index: int) -> list[Any]:
    outline = document_outline(document)
    return next((s.branches for s in outline if s.index == index), [])


@login_required
@require_POST
def step_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """Open the form of one step of the posted document, or apply it as typed (`apply=1`)."""
    recipe = editable_recipe(request, slug)
    try:
        document = posted_document(request, recipe)
        index = _index(request, "step", len(document.get("steps") or []))
    except BadDocument as exc:
        return bad_request(exc)
    context = DocumentContext(document)
    op = request.POST.get("_op", "")
    if op.startswith(f"{TREE}-") or op.startswith(f"{ROUTES}-"):
        # A builder button or view switch: re-render that builder only, from what was typed.
        if op.startswith(TREE):
            builder: Any = TreeBuilder.from_post(request.POST, context.step_keys, op)
            partial = "tree-builder"
        else:
            targets = route_targets(document["steps"][index])
            builder = RoutesBuilder.from_post(request.POST, targets, op)
            partial = "routes-builder"
        return render(request, f"{PANELS}#{partial}", {"builder": builder})
    if request.POST.get("apply") == "1":
        return _step_live(request, document, index)
    form = StepForm(None, context=context, index=index, user=request.user)
    return render(
        request,
        f"{PANELS}#step-panel",
        {
            "recipe": recipe,
            "form": form,
            "element": request.POST.get("element", ""),
            "step_index": index,
            "names": names_in_scope(document, index),
            "unknown_names": unknown_template_names(
                document, str(document["steps"][index].get("prompt") or "")
            ),
            "branches": _step_branches(document, index),
        },
    )


def _step_live(request: HttpRequest, document: dict[str, Any], index: int) -> JsonResponse:
    """Apply what is right of a step's form as typed; say what is not, beside its field."""
    inputs = declared_inputs(document, request.POST.getlist(ADD_INPUT))
    aliases = declared_aliases(document, request.POST.getlist(ADD_ALIAS))
    context = DocumentContext(document)

    def make(data: Any) -> StepForm:
        return StepForm(data, context=context, index=index, user=request.user)

    posted, applied = live_apply(
        make, lambda f: f.is_valid() and f.result is not None, lambda f: f.all_forms(), request.POST
    )
    result = None
    if applied is not None:
        result = {
            "element": request.POST.get("element", ""),
            "step": applied.result,
            "sequence": applied.cleaned_data["sequence"],
            "actors": {**aliases, **applied.actors_added},
            "inputs": inputs,
        }
    all_forms = posted.all_forms()
    errors, general = field_errors(all_forms)
    fixes = {**prompt_fixes(posted, document), **alias_fixes(all_forms, posted.picker)}
    return JsonResponse(LiveAnswer(result, errors, general, fixes).as_data())


@login_required
@require_POST
def branch_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """Open, re-render (condition builder buttons) or apply as typed the form of one branch."""
    recipe = editable_recipe(request, slug)
    try:
        document = posted_document(request, recipe)
        step_index = _index(request, "step", len(document.get("steps") or []))
        branches = document["steps"][step_index].get("branches")
        if not isinstance(branches, list) or not all(isinstance(b, dict) for b in branches):
            raise BadDocument("branches: a list of branch objects")
        branch_index = _index(request, "branch", len(branches))
    except BadDocument as exc:
        return bad_request(exc)
    op = request.POST.get("_op", "")
    if not op and request.POST.get("apply") == "1":
        aliases = declared_aliases(document, request.POST.getlist(ADD_ALIAS))
        return _branch_live(request, DocumentContext(document), step_index, branch_index, aliases)
    # Opened, or drawn again from what was typed (a builder button, a changed type or action).
    panel = BranchPanel(
        context=DocumentContext(document),
        step_index=step_index,
        branch_index=branch_index,
        data=request.POST if op else None,
        op=op,
    )
    return render(
        request,
        f"{PANELS}#branch-panel",
        {
            **_judge_advice(request, recipe, document, step_index, branches[branch_index], panel),
            "recipe": recipe,
            "panel": panel,
            "form": panel.form,
            "element": request.POST.get("element", ""),
            "step_index": step_index,
            "branch_index": branch_index,
            "hide_errors": True,  # the live answer shows them, beside their fields
        },
    )


def _branch_live(
    request: HttpRequest,
    context: DocumentContext,
    step_index: int,
    branch_index: int,
    aliases: dict[str, str],
) -> JsonResponse:
    """Apply what is right of a branch's form as typed; say what is not, beside its field."""

    def make(data: Any) -> BranchPanel:
        return BranchPanel(
            context=context, step_index=step_index, branch_index=branch_index, data=data
        )

    posted, applied = live_apply(
        make, lambda p: p.is_valid(), lambda p: p.all_forms(), request.POST
    )
    result = None
    if applied is not None:
        result = {
            "element": request.POST.get("element", ""),
            "branch": applied.result,
            "actors": {**aliases, **applied.form.picker.added},
        }
    all_forms = posted.all_forms()
    errors, general = field_errors(all_forms)
    fixes = alias_fixes(all_forms, posted.form.picker)
    notes = applied.form.notes if applied is not None else []
    return JsonResponse(LiveAnswer(result, errors, general, fixes, notes).as_data())


def _judge_advice(
    request: HttpRequest,
    recipe: Recipe,
    document: dict[str, Any],
    step_index: int,
    branch: dict[str, Any],
    panel: BranchPanel,
) -> dict[str, Any]:
    """Return what the runs suggest for a judge branch's threshold, and the field it fills."""
    if not is_judge_condition(branch.get("when")):
        return {}
    step = str(document["steps"][step_index].get("key", ""))
    form = panel.condition.form
    return {
        "judge_advice": judge_thresholds.advice_for(request.user, recipe, step, branch),
        "judge_min_runs": MIN_RUNS,
        "judge_field": form["value"].html_name if "value" in form.fields else "",
    }


@login_required
@require_POST
def recipe_panel(request: HttpRequest, slug: str) -> HttpResponse:
    """Open or apply as typed the recipe's settings: name, description, inputs, actor aliases."""
    recipe = editable_recipe(request, slug)
    try:
        document = posted_document(request, recipe)
    except BadDocument as exc:
        return bad_request(exc)
    if request.POST.get("apply") == "1":
        posted, applied = live_apply(
            lambda data: RecipeSettings(document, data),
            lambda s: s.is_valid(),
            lambda s: s.all_forms(),
            request.POST,
        )
        errors, general = field_errors(posted.all_forms())
        result = applied.result if applied is not None else None
        return JsonResponse(LiveAnswer(result, errors, general).as_data())
    return render(
        request,
        f"{PANELS}#recipe-panel",
        {"recipe": recipe, "settings": RecipeSettings(document, None), "import_form": ImportForm()},
    )


@login_required
@require_POST
def draft_import(request: HttpRequest, slug: str) -> HttpResponse:
    """Replace the draft with an uploaded recipe file; reload the editor on success."""
    recipe = editable_recipe(request, slug)
    form = ImportForm(request.POST, request.FILES)
    errors: list[str] = []
    revision = request.POST.get("revision", "")
    if form.is_valid():
        try:
            recipe_draft_import(
                recipe=recipe,
                data=form.cleaned_data["file"].read(),
                expected_revision=whole_number(revision),
            )
        except RecipeRejected as exc:
            errors = exc.errors
        except RecipeConflict as exc:
            errors = [str(exc)]
        else:
            return HttpResponseClientRefresh()
    return render(
        request,
        f"{PANELS}#import-result",
        {"import_form": form, "import_errors": errors},
    )
