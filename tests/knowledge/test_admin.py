"""The admin: bases saved through the services, documents and chunks read-only."""

from __future__ import annotations

from typing import Any

from django.test import Client

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase
from tests.knowledge import files
from tests.knowledge.conftest import add


def form(base: KnowledgeBase, **changes: Any) -> dict[str, Any]:
    data = {
        "slug": base.slug,
        "name": base.name,
        "description": base.description,
        "owner": base.owner_id,
        "shared_with_users": [],
        "shared_with_groups": [],
        "chunk_size": base.chunk_size,
        "chunk_overlap": base.chunk_overlap,
        "embedding_actor": base.embedding_actor_id or "",
    }
    return {**data, **changes}


def test_the_admin_lists_and_shows_bases_and_documents(
    admin_client: Client, base: KnowledgeBase
) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    ingest.ingest_document(document.pk)

    for url in (
        "/admin/knowledge/",
        "/admin/knowledge/knowledgebase/",
        f"/admin/knowledge/knowledgebase/{base.pk}/change/",
        "/admin/knowledge/document/",
        f"/admin/knowledge/document/{document.pk}/change/",
    ):
        assert admin_client.get(url).status_code == 200, url
    page = admin_client.get(f"/admin/knowledge/document/{document.pk}/change/").content.decode()
    assert "During a storm the lamp burns all night" in page  # the chunks, read-only
    assert admin_client.get("/admin/knowledge/document/add/").status_code == 403


def test_a_chunk_setting_changed_in_the_admin_reindexes(
    admin_client: Client, base: KnowledgeBase
) -> None:
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)

    response = admin_client.post(
        f"/admin/knowledge/knowledgebase/{base.pk}/change/", form(base, chunk_size=600)
    )

    assert response.status_code == 302
    base.refresh_from_db()
    assert (base.chunk_size, base.settings_revision) == (600, 2)
    assert base.documents.get().status == Document.Status.QUEUED


def test_the_admin_refuses_settings_that_cannot_work(
    admin_client: Client, base: KnowledgeBase
) -> None:
    response = admin_client.post(
        f"/admin/knowledge/knowledgebase/{base.pk}/change/", form(base, chunk_overlap=150)
    )

    assert response.status_code == 200
    assert "at most half the chunk size" in response.content.decode()
    base.refresh_from_db()
    assert (base.chunk_overlap, base.settings_revision) == (20, 1)


def test_the_admin_queues_documents_again(admin_client: Client, base: KnowledgeBase) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    ingest.ingest_document(document.pk)

    admin_client.post(
        "/admin/knowledge/document/",
        {"action": "ingest_again", "_selected_action": [document.pk]},
    )

    document.refresh_from_db()
    assert document.status == Document.Status.QUEUED
