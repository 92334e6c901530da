"""The write path of knowledge bases: uploads, ingestion (chunks, embeddings, progress), the
re-indexing that follows a settings change, deletes; and the Celery task that runs it."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.conf import settings
from django.utils import timezone

from config.celery import app as celery_app
from knowledge import ingest, vectors
from knowledge.convert import ConversionError
from knowledge.embeddings import EmbeddingError, fingerprint
from knowledge.models import Chunk, Document, KnowledgeBase
from knowledge.search import SearchError, search
from tests.knowledge import files
from tests.knowledge.conftest import KnowledgeBaseFactory, add, wait_until_done
from tests.knowledge.embedding_stub import MakeActor
from tests.runner.providers.stub_server import StubServer, error
from workflows.models import Actor

SECTIONS = "\n\n".join(
    f"# Part {i}\n\n" + " ".join(f"Sentence {i}.{j} about tides and boats." for j in range(12))
    for i in range(6)
)


def chunk_rows(document: Document) -> list[tuple[int, str, str]]:
    return list(document.chunks.order_by("ordinal").values_list("ordinal", "heading", "text"))


# Uploads ----------------------------------------------------------------------------------------


def test_an_upload_is_stored_queued_and_sent_to_a_worker_after_commit(
    base: KnowledgeBase, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        document, created = ingest.add_document(base, user, "guide.md", files.MARKDOWN)

    assert created
    assert len(callbacks) == 1  # the message to the worker leaves after commit
    document.refresh_from_db()
    assert document.status == Document.Status.QUEUED
    assert document.title == "Lighthouse Guide"
    assert document.format == "markdown"
    assert document.filename == "guide.md"
    assert document.size_bytes == len(files.MARKDOWN)
    assert document.content_hash == hashlib.sha256(files.MARKDOWN).hexdigest()
    assert document.text.startswith("# Lighthouse Guide")
    assert document.uploaded_by == user
    assert document.progress == 0


def test_the_same_file_is_not_stored_twice_in_a_base(
    base: KnowledgeBase, user: Any, other_user: Any
) -> None:
    first = add(base, "guide.md", files.MARKDOWN)

    again, created = ingest.add_document(base, other_user, "renamed.md", files.MARKDOWN)

    assert not created
    assert again == first
    assert base.documents.count() == 1
    elsewhere = KnowledgeBaseFactory(owner=user)
    assert ingest.add_document(elsewhere, user, "guide.md", files.MARKDOWN)[1]


def test_the_same_file_uploaded_twice_at_once_is_stored_once(
    base: KnowledgeBase, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_convert = ingest.convert
    stored: list[Document] = []

    def while_the_other_upload_commits(*args: Any) -> Any:
        # The other upload stores the same file between this one's look-up and its insert.
        monkeypatch.setattr(ingest, "convert", real_convert)
        stored.append(ingest.add_document(base, user, "guide.md", files.MARKDOWN)[0])
        return real_convert(*args)

    monkeypatch.setattr(ingest, "convert", while_the_other_upload_commits)

    document, created = ingest.add_document(base, user, "guide.md", files.MARKDOWN)

    assert (document, created) == (stored[0], False)
    assert base.documents.count() == 1


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("broken.pdf", b"%PDF-1.7 nothing more", "the PDF cannot be read"),
        ("secret.pdf", files.pdf("hidden", password="pw"), "encrypted"),
        ("bomb.docx", files.inflating_docx(), "zip bomb"),
        ("parts.docx", files.many_parts_docx(), "zip bomb"),
        ("fake.docx", b"not a zip at all", "not a zip archive"),
        ("blank.txt", b" \n \n", "holds no text"),
        ("binary.bin", bytes(range(256)) * 4, "unknown format"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_and_nothing_is_stored(
    base: KnowledgeBase, user: Any, name: str, data: bytes, message: str
) -> None:
    with pytest.raises(ConversionError, match=message):
        ingest.add_document(base, user, name, data)

    assert not Document.objects.exists()


def test_an_oversized_file_is_refused_before_it_is_converted(
    base: KnowledgeBase, user: Any, settings: Any
) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1000

    with pytest.raises(ConversionError, match="the limit is 1,000 bytes"):
        ingest.add_document(base, user, "big.txt", b"word " * 300)

    assert not Document.objects.exists()


def test_text_in_a_legacy_encoding_is_stored_as_it_reads(base: KnowledgeBase) -> None:
    document = add(base, "menu.txt", "Crème brûlée, café — 5 €".encode("cp1252"))

    ingest.ingest_document(document.pk)

    assert [text for _, _, text in chunk_rows(document)] == ["Crème brûlée, café — 5 €"]


# Ingestion --------------------------------------------------------------------------------------


def test_ingestion_writes_the_chunks_under_their_headings_and_finishes_at_100(
    base: KnowledgeBase,
) -> None:
    document = add(base, "guide.md", files.MARKDOWN)

    assert ingest.ingest_document(document.pk)

    document.refresh_from_db()
    assert document.status == Document.Status.READY
    assert document.progress == 100
    assert document.chunks_done == document.chunks_total == 2
    assert document.indexed_revision == base.settings_revision
    assert document.error == ""
    assert chunk_rows(document) == [
        (0, "", "Keepers trim the wick every evening."),
        (
            1,
            "Storms",
            "During a storm the lamp burns all night and the keeper logs the wind.",
        ),
    ]
    assert set(document.chunks.values_list("knowledge_base", flat=True)) == {base.pk}
    assert not document.chunks.filter(embedding__isnull=False).exists()


def test_a_heading_path_names_the_title_only_when_it_is_not_the_documents_title(
    base: KnowledgeBase,
) -> None:
    document = add(base, "notes.txt", b"# Guide\n\n## Install\n\nRun it.\n\n# Guide Two\n\nMore.")

    ingest.ingest_document(document.pk)

    assert document.title == "notes"
    assert [heading for _, heading, _ in chunk_rows(document)] == ["Guide › Install", "Guide Two"]


def test_ingestion_embeds_the_chunks_and_records_the_dimensions(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)

    ingest.ingest_document(document.pk)

    base.refresh_from_db()
    assert base.embedding_dimensions == 256
    for chunk in document.chunks.all():
        assert len(vectors.from_bytes(chunk.embedding)) == 256


def test_progress_moves_with_each_batch_of_embeddings(
    base: KnowledgeBase,
    embedding_actor: MakeActor,
    stub_server: StubServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest.update_settings(base, embedding_actor=embedding_actor())
    document = add(base, "long.md", SECTIONS.encode())
    seen: list[tuple[str, int, int]] = []
    real_embed = ingest.embed

    def watched(actor: Actor, texts: list[str]) -> list[list[float]]:
        row = Document.objects.get(pk=document.pk)
        seen.append((row.status, row.chunks_done, row.chunks_total))
        return real_embed(actor, texts)

    monkeypatch.setattr(ingest, "EMBED_BATCH", 10)
    monkeypatch.setattr(ingest, "embed", watched)

    ingest.ingest_document(document.pk)

    document.refresh_from_db()
    total = document.chunks_total
    assert total > 15
    assert seen == [("ingesting", done, total) for done in range(0, total, 10)]
    assert len(stub_server.embedding_requests) == len(seen)
    assert (document.status, document.chunks_done, document.progress) == ("ready", total, 100)


def test_an_embedding_server_that_fails_leaves_the_document_failed_with_its_chunks(
    base: KnowledgeBase, embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    ingest.update_settings(base, embedding_actor=embedding_actor())
    document = add(base, "guide.md", files.MARKDOWN)
    ingest.ingest_document(document.pk)
    before = chunk_rows(document)
    ingest.requeue(Document.objects.filter(pk=document.pk))
    stub_server.enqueue_embeddings(error(500, "the model is not loaded"))

    assert not ingest.ingest_document(document.pk)

    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert "answered 500: the model is not loaded" in document.error
    assert chunk_rows(document) == before  # the old chunks still answer searches


def test_an_embedding_of_another_size_than_the_base_holds_is_an_error(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    KnowledgeBase.objects.filter(pk=base.pk).update(embedding_dimensions=768)
    document = add(base, "guide.md", files.MARKDOWN)

    ingest.ingest_document(document.pk)

    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert document.error == (
        "the embedding actor answered vectors of 256 dimensions; this knowledge base holds "
        "vectors of 768 (choose the embedding actor again to re-index)"
    )
    assert not document.chunks.exists()


def test_a_second_delivery_finds_nothing_to_do(base: KnowledgeBase) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    assert ingest.ingest_document(document.pk)
    ids = set(document.chunks.values_list("pk", flat=True))

    assert not ingest.ingest_document(document.pk)
    assert not ingest.ingest_document(10**9)  # deleted, or never there

    assert set(document.chunks.values_list("pk", flat=True)) == ids


def test_an_ingestion_that_stopped_moving_is_taken_over(base: KnowledgeBase) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    Document.objects.filter(pk=document.pk).update(status=Document.Status.INGESTING)
    assert not ingest.ingest_document(document.pk)  # someone is on it

    Document.objects.filter(pk=document.pk).update(
        updated_at=timezone.now() - ingest.STALE_AFTER - timedelta(seconds=1)
    )

    assert ingest.ingest_document(document.pk)
    document.refresh_from_db()
    assert document.status == Document.Status.READY


def test_lost_messages_and_stopped_ingestions_are_sent_again(
    base: KnowledgeBase, django_capture_on_commit_callbacks: Any
) -> None:
    lost = add(base, "guide.md", files.MARKDOWN)
    stopped = add(base, "notes.txt", b"Boats moor at the east quay.")
    fresh = add(base, "other.txt", b"Just uploaded.")
    long_ago = timezone.now() - ingest.STALE_AFTER - timedelta(seconds=1)
    Document.objects.filter(pk=lost.pk).update(updated_at=long_ago)
    Document.objects.filter(pk=stopped.pk).update(status="ingesting", updated_at=long_ago)

    with django_capture_on_commit_callbacks() as callbacks:
        assert ingest.requeue_stalled() == 2

    assert len(callbacks) == 2
    assert set(base.documents.values_list("status", flat=True)) == {"queued"}
    assert ingest.requeue_stalled() == 0  # not again straight away
    assert ingest.ingest_document(stopped.pk)
    assert ingest.ingest_document(fresh.pk)


def test_a_settings_change_during_ingestion_wins(
    base: KnowledgeBase, scripted_embedder: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)
    real_embed = ingest.embed

    def meanwhile(actor: Actor, texts: list[str]) -> list[list[float]]:
        monkeypatch.setattr(ingest, "embed", real_embed)
        ingest.update_settings(KnowledgeBase.objects.get(pk=base.pk), chunk_size=300)
        return real_embed(actor, texts)

    monkeypatch.setattr(ingest, "embed", meanwhile)

    assert not ingest.ingest_document(document.pk)  # its work is for settings now gone
    document.refresh_from_db()
    assert document.status == Document.Status.QUEUED
    assert not document.chunks.exists()

    assert ingest.ingest_document(document.pk)
    document.refresh_from_db()
    assert (document.status, document.indexed_revision) == ("ready", 3)


def test_a_document_deleted_during_ingestion_is_not_written(
    base: KnowledgeBase, scripted_embedder: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)
    real_embed = ingest.embed

    def meanwhile(actor: Actor, texts: list[str]) -> list[list[float]]:
        ingest.delete_document(Document.objects.get(pk=document.pk))
        return real_embed(actor, texts)

    monkeypatch.setattr(ingest, "embed", meanwhile)

    assert not ingest.ingest_document(document.pk)
    assert not Chunk.objects.exists()


def test_an_ingestion_taken_over_writes_nothing_when_it_wakes_up(
    base: KnowledgeBase, scripted_embedder: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)
    real_embed = ingest.embed

    def stalls_then_fails(actor: Actor, texts: list[str]) -> list[list[float]]:
        # It stalled: another ingestion takes the document over and finishes it...
        monkeypatch.setattr(ingest, "embed", real_embed)
        Document.objects.filter(pk=document.pk).update(
            updated_at=timezone.now() - ingest.STALE_AFTER - timedelta(seconds=1)
        )
        assert ingest.ingest_document(document.pk)
        # ...then this one wakes up, and fails.
        raise EmbeddingError("the server went away")

    monkeypatch.setattr(ingest, "embed", stalls_then_fails)

    assert not ingest.ingest_document(document.pk)
    document.refresh_from_db()
    assert (document.status, document.error) == ("ready", "")
    assert document.chunks.exists()


# Settings and re-indexing -----------------------------------------------------------------------


def test_settings_are_compared_with_the_row_not_an_old_copy(base: KnowledgeBase) -> None:
    old_copy = KnowledgeBase.objects.get(pk=base.pk)
    ingest.update_settings(base, chunk_size=300)  # revision 2

    ingest.update_settings(old_copy, chunk_size=200)  # a change back, from a copy that says 200

    assert (old_copy.chunk_size, old_copy.settings_revision) == (200, 3)


def test_a_change_of_the_embedding_actor_s_model_is_refused_until_reindexed(
    base: KnowledgeBase, scripted_embedder: Actor, django_capture_on_commit_callbacks: Any
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)
    assert ingest.ingest_document(document.pk)
    base.refresh_from_db()
    assert base.embedding_fingerprint == fingerprint(scripted_embedder)
    assert not ingest.reindex_if_stale(base)
    assert search(base, "storm", mode="semantic")

    Actor.objects.filter(pk=scripted_embedder.pk).update(model="another-model")
    base = KnowledgeBase.objects.get(pk=base.pk)
    with pytest.raises(SearchError, match=r"embeddings were made by another model.*re-index it"):
        search(base, "storm", mode="semantic")
    with django_capture_on_commit_callbacks() as callbacks:
        assert ingest.reindex_if_stale(base)

    assert (base.settings_revision, base.embedding_dimensions, base.embedding_fingerprint) == (
        3,
        None,
        "",
    )
    assert len(callbacks) == 1
    assert not ingest.reindex_if_stale(base)
    assert ingest.ingest_document(document.pk)
    base.refresh_from_db()
    assert base.embedding_fingerprint == fingerprint(Actor.objects.get(pk=scripted_embedder.pk))
    assert search(base, "storm", mode="semantic")


def test_saving_the_settings_reindexes_a_base_whose_embedding_model_changed(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    document = add(base, "guide.md", files.MARKDOWN)
    assert ingest.ingest_document(document.pk)
    Actor.objects.filter(pk=scripted_embedder.pk).update(base_url="http://127.0.0.1:9/v1")

    ingest.update_settings(base, name="Harbour notes")

    document.refresh_from_db()
    assert (base.settings_revision, base.embedding_fingerprint, document.status) == (
        3,
        "",
        "queued",
    )


def test_an_ingestion_refuses_vectors_of_another_model_than_the_base_holds(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    ingest.update_settings(base, embedding_actor=scripted_embedder)
    first = add(base, "guide.md", files.MARKDOWN)
    assert ingest.ingest_document(first.pk)
    Actor.objects.filter(pk=scripted_embedder.pk).update(model="another-model")
    second = add(base, "notes.txt", b"Boats moor at the east quay.")

    assert not ingest.ingest_document(second.pk)

    second.refresh_from_db()
    assert second.status == "failed"
    assert "another model" in second.error and "re-index" in second.error


def test_changing_how_chunks_are_made_reindexes_every_document(
    base: KnowledgeBase, django_capture_on_commit_callbacks: Any
) -> None:
    guide = add(base, "guide.md", files.MARKDOWN)
    long = add(base, "long.md", SECTIONS.encode())
    for document in (guide, long):
        ingest.ingest_document(document.pk)
    chunks_before = long.chunks.count()

    with django_capture_on_commit_callbacks() as callbacks:
        ingest.update_settings(base, chunk_size=1000, chunk_overlap=0)

    assert base.settings_revision == 2
    assert len(callbacks) == 2
    assert set(base.documents.values_list("status", flat=True)) == {"queued"}
    for document in (guide, long):
        assert ingest.ingest_document(document.pk)
    long.refresh_from_db()
    assert long.indexed_revision == 2
    assert long.chunks.count() < chunks_before
    assert max(len(t) for t in long.chunks.values_list("text", flat=True)) > 200


def test_renaming_a_base_reindexes_nothing(
    base: KnowledgeBase, django_capture_on_commit_callbacks: Any
) -> None:
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)

    with django_capture_on_commit_callbacks() as callbacks:
        ingest.update_settings(
            base, name="Harbour notes", description="All of them.", chunk_size=200
        )

    assert (base.name, base.settings_revision) == ("Harbour notes", 1)
    assert callbacks == []
    assert base.documents.get().status == Document.Status.READY


def test_a_new_embedding_actor_forgets_the_old_dimensions_and_embeds_again(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    ingest.ingest_document(document.pk)
    KnowledgeBase.objects.filter(pk=base.pk).update(embedding_dimensions=768)
    base.refresh_from_db()

    ingest.update_settings(base, embedding_actor=scripted_embedder)
    assert (base.embedding_dimensions, base.settings_revision) == (None, 2)
    ingest.ingest_document(document.pk)

    base.refresh_from_db()
    assert base.embedding_dimensions == 256
    assert not document.chunks.filter(embedding__isnull=True).exists()


def test_a_failed_document_is_tried_again_by_a_reindex(
    base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    Document.objects.filter(pk=document.pk).update(status="failed", error="the server was down")

    assert ingest.reindex(base) == 1
    ingest.ingest_document(document.pk)

    document.refresh_from_db()
    assert (document.status, document.error) == ("ready", "")


@pytest.mark.parametrize(
    ("changes", "errors"),
    [
        ({"chunk_size": 50}, ["chunk_size: a number of characters from 100 to 20000"]),
        ({"chunk_size": 400, "chunk_overlap": 201}, ["chunk_overlap: at most half"]),
        ({"chunk_overlap": -1}, ["chunk_overlap: a number of characters, 0 or more"]),
        ({"name": "  "}, ["name: may not be blank"]),
    ],
)
def test_settings_that_cannot_work_are_refused_with_every_reason(
    base: KnowledgeBase, changes: dict[str, Any], errors: list[str]
) -> None:
    with pytest.raises(ingest.SettingsInvalid) as refused:
        ingest.update_settings(base, **changes)

    assert [
        e[: len(expected)] for e, expected in zip(refused.value.errors, errors, strict=True)
    ] == errors
    base.refresh_from_db()
    assert (base.chunk_size, base.settings_revision) == (200, 1)


def test_a_human_actor_cannot_embed(base: KnowledgeBase, actors: Any) -> None:
    with pytest.raises(ingest.SettingsInvalid, match="'editors-desk' is not a model actor"):
        ingest.update_settings(base, embedding_actor=actors.editors)


def test_a_base_is_created_once_per_slug(user: Any, other_user: Any) -> None:
    base = ingest.create_base(owner=user, slug="tides", name=" Tides ")
    assert (base.name, base.chunk_size, base.chunk_overlap) == ("Tides", 1000, 150)

    with pytest.raises(ingest.BaseConflict, match="'tides' exists already"):
        ingest.create_base(owner=other_user, slug="tides", name="Mine")
    with pytest.raises(ingest.SettingsInvalid, match="slug: "):
        ingest.create_base(owner=user, slug="Not A Slug", name="x")


# Deleting ---------------------------------------------------------------------------------------


def test_deleting_a_document_deletes_its_chunks(base: KnowledgeBase) -> None:
    keep = add(base, "guide.md", files.MARKDOWN)
    drop = add(base, "long.md", SECTIONS.encode())
    for document in (keep, drop):
        ingest.ingest_document(document.pk)

    ingest.delete_document(drop)

    assert set(Chunk.objects.values_list("document", flat=True)) == {keep.pk}


def test_deleting_a_base_deletes_its_documents_and_chunks(base: KnowledgeBase) -> None:
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)

    ingest.delete_base(base)

    assert not Document.objects.exists()
    assert not Chunk.objects.exists()


# The Celery task --------------------------------------------------------------------------------


def test_the_workers_know_the_ingest_task_by_its_name() -> None:
    """Both `celery -A config worker` and the embedded worker load the app's tasks this way."""
    celery_app.loader.import_default_modules()

    assert ingest.INGEST_TASK in celery_app.tasks
    assert ingest.REQUEUE_TASK in celery_app.tasks
    assert ingest.REQUEUE_TASK in {e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()}
    assert current_app.tasks[ingest.INGEST_TASK].name == "knowledge.ingest_document"


