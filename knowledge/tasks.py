"""Celery tasks: thin, they take ids, and being delivered twice does no harm."""

from __future__ import annotations

from celery import shared_task

from . import ingest


@shared_task(name=ingest.INGEST_TASK, acks_late=True, reject_on_worker_lost=True)
def ingest_document(document_id: int) -> bool:
    """Chunk and embed the document (a duplicate delivery finds it claimed or done)."""
    return ingest.ingest_document(document_id)


@shared_task(name=ingest.REQUEUE_TASK)
def requeue_stalled() -> int:
    """Send again the messages of documents whose ingestion was lost or stopped."""
    return ingest.requeue_stalled()
