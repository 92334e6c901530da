"""The knowledge bases API: bases by slug, document uploads with their progress, search; a
base that is not the caller's does not exist for them (404)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase
from tests.conftest import api_client
from tests.factories import UserFactory
from tests.knowledge import files
from tests.knowledge.conftest import KnowledgeBaseFactory, add
from workflows.models import Actor

BASES = "/api/knowledge-bases/"


def upload(client: APIClient, slug: str, name: str, data: bytes, content_type: str = "") -> Any:
    file = SimpleUploadedFile(name, data, content_type=content_type or "application/octet-stream")
    return client.post(f"{BASES}{slug}/documents/", {"file": file}, format="multipart")


@pytest.fixture
def ready_base(base: KnowledgeBase) -> KnowledgeBase:
    """Return alice's base with the lighthouse guide ingested."""
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)
    return base


# Bases ------------------------------------------------------------------------------------------


def test_it_creates_a_base_owned_by_the_caller(api: APIClient, scripted_embedder: Actor) -> None:
    response = api.post(
        BASES,
        {
            "slug": "tides",
            "name": "Tide tables",
            "chunk_size": 500,
            "chunk_overlap": 50,
            "embedding_actor": "local-embedder",
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["slug"] == "tides"
    assert body["owner"] == "alice"
    assert (body["chunk_size"], body["chunk_overlap"]) == (500, 50)
    assert body["embedding_actor"] == "local-embedder"
    assert (body["document_count"], body["chunk_count"], body["settings_revision"]) == (0, 0, 1)
    assert KnowledgeBase.objects.get(slug="tides").owner.username == "alice"


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"slug": "Bad Slug", "name": "x"}, "slug: "),
        ({"slug": "ok", "name": ""}, "name: "),
        ({"slug": "ok", "name": "x", "chunk_size": 10}, "chunk_size: "),
        ({"slug": "ok", "name": "x", "chunk_size": 400, "chunk_overlap": 300}, "chunk_overlap: "),
        ({"slug": "ok", "name": "x", "embedding_actor": "nobody"}, "embedding_actor: "),
        ({"slug": "ok", "name": 5}, "name: Not a valid string."),
    ],
)
def test_it_refuses_a_base_it_cannot_make_with_the_reason(
    api: APIClient, payload: dict[str, Any], error: str
) -> None:
    response = api.post(BASES, payload, format="json")

    assert response.status_code == 400
    assert any(e.startswith(error) for e in response.json()["errors"]), response.json()
    assert not KnowledgeBase.objects.exists()


def test_a_slug_in_use_is_a_conflict(api: APIClient, base: KnowledgeBase) -> None:
    response = api.post(BASES, {"slug": "harbour", "name": "Another"}, format="json")

    assert response.status_code == 409
    assert response.json() == {"errors": ["slug: a knowledge base 'harbour' exists already"]}


def test_it_lists_the_callers_bases_with_their_counts(
    api: APIClient, ready_base: KnowledgeBase, other_user: Any
) -> None:
    KnowledgeBaseFactory(slug="not-mine", owner=other_user)

    response = api.get(BASES)

    assert response.status_code == 200
    assert [(b["slug"], b["document_count"], b["chunk_count"]) for b in response.json()] == [
        ("harbour", 1, 2)
    ]


def test_a_base_shared_with_a_group_is_listed_and_readable(
    base: KnowledgeBase, other_user: Any, other_api: APIClient
) -> None:
    crew = Group.objects.create(name="crew")
    other_user.groups.add(crew)
    base.shared_with_groups.add(crew)

    assert [b["slug"] for b in other_api.get(BASES).json()] == ["harbour"]
    assert other_api.get(f"{BASES}harbour/").status_code == 200


