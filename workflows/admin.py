from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html

from . import services
from .actor_urls import redact_url
from .models import Actor, Branch, Recipe, RecipeActor, RecipeVersion, Step


class RedactedURLInput(forms.URLInput):
    """Show a base URL without credentials (rows written before they were refused)."""

    def format_value(self, value: Any) -> str | None:
        shown = super().format_value(value)
        return redact_url(shown) if shown else shown


class ActorForm(forms.ModelForm):
    """The whole actor is checked by `Actor.clean`; this adds what recipes need of it."""

    base_url = forms.URLField(
        required=False, max_length=200, assume_scheme="https", widget=RedactedURLInput
    )

    class Meta:
        model = Actor
        fields = [
            "name",
            "kind",
            "provider",
            "model",
            "base_url",
            "api_key_env",
            "params",
            "timeout_s",
            "group",
            "config",
            "capabilities",
            "price_in_per_million",
            "price_out_per_million",
            "currency",
            "max_concurrency",
            "max_calls_per_minute",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.instance.pk is not None:
            stored = Actor.objects.get(pk=self.instance.pk)
            changes = {f: cleaned[f] for f in ("name", "kind") if f in cleaned}
            refusal = services.actor_change_refusal(actor=stored, changes=changes)
            if refusal is not None:
                self.add_error(refusal[0], refusal[1])
        return cleaned


def _refusing_in_use(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer an ActorInUse (a publish raced the form's check) with a message, not a 500."""

    def guarded(admin_: ActorAdmin, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return view(admin_, request, *args, **kwargs)
        except services.ActorInUse as exc:
            admin_.message_user(request, str(exc).removeprefix("$: "), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    return guarded


@admin.register(Actor)
class ActorAdmin(admin.ModelAdmin):
    """Actors through the same checks as the API: whole, and never pulled from under a recipe."""

    form = ActorForm
    list_display = [
        "name",
        "kind",
        "provider",
        "model",
        "group",
        "price_in_per_million",
        "price_out_per_million",
        "currency",
        "max_concurrency",
        "max_calls_per_minute",
    ]
    list_filter = ["kind", "provider"]
    search_fields = ["name", "model"]

    def save_model(self, request: HttpRequest, obj: Actor, form: ActorForm, change: bool) -> None:
        if change:
            changes = {f: form.cleaned_data[f] for f in form.changed_data}
            services.actor_update(actor=obj, changes=changes)
        else:
            obj.save()

    def delete_model(self, request: HttpRequest, obj: Actor) -> None:
        services.actor_delete(actor=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Actor]) -> None:
        for actor in queryset:
            services.actor_delete(actor=actor)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Listed as protected, the admin shows why and offers no "Yes, I'm sure".
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        for actor in objs:
            refusal = services.actor_delete_refusal(actor=actor)
            if refusal is not None:
                protected = [*protected, refusal]
        return deleted, counts, perms_needed, protected

    changeform_view = _refusing_in_use(admin.ModelAdmin.changeform_view)
    delete_view = _refusing_in_use(admin.ModelAdmin.delete_view)
    changelist_view = _refusing_in_use(admin.ModelAdmin.changelist_view)


class RecipeActorInline(admin.TabularInline):
    model = RecipeActor
    extra = 0


class StepInline(admin.StackedInline):
    model = Step
    extra = 0
    show_change_link = True
    fields = ["order", "key", "name", "kind", "actor_alias", "prompt", "timeout_s"]


class BranchInline(admin.TabularInline):
    model = Branch
    extra = 0
    fields = ["priority", "name", "condition", "action", "target", "params", "active"]


class VersionInline(admin.TabularInline):
    model = RecipeVersion
    extra = 0
    fields = ["number", "note", "created_by", "created_at"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[RecipeVersion]:
        """List the published versions; draft snapshots are listed under Recipe versions."""
        return super().get_queryset(request).published()


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "owner", "revision", "updated_at"]
    search_fields = ["name", "slug", "description"]
    list_select_related = ["owner"]
    filter_horizontal = ["shared_with_users", "shared_with_groups"]
    inlines = [RecipeActorInline, StepInline, VersionInline]


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "kind", "recipe", "order"]
    list_filter = ["kind"]
    search_fields = ["key", "name", "recipe__slug"]
    list_select_related = ["recipe"]
    inlines = [BranchInline]


@admin.register(RecipeVersion)
class RecipeVersionAdmin(admin.ModelAdmin):
    """Versions and draft snapshots are immutable: shown, never edited."""

    list_display = ["recipe", "number", "is_draft_snapshot", "note", "created_by", "created_at"]
    list_filter = ["is_draft_snapshot"]
    list_select_related = ["recipe", "created_by"]
    readonly_fields = [
        "recipe",
        "number",
        "is_draft_snapshot",
        "note",
        "created_by",
        "created_at",
        "pretty_document",
    ]
    exclude = ["document", "document_hash"]

    @admin.display(description="document")
    def pretty_document(self, obj: RecipeVersion) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.document, indent=2))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
