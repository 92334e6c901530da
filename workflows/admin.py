from __future__ import annotations

import json

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from .models import Actor, Branch, Recipe, RecipeActor, RecipeVersion, Step


@admin.register(Actor)
class ActorAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "provider", "model", "group"]
    list_filter = ["kind", "provider"]
    search_fields = ["name", "model"]


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
    """Published versions are immutable: shown, never edited."""

    list_display = ["recipe", "number", "note", "created_by", "created_at"]
    list_select_related = ["recipe", "created_by"]
    readonly_fields = ["recipe", "number", "note", "created_by", "created_at", "pretty_document"]
    exclude = ["document"]

    @admin.display(description="document")
    def pretty_document(self, obj: RecipeVersion) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.document, indent=2))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
