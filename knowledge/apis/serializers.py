"""Input and output shapes of the knowledge bases API."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from workflows.apis.schema import StrictText
from workflows.engine.sources import (
    DEFAULT_MIN_SCORE,
    DEFAULT_MODE,
    DEFAULT_TOP_K,
    MAX_TOP_K,
    MODES,
)
from workflows.models import SLUG_VALIDATOR, Actor

from ..ingest import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from ..models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, Document, KnowledgeBase


class KnowledgeBaseOutput(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    embedding_actor = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    document_count = serializers.SerializerMethodField()
    chunk_count = serializers.SerializerMethodField()

    class Meta:
        model = KnowledgeBase
        fields = [
            "slug",
            "name",
            "description",
            "owner",
            "chunk_size",
            "chunk_overlap",
            "embedding_actor",
            "embedding_dimensions",
            "settings_revision",
            "document_count",
            "chunk_count",
            "created_at",
            "updated_at",
        ]

    def get_document_count(self, base: KnowledgeBase) -> int:
        if hasattr(base, "document_count"):  # annotated by selectors.knowledge_bases_listed
            return int(base.document_count)
        return base.documents.count()

    def get_chunk_count(self, base: KnowledgeBase) -> int:
        if hasattr(base, "chunk_count"):
            return int(base.chunk_count)
        return base.chunks.count()


class KnowledgeBaseDetailOutput(KnowledgeBaseOutput):
    shared_with_users = serializers.SlugRelatedField(
        slug_field="username", many=True, read_only=True
    )
    shared_with_groups = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)

    class Meta(KnowledgeBaseOutput.Meta):
        fields = [*KnowledgeBaseOutput.Meta.fields, "shared_with_users", "shared_with_groups"]


class ActorNameField(serializers.SlugRelatedField):
    """An actor by name, or null; DRF would take "" for null, which the schema does not say."""

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data == "":
            raise serializers.ValidationError("may not be blank (send null for none)")
        return super().run_validation(data)


def _embedding_actor_field() -> serializers.SlugRelatedField:
    return ActorNameField(
        slug_field="name",
        queryset=Actor.objects.filter(kind=Actor.Kind.LLM),
        required=False,
        allow_null=True,
        help_text="the name of a model actor that embeds chunks and queries; none: full text only",
    )


class KnowledgeBaseCreateInput(StrictText, serializers.Serializer):
    slug = serializers.CharField(max_length=100, validators=[SLUG_VALIDATOR])
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    chunk_size = serializers.IntegerField(
        min_value=MIN_CHUNK_SIZE, max_value=MAX_CHUNK_SIZE, default=DEFAULT_CHUNK_SIZE
    )
    chunk_overlap = serializers.IntegerField(
        min_value=0, max_value=MAX_CHUNK_SIZE // 2, default=DEFAULT_CHUNK_OVERLAP
    )
    embedding_actor = _embedding_actor_field()


class KnowledgeBasePatchInput(StrictText, serializers.Serializer):
    """Settings to change; a new chunk size, overlap or embedding actor re-indexes every
    document."""

    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    chunk_size = serializers.IntegerField(
        min_value=MIN_CHUNK_SIZE, max_value=MAX_CHUNK_SIZE, required=False
    )
    chunk_overlap = serializers.IntegerField(
        min_value=0, max_value=MAX_CHUNK_SIZE // 2, required=False
    )
    embedding_actor = _embedding_actor_field()
    shared_with_users = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False
    )
    shared_with_groups = serializers.SlugRelatedField(
        slug_field="name", queryset=Group.objects.all(), many=True, required=False
    )


class DocumentOutput(serializers.ModelSerializer):
    uploaded_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = serializers.IntegerField(help_text="how far ingestion is, in percent")

    class Meta:
        model = Document
        fields = [
            "id",
            "title",
            "filename",
            "format",
            "size_bytes",
            "status",
            "progress",
            "chunks_done",
            "chunks_total",
            "error",
            "indexed_revision",
            "uploaded_by",
            "created_at",
            "updated_at",
        ]


class DocumentUploadOutput(DocumentOutput):
    created = serializers.BooleanField(
        help_text="false: the same file was in the knowledge base already (this is it)"
    )

    class Meta(DocumentOutput.Meta):
        fields = [*DocumentOutput.Meta.fields, "created"]


class DocumentUploadInput(StrictText, serializers.Serializer):
    """A document sent as JSON (a multipart upload sends the file as field `file` instead)."""

    filename = serializers.CharField(
        max_length=300, help_text="the file's name; its extension chooses the format"
    )
    content_base64 = serializers.CharField(help_text="the file's bytes, base64-encoded")
    content_type = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="its media type"
    )

    def validate_content_base64(self, value: str) -> bytes:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("not valid base64") from None


class SearchInput(serializers.Serializer):
    q = serializers.CharField(max_length=2000, help_text="what to look for")
    mode = serializers.ChoiceField(choices=MODES, default=DEFAULT_MODE)
    top_k = serializers.IntegerField(min_value=1, max_value=MAX_TOP_K, default=DEFAULT_TOP_K)
    min_score = serializers.FloatField(min_value=0.0, max_value=1.0, default=DEFAULT_MIN_SCORE)


class HitOutput(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    document_title = serializers.CharField()
    knowledge_base = serializers.CharField()
    heading = serializers.CharField(allow_blank=True)
    text = serializers.CharField()
    score = serializers.FloatField(min_value=0.0, max_value=1.0)


class SearchOutput(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.ChoiceField(choices=MODES)
    hits = HitOutput(many=True)