@pytest.fixture
def worker(celery_worker: Any, transactional_db: None) -> Any:
    return celery_worker


@pytest.mark.parametrize(
    ("name", "data", "fmt", "expected"),
    [
        ("notes.txt", b"Boats moor at the east quay.", "text", "east quay"),
        ("guide.md", files.MARKDOWN, "markdown", "trim the wick"),
        ("rules.html", files.HTML, "html", "Small boats pay two coins."),
        ("tides.pdf", files.pdf("High tide at noon.", "Low tide at dusk."), "pdf", "Low tide"),
        ("ferry.docx", files.word(), "docx", "Monday | 2"),
    ],
)
def test_a_worker_ingests_each_format(
    worker: Any,
    user: Any,
    scripted_embedder: Actor,
    name: str,
    data: bytes,
    fmt: str,
    expected: str,
) -> None:
    base = KnowledgeBaseFactory(owner=user, embedding_actor=scripted_embedder)

    document = wait_until_done(add(base, name, data))

    assert (document.status, document.format, document.progress) == ("ready", fmt, 100)
    texts = list(document.chunks.values_list("text", flat=True))
    assert any(expected in text for text in texts)
    assert not document.chunks.filter(embedding__isnull=True).exists()


def test_a_worker_reindexes_after_a_settings_change(worker: Any, user: Any) -> None:
    base = KnowledgeBaseFactory(owner=user)
    document = wait_until_done(add(base, "long.md", SECTIONS.encode()))
    assert document.chunks_total > 6

    ingest.update_settings(base, chunk_size=5000, chunk_overlap=0)

    document = wait_until_done(document, revision=2)
    assert (document.status, document.chunks_total) == ("ready", 6)
