"""The one write path of knowledge bases, their documents and chunks.

An upload is converted at once (a file that cannot be read is refused, nothing stored), stored
as a QUEUED document, and a worker is told after commit (`ingest_document`, by the task's name:
this module does not import the tasks that call it back). The worker chunks the document's
text, embeds the chunks in batches (the progress bar moves with each), and replaces the
document's chunks in one transaction at the end: a failure leaves the chunks it had, and the
document FAILED with the reason.

Changing how chunks are made (size, overlap, embedding actor) bumps the base's
`settings_revision`; every document indexed under an older one is queued again (`reindex`).
So does a change of the embedding actor itself (its provider, model or base URL: the
base's `embedding_fingerprint`), found when the settings are saved (`reindex_if_stale`).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery import current_app
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from workflows.models import SLUG_VALIDATOR, Actor

from . import chunking, vectors
from .convert import base_name, check_size, convert
from .embeddings import EmbeddingError, embed, fingerprint
from .models import (
    DEFAULT_CHUNK_OVERLAP,
    DEFAULT_CHUNK_SIZE,
    Chunk,
    Document,
    KnowledgeBase,
)

log = logging.getLogger(__name__)

INGEST_TASK = "knowledge.ingest_document"  # knowledge.tasks.ingest_document
REQUEUE_TASK = "knowledge.requeue_stalled"  # knowledge.tasks.requeue_stalled

# Chunks embedded per call: the unit the progress bar moves by.
EMBED_BATCH = 32
# An ingestion that has not moved for this long is taken to be dead (its worker killed): a new
# message for the document may take it over.
STALE_AFTER = timedelta(minutes=10)
# A document queued this long ago has lost its message (a worker would have claimed it).
REQUEUE_AFTER = timedelta(minutes=5)
REQUEUE_BATCH = 500

MIN_CHUNK_SIZE = 100
MAX_CHUNK_SIZE = 20_000
NAME_MAX_CHARS = 200
HEADING_MAX_CHARS = 500
FILENAME_MAX_CHARS = 300
# The settings whose change re-indexes every document.
INDEX_SETTINGS = ("chunk_size", "chunk_overlap", "embedding_actor")
_SETTINGS = ("name", "description", *INDEX_SETTINGS)
_EMBEDDING_PROVIDERS = (Actor.Provider.OPENAI, Actor.Provider.OLLAMA, Actor.Provider.SCRIPTED)


class SettingsInvalid(Exception):
    """Knowledge base settings that cannot be saved; `errors` lists each as `field: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class BaseConflict(Exception):
    """A knowledge base with that slug exists already."""


class IngestError(Exception):
    """A document could not be indexed; the message is stored on it."""


# Knowledge bases --------------------------------------------------------------------------------


def create_base(
    *,
    owner: AbstractBaseUser,
    slug: str,
    name: str,
    description: str = "",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    embedding_actor: Actor | None = None,
) -> KnowledgeBase:
    """Create a knowledge base owned by `owner`; raise SettingsInvalid or BaseConflict."""
    errors = _slug_errors(slug) + settings_errors(
        name=name,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        embedding_actor=embedding_actor,
    )
    if errors:
        raise SettingsInvalid(errors)
    try:
        with transaction.atomic():
            return KnowledgeBase.objects.create(
                owner=owner,
                slug=slug,
                name=name.strip(),
                description=description,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                embedding_actor=embedding_actor,
            )
    except IntegrityError:
        raise BaseConflict(f"slug: a knowledge base '{slug}' exists already") from None


def update_settings(base: KnowledgeBase, **changes: Any) -> KnowledgeBase:
    """Change the base's name, description, chunk size, overlap or embedding actor.

    A change to how chunks are made, or an embedding actor that now uses another model than
    the one that made the base's vectors, bumps `settings_revision` and queues every document
    again; a new embedding model also forgets the old vectors' dimensions. Compared with the
    row as it is (locked), not with `base`, which may be an old copy.
    """
    unknown = sorted(set(changes) - set(_SETTINGS))
    if unknown:
        raise TypeError(f"not a knowledge base setting: {', '.join(unknown)}")
    with transaction.atomic():
        locked = KnowledgeBase.objects.select_for_update().get(pk=base.pk)
        merged = {name: changes.get(name, getattr(locked, name)) for name in _SETTINGS}
        errors = settings_errors(
            name=merged["name"],
            chunk_size=merged["chunk_size"],
            chunk_overlap=merged["chunk_overlap"],
            embedding_actor=merged["embedding_actor"],
        )
        if errors:
            raise SettingsInvalid(errors)
        fields: dict[str, Any] = {name: changes[name] for name in changes}
        if "name" in fields:
            fields["name"] = fields["name"].strip()
        new_model = merged["embedding_actor"] != locked.embedding_actor or _stale_embeddings(
            locked, merged["embedding_actor"]
        )
        reindexing = new_model or any(
            name in changes and changes[name] != getattr(locked, name) for name in INDEX_SETTINGS
        )
        if new_model:
            fields.update(embedding_dimensions=None, embedding_fingerprint="")
        if reindexing:
            fields["settings_revision"] = F("settings_revision") + 1
        KnowledgeBase.objects.filter(pk=base.pk).update(**fields, updated_at=timezone.now())
        base.refresh_from_db()
        if reindexing:
            reindex(base)
    return base


def reindex_if_stale(base: KnowledgeBase) -> bool:
    """Re-index the base if its embedding actor now uses another model than the one that made
    its vectors (provider, model or base URL changed); return whether it does."""
    with transaction.atomic():
        locked = KnowledgeBase.objects.select_for_update().get(pk=base.pk)
        if not _stale_embeddings(locked, locked.embedding_actor):
            return False
        KnowledgeBase.objects.filter(pk=base.pk).update(
            settings_revision=F("settings_revision") + 1,
            embedding_dimensions=None,
            embedding_fingerprint="",
            updated_at=timezone.now(),
        )
        base.refresh_from_db()
        reindex(base)
    return True


def _stale_embeddings(base: KnowledgeBase, actor: Actor | None) -> bool:
    """Say whether the base's vectors were made by another model than `actor` uses now."""
    return (
        actor is not None
        and bool(base.embedding_fingerprint)
        and base.embedding_fingerprint != fingerprint(actor)
    )


def share_base(
    base: KnowledgeBase, *, users: Iterable[AbstractBaseUser], groups: Iterable[Group]
) -> None:
    """Share the base with exactly these users and groups (as a recipe is shared)."""
    with transaction.atomic():
        base.shared_with_users.set(list(users))
        base.shared_with_groups.set(list(groups))


def delete_base(base: KnowledgeBase) -> None:
    """Delete the base, its documents and chunks (ingestions under way find it gone)."""
    base.delete()


def _slug_errors(slug: str) -> list[str]:
    try:
        SLUG_VALIDATOR(slug)
    except Exception as exc:  # Django's ValidationError, whose message is for users
        return [f"slug: {' '.join(getattr(exc, 'messages', [str(exc)]))}"]
    if len(slug) > 100:
        return ["slug: at most 100 characters"]
    return []


def settings_errors(
    *, name: str, chunk_size: Any, chunk_overlap: Any, embedding_actor: Actor | None
) -> list[str]:
    """Return what is wrong with these settings, each as `field: message`."""
    errors = []
    if not isinstance(name, str) or not name.strip():
        errors.append("name: may not be blank")
    elif len(name.strip()) > NAME_MAX_CHARS:
        errors.append(f"name: at most {NAME_MAX_CHARS} characters")
    size_ok = isinstance(chunk_size, int) and MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE
    if not size_ok:
        errors.append(
            f"chunk_size: a number of characters from {MIN_CHUNK_SIZE} to {MAX_CHUNK_SIZE}"
        )
    if not isinstance(chunk_overlap, int) or chunk_overlap < 0:
        errors.append("chunk_overlap: a number of characters, 0 or more")
    elif size_ok and chunk_overlap > chunk_size // 2:
        errors.append(f"chunk_overlap: at most half the chunk size ({chunk_size // 2} characters)")
    if embedding_actor is not None and (
        embedding_actor.kind != Actor.Kind.LLM
        or embedding_actor.provider not in _EMBEDDING_PROVIDERS
    ):
        errors.append(
            f"embedding_actor: '{embedding_actor.name}' is not a model actor "
            "(openai, ollama or scripted) and cannot embed texts"
        )
    return errors


# Documents --------------------------------------------------------------------------------------


def add_document(
    base: KnowledgeBase,
    user: AbstractBaseUser | None,
    filename: str,
    data: bytes,
    content_type: str | None = None,
) -> tuple[Document, bool]:
    """Store an uploaded file in the base and queue its ingestion; return (document, created).

    The same bytes uploaded again return the document already there. A file that cannot be
    converted raises `convert.ConversionError`, and nothing is stored.
    """
    check_size(len(data))
    content_hash = hashlib.sha256(data).hexdigest()
    existing = Document.objects.filter(knowledge_base=base, content_hash=content_hash).first()
    if existing is not None:
        return existing, False
    converted = convert(filename, data, content_type)
    try:
        with transaction.atomic():
            document = Document.objects.create(
                knowledge_base=base,
                title=converted.title,
                filename=base_name(filename)[:FILENAME_MAX_CHARS],
                format=converted.format,
                content_hash=content_hash,
                size_bytes=len(data),
                text=converted.text,
                status=Document.Status.QUEUED,
                uploaded_by=user,
            )
            send_on_commit(document.pk)
    except IntegrityError:
        # The same file, uploaded twice at once: the other upload stored it.
        existing = Document.objects.filter(knowledge_base=base, content_hash=content_hash).first()
        if existing is None:
            raise
        return existing, False
    return document, True


def delete_document(document: Document) -> None:
    """Delete the document and its chunks (an ingestion under way finds it gone)."""
    document.delete()


def reindex(base: KnowledgeBase) -> int:
    """Queue again every document of the base not indexed under its current settings (and
    those that failed, or whose message was lost); return how many."""
    return requeue(
        Document.objects.filter(knowledge_base=base, indexed_revision__lt=base.settings_revision)
    )


def requeue(documents: QuerySet[Document]) -> int:
    """Queue these documents for ingestion again, whatever their state; return how many."""
    with transaction.atomic():
        ids = list(documents.values_list("pk", flat=True))
        Document.objects.filter(pk__in=ids).update(
            status=Document.Status.QUEUED,
            chunks_done=0,
            chunks_total=0,
            error="",
            updated_at=timezone.now(),
        )
        for document_id in ids:
            send_on_commit(document_id)
    return len(ids)


def requeue_stalled() -> int:
    """Send again the messages of documents queued long ago (a message lost to a broker
    outage, or to a restart of the embedded worker's in-memory queue), and queue again the
    ingestions that stopped moving (a killed worker); return how many.

    Run periodically (Celery beat, the embedded worker's beat). A message sent twice does no
    harm: the second finds the document claimed or done.
    """
    now = timezone.now()
    stalled = Document.objects.filter(
        Q(status=Document.Status.QUEUED, updated_at__lt=now - REQUEUE_AFTER)
        | Q(status=Document.Status.INGESTING, updated_at__lt=now - STALE_AFTER)
    )
    with transaction.atomic():
        ids = list(stalled.order_by("updated_at").values_list("pk", flat=True)[:REQUEUE_BATCH])
        # Still stalled (a worker may have claimed one meanwhile), and touched, so that the
        # next round does not send them again straight away.
        stalled.filter(pk__in=ids).update(status=Document.Status.QUEUED, updated_at=now)
        for document_id in ids:
            send_on_commit(document_id)
    if ids:
        log.warning("sent the messages of %d stalled document(s) again", len(ids))
    return len(ids)


def send_on_commit(document_id: int) -> None:
    """Ask a worker to ingest the document once the current transaction commits."""
    transaction.on_commit(lambda: send(document_id))


def send(document_id: int) -> bool:
    """Send the document's message now; return whether the broker took it.

    The document is already stored: a broker that is down must not fail the upload. The
    document stays queued, and `requeue_stalled` sends its message again later.
    """
    try:
        current_app.send_task(INGEST_TASK, (document_id,), retry=False, ignore_result=True)
    except Exception as exc:  # kombu's and redis-py's errors have no common base
        log.warning(
            "document %s: the broker is unreachable (%s); it stays queued", document_id, exc
        )
        return False
    return True


# Ingestion --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What one ingestion works from: the settings read when it began."""

    revision: int
    size: int
    overlap: int
    actor: Actor | None
    # Which claim of the document this ingestion is (see `_claim`).
    token: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.actor) if self.actor is not None else ""


def ingest_document(document_id: int) -> bool:
    """Chunk, embed and store the document's chunks; return whether this call indexed it.

    Idempotent: a document that is not queued (indexed already, being indexed, deleted) is
    left alone, unless its ingestion stopped moving `STALE_AFTER` ago (a killed worker).
    """
    token = _claim(document_id)
    if token is None:
        return False
    document = Document.objects.select_related("knowledge_base__embedding_actor").get(
        pk=document_id
    )
    base = document.knowledge_base
    plan = _Plan(
        base.settings_revision, base.chunk_size, base.chunk_overlap, base.embedding_actor, token
    )
    try:
        pieces = chunking.split(document.text, plan.size, plan.overlap)
        _progress(document_id, plan, done=0, total=len(pieces))
        embeddings = _embed_all(document_id, base, plan, [p.text for p in pieces])
        return _store(document_id, base.pk, plan, document.title, pieces, embeddings)
    except _Superseded:
        return False
    except (IngestError, EmbeddingError, ValueError) as exc:
        _fail(document_id, base.pk, plan, str(exc))
        return False
    except Exception as exc:
        log.exception("document %s: ingestion failed", document_id)
        _fail(document_id, base.pk, plan, f"ingestion failed unexpectedly ({type(exc).__name__})")
        return False


class _Superseded(Exception):
    """The document was deleted, its base's settings changed, or another ingestion took it
    over, while it was indexed."""


def _claim(document_id: int) -> str | None:
    """Claim the document for this ingestion; return the claim's token, or None if it is not
    to be ingested now. A claim of a stalled ingestion gives it a new token: the old one,
    should it wake up, then writes nothing."""
    stale = timezone.now() - STALE_AFTER
    claimable = Q(status=Document.Status.QUEUED) | Q(
        status=Document.Status.INGESTING, updated_at__lt=stale
    )
    token = uuid.uuid4().hex
    claimed = Document.objects.filter(claimable, pk=document_id).update(
        status=Document.Status.INGESTING,
        claim_token=token,
        chunks_done=0,
        chunks_total=0,
        error="",
        updated_at=timezone.now(),
    )
    return token if claimed else None


def _progress(document_id: int, plan: _Plan, *, done: int, total: int | None = None) -> None:
    fields: dict[str, Any] = {"chunks_done": done, "updated_at": timezone.now()}
    if total is not None:
        fields["chunks_total"] = total
    Document.objects.filter(
        pk=document_id, status=Document.Status.INGESTING, claim_token=plan.token
    ).update(**fields)


def _embed_all(
    document_id: int, base: KnowledgeBase, plan: _Plan, texts: list[str]
) -> list[bytes | None]:
    """Return each text's embedding as stored bytes (None for all without an embedding
    actor), moving the document's progress after each batch."""
    if plan.actor is None:
        return [None] * len(texts)
    out: list[bytes | None] = []
    for start in range(0, len(texts), EMBED_BATCH):
        batch = texts[start : start + EMBED_BATCH]
        answer = embed(plan.actor, batch)
        if len(answer) != len(batch):
            raise IngestError(
                f"the embedding actor answered {len(answer)} vectors for {len(batch)}"
            )
        if answer:
            _check_dimensions(base, plan, len(answer[0]))
        out += [vectors.to_bytes(vector) for vector in answer]
        _progress(document_id, plan, done=len(out))
    return out


def _check_dimensions(base: KnowledgeBase, plan: _Plan, dimensions: int) -> None:
    """Record the base's vector size and model on its first embedding; refuse another later."""
    KnowledgeBase.objects.filter(
        pk=base.pk, embedding_dimensions__isnull=True, settings_revision=plan.revision
    ).update(embedding_dimensions=dimensions, embedding_fingerprint=plan.fingerprint)
    current = KnowledgeBase.objects.filter(pk=base.pk).values_list(
        "settings_revision", "embedding_dimensions", "embedding_fingerprint"
    )
    row = current.first()
    if row is None or row[0] != plan.revision:
        raise _Superseded
    if row[2] and row[2] != plan.fingerprint:
        raise IngestError(
            "the embedding actor now uses another model than the one that embedded this "
            "knowledge base; save its settings to re-index it"
        )
    if row[1] != dimensions:
        raise IngestError(
            f"the embedding actor answered vectors of {dimensions} dimensions; this knowledge "
            f"base holds vectors of {row[1]} (choose the embedding actor again to re-index)"
        )


def _store(
    document_id: int,
    base_id: int,
    plan: _Plan,
    title: str,
    pieces: list[chunking.ChunkText],
    embeddings: list[bytes | None],
) -> bool:
    """Replace the document's chunks with these, in one transaction, unless superseded."""
    with transaction.atomic():
        if not _still_current(document_id, base_id, plan):
            raise _Superseded
        Chunk.objects.filter(document_id=document_id).delete()
        Chunk.objects.bulk_create(
            [
                Chunk(
                    document_id=document_id,
                    knowledge_base_id=base_id,
                    ordinal=ordinal,
                    heading=_short(_below(title, piece.heading), HEADING_MAX_CHARS),
                    text=piece.text,
                    embedding=embedding,
                )
                for ordinal, (piece, embedding) in enumerate(zip(pieces, embeddings, strict=True))
            ],
            batch_size=500,
        )
        Document.objects.filter(pk=document_id).update(
            status=Document.Status.READY,
            chunks_total=len(pieces),
            chunks_done=len(pieces),
            error="",
            indexed_revision=plan.revision,
            updated_at=timezone.now(),
        )
    return True


def _fail(document_id: int, base_id: int, plan: _Plan, error: str) -> None:
    """Mark the document FAILED with `error`, keeping the chunks it had."""
    with transaction.atomic():
        if not _still_current(document_id, base_id, plan):
            return
        Document.objects.filter(pk=document_id).update(
            status=Document.Status.FAILED, error=error[:2000], updated_at=timezone.now()
        )


def _still_current(document_id: int, base_id: int, plan: _Plan) -> bool:
    """Lock the document; say whether it exists, is still this ingestion's (not taken over),
    and its base's settings are still the plan's."""
    claimed = Document.objects.select_for_update().filter(pk=document_id, claim_token=plan.token)
    if not claimed.exists():
        return False
    revision = (
        KnowledgeBase.objects.filter(pk=base_id).values_list("settings_revision", flat=True).first()
    )
    return revision == plan.revision


def _below(title: str, heading: str) -> str:
    """Return the heading path without the document's title at its head (citations show
    "Title › heading": the H1 that gave the document its title would be said twice)."""
    if heading == title:
        return ""
    return heading.removeprefix(title + chunking.HEADING_SEPARATOR)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