def test_patching_the_chunk_settings_reindexes_and_says_so(
    api: APIClient, ready_base: KnowledgeBase
) -> None:
    response = api.patch(
        f"{BASES}harbour/", {"chunk_size": 800, "description": "Notes"}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["chunk_size"], body["description"], body["settings_revision"]) == (
        800,
        "Notes",
        2,
    )
    assert ready_base.documents.get().status == Document.Status.QUEUED


def test_patching_the_embedding_actor_sets_and_clears_it(
    api: APIClient, base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    url = f"{BASES}harbour/"

    chosen = api.patch(url, {"embedding_actor": "local-embedder"}, format="json").json()
    cleared = api.patch(url, {"embedding_actor": None}, format="json").json()
    blank = api.patch(url, {"embedding_actor": ""}, format="json")

    assert (chosen["embedding_actor"], chosen["settings_revision"]) == ("local-embedder", 2)
    assert (cleared["embedding_actor"], cleared["settings_revision"]) == (None, 3)
    assert blank.status_code == 400
    assert blank.json()["errors"] == ["embedding_actor: may not be blank (send null for none)"]


def test_patching_shares_the_base(api: APIClient, base: KnowledgeBase, other_user: Any) -> None:
    response = api.patch(f"{BASES}harbour/", {"shared_with_users": ["mallory"]}, format="json")

    assert response.status_code == 200
    assert response.json()["shared_with_users"] == ["mallory"]
    assert response.json()["settings_revision"] == 1


def test_patching_refuses_settings_that_cannot_work(api: APIClient, base: KnowledgeBase) -> None:
    response = api.patch(f"{BASES}harbour/", {"chunk_overlap": 150}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        "chunk_overlap: at most half the chunk size (100 characters)"
    ]


def test_the_owner_deletes_a_base_and_a_user_it_is_shared_with_may_not(
    api: APIClient, base: KnowledgeBase, other_user: Any, other_api: APIClient
) -> None:
    base.shared_with_users.add(other_user)

    assert other_api.delete(f"{BASES}harbour/").status_code == 403
    assert api.delete(f"{BASES}harbour/").status_code == 204
    assert not KnowledgeBase.objects.exists()


# Documents --------------------------------------------------------------------------------------


def test_an_upload_is_queued_then_ingested_with_its_progress(
    api: APIClient, base: KnowledgeBase
) -> None:
    response = upload(api, "harbour", "guide.md", files.MARKDOWN)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created"] is True
    assert (body["title"], body["format"], body["status"], body["progress"]) == (
        "Lighthouse Guide",
        "markdown",
        "queued",
        0,
    )
    assert body["uploaded_by"] == "alice"

    ingest.ingest_document(body["id"])
    detail = api.get(f"{BASES}harbour/documents/{body['id']}/").json()
    assert (detail["status"], detail["progress"], detail["chunks_total"]) == ("ready", 100, 2)


def test_the_same_file_again_answers_200_with_the_document_already_there(
    api: APIClient, base: KnowledgeBase
) -> None:
    first = upload(api, "harbour", "guide.md", files.MARKDOWN).json()

    again = upload(api, "harbour", "copy.md", files.MARKDOWN)

    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert again.json()["created"] is False
    assert base.documents.count() == 1


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("broken.pdf", b"%PDF-1.4 and nothing else", "file: the PDF cannot be read"),
        ("bomb.docx", files.inflating_docx(), "file: the DOCX part word/document.xml inflates"),
        ("blank.txt", b"   ", "file: the file holds no text"),
        ("pic.png", bytes(range(256)) * 4, "file: unknown format"),
    ],
)
def test_a_file_that_cannot_be_read_is_a_400_saying_why(
    api: APIClient, base: KnowledgeBase, name: str, data: bytes, error: str
) -> None:
    response = upload(api, "harbour", name, data)

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith(error), response.json()
    assert not Document.objects.exists()


def test_a_file_over_the_limit_is_a_413(api: APIClient, base: KnowledgeBase, settings: Any) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1024

    response = upload(api, "harbour", "big.txt", b"tide " * 500)

    assert response.status_code == 413
    assert response.json() == {
        "errors": ["file: the file is 2,500 bytes; the limit is 1,024 bytes"]
    }
    assert not Document.objects.exists()


