"""Knowledge bases as rows: documents (their converted text) and the chunks search reads.

The full-text index is not a model field: on SQLite it is an FTS5 table, on PostgreSQL a
generated `tsvector` column with a GIN index (both made by migration 0002); `search.py`
reads them. Embeddings are float32 bytes on the chunk (`vectors.py`).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from workflows.models import SLUG_VALIDATOR, Actor

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 150


class KnowledgeBase(models.Model):
    """A named set of documents a recipe step searches (`sources[].knowledge_base` = slug)."""

    slug = models.CharField(max_length=100, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="knowledge_bases"
    )
    shared_with_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="shared_knowledge_bases"
    )
    shared_with_groups = models.ManyToManyField(
        Group, blank=True, related_name="shared_knowledge_bases"
    )
    # Chunking, in characters; changing either (or the embedding actor) re-indexes every document.
    chunk_size = models.PositiveIntegerField(default=DEFAULT_CHUNK_SIZE)
    chunk_overlap = models.PositiveIntegerField(default=DEFAULT_CHUNK_OVERLAP)
    # The actor whose `/v1/embeddings` embeds the chunks and queries; none: full-text only.
    embedding_actor = models.ForeignKey(
        Actor, null=True, blank=True, on_delete=models.PROTECT, related_name="knowledge_bases"
    )
    # Set by the first embedding; a later answer of another size is an error.
    embedding_dimensions = models.PositiveIntegerField(null=True, blank=True)
    # Which model made the vectors (`embeddings.fingerprint`: provider, model, base URL), set
    # with the dimensions: an actor changed to another model since cannot search them.
    embedding_fingerprint = models.TextField(blank=True)
    # Bumped when a setting above changes; a document whose chunks are older is re-indexed.
    settings_revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]
        indexes = [models.Index(fields=["owner", "name"])]

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One uploaded file: its converted text, its ingestion status and progress."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        INGESTING = "ingesting", "Ingesting"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    knowledge_base = models.ForeignKey(
        KnowledgeBase, on_delete=models.CASCADE, related_name="documents"
    )
    title = models.CharField(max_length=300)
    filename = models.CharField(max_length=300, blank=True)
    # The format it was converted from: text, markdown, html, pdf or docx.
    format = models.CharField(max_length=20)
    # sha256 of the uploaded bytes: the same file is not stored twice in a knowledge base.
    content_hash = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField(default=0)
    # The converted text (Markdown-like: headings kept), chunked again on re-indexing.
    text = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # The knowledge base's settings_revision its chunks were made with (0: none yet).
    indexed_revision = models.PositiveIntegerField(default=0)
    # Set by each claim of an ingestion: one that was taken over (it stalled) writes nothing.
    claim_token = models.CharField(max_length=32, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["knowledge_base", "title", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["knowledge_base", "content_hash"], name="unique_document_per_base"
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def progress(self) -> int:
        """Return how far ingestion is, in percent."""
        if self.status == self.Status.READY:
            return 100
        if not self.chunks_total:
            return 0
        return min(100, self.chunks_done * 100 // self.chunks_total)


class Chunk(models.Model):
    """A piece of a document's text, the unit search finds and steps cite."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    # Denormalised from the document, so a search reads one table.
    knowledge_base = models.ForeignKey(
        KnowledgeBase, on_delete=models.CASCADE, related_name="chunks", db_index=False
    )
    ordinal = models.PositiveIntegerField(help_text="position in the document, from 0")
    # The headings the chunk falls under, as "Guide › Install".
    heading = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    # float32 little-endian bytes; null until embedded (or when the base has no embedding actor).
    embedding = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["document", "ordinal"]
        indexes = [
            models.Index(fields=["knowledge_base", "document"]),
            # The embedded chunks of a base, counted from the index alone (vectors.py).
            models.Index(
                fields=["knowledge_base", "id"],
                condition=models.Q(embedding__isnull=False),
                name="knowledge_chunk_embedded",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["document", "ordinal"], name="unique_chunk_ordinal"),
        ]

    def __str__(self) -> str:
        return f"{self.document.title} #{self.ordinal}"
