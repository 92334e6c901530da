"""Read knowledge bases and their documents, always through what the user may see."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from .models import Chunk, Document, KnowledgeBase

# Documents on their way to being searchable.
MOVING = (Document.Status.QUEUED, Document.Status.INGESTING)


def knowledge_bases_for(user: AbstractBaseUser | AnonymousUser) -> QuerySet[KnowledgeBase]:
    """Return the knowledge bases a user owns or that are shared with them (staff: all)."""
    if not user.is_authenticated:
        return KnowledgeBase.objects.none()
    bases = KnowledgeBase.objects.select_related("owner", "embedding_actor")
    if user.is_staff:
        return bases
    # A subquery, not a join: `distinct()` would get in the way of the counts callers add.
    visible = KnowledgeBase.objects.filter(
        Q(owner=user) | Q(shared_with_users=user) | Q(shared_with_groups__user=user)
    ).values("pk")
    return bases.filter(pk__in=visible)


def knowledge_bases_listed(user: AbstractBaseUser | AnonymousUser) -> QuerySet[KnowledgeBase]:
    """Return the user's knowledge bases with `document_count`, `chunk_count` and
    `moving_count` (documents queued or being ingested), in one query."""
    return _with_counts(knowledge_bases_for(user))


def base_with_counts(base: KnowledgeBase) -> KnowledgeBase:
    """Return the base read again, with `document_count`, `chunk_count` and `moving_count`."""
    return _with_counts(
        KnowledgeBase.objects.select_related("owner", "embedding_actor").filter(pk=base.pk)
    ).get()


def _with_counts(bases: QuerySet[KnowledgeBase]) -> QuerySet[KnowledgeBase]:
    return bases.annotate(
        document_count=_count(Document),
        chunk_count=_count(Chunk),
        moving_count=_count(Document, status__in=MOVING),
    )


def _count(model: type[Document] | type[Chunk], **where: Any) -> Coalesce:
    # One subquery per count: joining both tables would count every (document, chunk) pair.
    rows = (
        model.objects.filter(knowledge_base=OuterRef("pk"), **where)
        .order_by()
        .values("knowledge_base")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def readable_base(user: AbstractBaseUser | AnonymousUser, slug: str) -> KnowledgeBase | None:
    """Return the knowledge base `slug` if the user may read it; None if not, or if none is."""
    return knowledge_bases_for(user).filter(slug=slug).first()


def base_documents(base: KnowledgeBase) -> QuerySet[Document]:
    """Return a knowledge base's documents, newest first, without their text."""
    return (
        Document.objects.filter(knowledge_base=base)
        .defer("text")
        .select_related("uploaded_by")
        .order_by("-created_at", "-pk")
    )


def base_document(base: KnowledgeBase, document_id: int) -> Document | None:
    """Return one document of the knowledge base, or None."""
    return Document.objects.filter(knowledge_base=base, pk=document_id).first()