def test_a_document_may_be_sent_as_json_with_its_content_in_base64(
    api: APIClient, base: KnowledgeBase
) -> None:
    body = {"filename": "ferry.docx", "content_base64": base64.b64encode(files.word()).decode()}

    first = api.post(f"{BASES}harbour/documents/", body, format="json")
    again = api.post(f"{BASES}harbour/documents/", body, format="json")

    assert first.status_code == 201, first.json()
    assert (first.json()["format"], first.json()["title"]) == ("docx", "Ferry Timetable")
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"filename": "a.txt", "content_base64": "not base64!"}, "content_base64: not valid"),
        ({"content_base64": "aGk="}, "filename: "),
        ({"filename": "a.txt"}, "content_base64: "),
        (
            {"filename": "a.txt", "content_base64": "AAEC/w=="},
            "file: the text's encoding cannot be recognised",
        ),
    ],
)
def test_a_json_document_that_cannot_be_read_is_a_400(
    api: APIClient, base: KnowledgeBase, body: dict[str, str], error: str
) -> None:
    response = api.post(f"{BASES}harbour/documents/", body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith(error), response.json()
    assert not Document.objects.exists()


def test_an_upload_without_a_file_is_a_400(api: APIClient, base: KnowledgeBase) -> None:
    response = api.post(f"{BASES}harbour/documents/", {"other": "x"}, format="multipart")

    assert response.status_code == 400
    assert response.json()["errors"] == ["file: upload the document as multipart field 'file'"]


def test_it_lists_documents_newest_first_and_deletes_one(
    api: APIClient, ready_base: KnowledgeBase
) -> None:
    newer = add(ready_base, "notes.txt", b"Boats moor at the east quay.")

    listed = api.get(f"{BASES}harbour/documents/").json()

    assert [d["id"] for d in listed] == [newer.pk, newer.pk - 1]
    assert "text" not in listed[0]
    assert api.delete(f"{BASES}harbour/documents/{newer.pk}/").status_code == 204
    assert [d["id"] for d in api.get(f"{BASES}harbour/documents/").json()] == [newer.pk - 1]


def test_a_failed_document_shows_its_error(api: APIClient, base: KnowledgeBase) -> None:
    document = add(base, "guide.md", files.MARKDOWN)
    Document.objects.filter(pk=document.pk).update(status="failed", error="server down")

    body = api.get(f"{BASES}harbour/documents/{document.pk}/").json()

    assert (body["status"], body["error"], body["progress"]) == ("failed", "server down", 0)


@pytest.mark.parametrize("document_id", ["999999", "99999999999999999999", "x"])
def test_a_document_that_is_not_there_is_a_404(
    api: APIClient, base: KnowledgeBase, document_id: str
) -> None:
    assert api.get(f"{BASES}harbour/documents/{document_id}/").status_code == 404


# Search -----------------------------------------------------------------------------------------


def test_it_searches_a_base(api: APIClient, ready_base: KnowledgeBase) -> None:
    ingest.ingest_document(add(ready_base, "notes.txt", b"Boats moor at the east quay.").pk)

    response = api.get(f"{BASES}harbour/search/", {"q": "storm lamp", "mode": "fulltext"})

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["query"], body["mode"]) == ("storm lamp", "fulltext")
    top = body["hits"][0]
    assert top["heading"] == "Storms"
    assert top["document_title"] == "Lighthouse Guide"
    assert top["knowledge_base"] == "harbour"
    assert 0 < top["score"] <= 1


