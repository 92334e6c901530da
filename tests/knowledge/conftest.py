"""Knowledge base fixtures: a base owned by `user` (alice), documents, scripted embeddings."""

from __future__ import annotations

import time
from typing import Any

import factory
import pytest

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase
from tests.factories import ActorFactory, UserFactory
from tests.knowledge.embedding_stub import embedding_actor, stub_server  # noqa: F401 (fixtures)
from workflows.models import Actor

DONE = (Document.Status.READY, Document.Status.FAILED)


class KnowledgeBaseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = KnowledgeBase

    slug = factory.Sequence(lambda n: f"base-{n}")
    name = factory.LazyAttribute(lambda b: b.slug.replace("-", " ").title())
    owner = factory.SubFactory(UserFactory)
    chunk_size = 200
    chunk_overlap = 20


@pytest.fixture
def base(user: Any) -> KnowledgeBase:
    """Return alice's knowledge base `harbour` (200-character chunks, no embeddings)."""
    return KnowledgeBaseFactory(slug="harbour", name="Harbour", owner=user)


@pytest.fixture
def scripted_embedder(db: None) -> Actor:
    """Return an actor that embeds locally (256 dimensions, no server)."""
    return ActorFactory(name="local-embedder", config={})


def add(base: KnowledgeBase, name: str, data: bytes, user: Any = None) -> Document:
    """Add a document to the base and return it (it must be new)."""
    document, created = ingest.add_document(base, user or base.owner, name, data)
    assert created
    return document


def wait_until_done(document: Document, *, revision: int = 0, timeout: float = 20) -> Document:
    """Wait for a worker to finish ingesting the document (under settings `revision` or a
    later one, if given); return it read again."""
    deadline = time.monotonic() + timeout
    while True:
        document.refresh_from_db()
        if document.status in DONE and document.indexed_revision >= revision:
            return document
        assert time.monotonic() < deadline, f"document still {document.status} after {timeout} s"
        time.sleep(0.05)
