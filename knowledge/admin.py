"""Knowledge bases in the admin: settings saved through the services (a change to how chunks
are made re-indexes), documents and their chunks read-only (uploads go through the pages, the
API or `manage.py knowledge_upload`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from . import ingest
from .models import Chunk, Document, KnowledgeBase


class KnowledgeBaseForm(ModelForm):
    """The base's settings, checked as the services check them."""

    class Meta:
        model = KnowledgeBase
        fields = [
            "slug",
            "name",
            "description",
            "owner",
            "shared_with_users",
            "shared_with_groups",
            "chunk_size",
            "chunk_overlap",
            "embedding_actor",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        problems = ingest.settings_errors(
            name=cleaned.get("name") or "",
            chunk_size=cleaned.get("chunk_size"),
            chunk_overlap=cleaned.get("chunk_overlap"),
            embedding_actor=cleaned.get("embedding_actor"),
        )
        for problem in problems:
            field, _, message = problem.partition(": ")
            self.add_error(field if field in self.fields else None, message)
        return cleaned


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "owner",
        "chunk_size",
        "chunk_overlap",
        "embedding_actor",
        "settings_revision",
    ]
    search_fields = ["slug", "name", "description"]
    list_select_related = ["owner", "embedding_actor"]
    autocomplete_fields = ["owner"]
    filter_horizontal = ["shared_with_users", "shared_with_groups"]
    readonly_fields = ["embedding_dimensions", "settings_revision", "created_at", "updated_at"]
    form = KnowledgeBaseForm

    def save_model(
        self, request: HttpRequest, obj: KnowledgeBase, form: ModelForm, change: bool
    ) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        # Chunk settings go through the service, which bumps the revision and re-indexes.
        stored = KnowledgeBase.objects.get(pk=obj.pk)
        changes = {
            name: getattr(obj, name)
            for name in ingest.INDEX_SETTINGS
            if getattr(obj, name) != getattr(stored, name)
        }
        for name in (*ingest.INDEX_SETTINGS, "settings_revision", "embedding_dimensions"):
            setattr(obj, name, getattr(stored, name))
        super().save_model(request, obj, form, change)
        if changes:
            ingest.update_settings(obj, **changes)
            self.message_user(request, "Its documents are being indexed again.", messages.INFO)


class ChunkInline(admin.TabularInline):
    model = Chunk
    fields = ["ordinal", "heading", "text"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "knowledge_base", "format", "status", "progress", "created_at"]
    list_filter = ["status", "format"]
    search_fields = ["title", "filename", "knowledge_base__slug"]
    list_select_related = ["knowledge_base"]
    readonly_fields = [
        "knowledge_base",
        "title",
        "filename",
        "format",
        "content_hash",
        "size_bytes",
        "status",
        "chunks_total",
        "chunks_done",
        "error",
        "indexed_revision",
        "uploaded_by",
        "created_at",
        "updated_at",
        "text",
    ]
    inlines = [ChunkInline]
    actions = ["ingest_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        ingest.delete_document(obj)

    @admin.action(description="Ingest the selected documents again")
    def ingest_again(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        count = ingest.requeue(queryset)
        self.message_user(request, f"{count} document(s) queued for ingestion.", messages.INFO)