def test_a_search_that_cannot_run_is_a_400_with_the_reason(
    api: APIClient, ready_base: KnowledgeBase
) -> None:
    response = api.get(f"{BASES}harbour/search/", {"q": "storm", "mode": "semantic"})

    assert response.status_code == 400
    assert "embedding actor" in response.json()["errors"][0]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({}, "q: "),
        ({"q": "  "}, "q: "),
        ({"q": "x", "mode": "fuzzy"}, "mode: "),
        ({"q": "x", "top_k": "0"}, "top_k: "),
        ({"q": "x", "top_k": "51"}, "top_k: "),
        ({"q": "x", "min_score": "2"}, "min_score: "),
    ],
)
def test_bad_search_parameters_are_a_400(
    api: APIClient, base: KnowledgeBase, params: dict[str, str], error: str
) -> None:
    response = api.get(f"{BASES}harbour/search/", params)

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith(error)


# Who may see what -------------------------------------------------------------------------------


REQUESTS = [
    ("get", "", None),
    ("patch", "", {"name": "Mine now"}),
    ("delete", "", None),
    ("get", "documents/", None),
    ("get", "documents/{doc}/", None),
    ("delete", "documents/{doc}/", None),
    ("get", "search/?q=storm", None),
]


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS)
def test_another_users_base_does_not_exist_for_the_caller(
    ready_base: KnowledgeBase, other_api: APIClient, method: str, path: str, body: Any
) -> None:
    document = ready_base.documents.get()

    response = getattr(other_api, method)(
        f"{BASES}harbour/{path.format(doc=document.pk)}", body, format="json"
    )

    assert response.status_code == 404
    assert KnowledgeBase.objects.get().name == "Harbour"
    assert Document.objects.filter(pk=document.pk).exists()


def test_another_user_cannot_upload_to_a_base_that_is_not_theirs(
    base: KnowledgeBase, other_api: APIClient
) -> None:
    assert upload(other_api, "harbour", "guide.md", files.MARKDOWN).status_code == 404
    assert not Document.objects.exists()


def test_a_document_of_another_base_is_not_found_through_mine(
    api: APIClient, base: KnowledgeBase, other_user: Any
) -> None:
    theirs = KnowledgeBaseFactory(slug="theirs", owner=other_user)
    document = add(theirs, "guide.md", files.MARKDOWN)

    assert api.get(f"{BASES}harbour/documents/{document.pk}/").status_code == 404
    assert api.delete(f"{BASES}harbour/documents/{document.pk}/").status_code == 404


def test_staff_see_every_base(staff_api: APIClient, base: KnowledgeBase) -> None:
    assert [b["slug"] for b in staff_api.get(BASES).json()] == ["harbour"]
    assert staff_api.get(f"{BASES}harbour/documents/").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", ""), ("post", ""), ("get", "harbour/"), ("get", "harbour/search/?q=x")],
)
def test_the_api_needs_a_signed_in_user(
    anon_api: APIClient, base: KnowledgeBase, method: str, path: str
) -> None:
    response = getattr(anon_api, method)(f"{BASES}{path}")

    assert response.status_code == 403


def test_a_user_it_is_shared_with_may_upload_and_search(
    ready_base: KnowledgeBase, db: None
) -> None:
    crew = UserFactory(username="carol")
    ready_base.shared_with_users.add(crew)
    client = api_client(crew)

    assert (
        upload(client, "harbour", "notes.txt", b"Boats moor at the east quay.").status_code == 201
    )
    assert client.get(f"{BASES}harbour/search/", {"q": "storm"}).status_code == 200


def test_an_embedding_actor_in_use_cannot_be_deleted_and_the_refusal_says_by_what(
    staff_api: APIClient, base: KnowledgeBase, scripted_embedder: Actor
) -> None:
    base.embedding_actor = scripted_embedder
    base.save()

    response = staff_api.delete(f"/api/actors/{scripted_embedder.pk}/")

    assert response.status_code == 409
    assert response.json()["errors"] == [
        "$: it is still used (by 1 knowledge base) and cannot be deleted"
    ]
    assert Actor.objects.filter(pk=scripted_embedder.pk).exists()
