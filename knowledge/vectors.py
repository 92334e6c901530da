"""Chunk embeddings: their storage as bytes, and the nearest chunks to a query vector.

An embedding is stored on `Chunk.embedding` as float32 little-endian bytes (`to_bytes`), so
every database holds it the same way. Nearest chunks (`nearest`) come from:

- pgvector, when the `vector` extension is installed in the PostgreSQL database (looked up
  once per connection alias): an HNSW index (`vector_cosine_ops`) per knowledge base, over a
  column `embedding_vector` that this module adds and fills from the bytes (see
  `_pgvector_nearest`);
- otherwise exact cosine similarity with numpy over the base's embeddings, read in batches
  and kept in memory until they change (`_matrix`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connections, transaction

from .models import Chunk, KnowledgeBase

DTYPE = np.dtype("<f4")
# Rows read per query on the exact path: bounds memory on large bases.
READ_BATCH = 2000
# Embeddings a process keeps in memory between searches, over all bases (see `_matrix`).
CACHE_BYTES = 256 * 1024 * 1024
# HNSW indexes in pgvector take at most this many dimensions.
PGVECTOR_MAX_DIMENSIONS = 2000

_detected: dict[str, bool] = {}
_detect_lock = threading.Lock()


def to_bytes(vector: Sequence[float] | np.ndarray) -> bytes:
    """Return the vector as the bytes stored on `Chunk.embedding`."""
    return np.asarray(vector, dtype=DTYPE).tobytes()


def from_bytes(data: bytes | memoryview) -> np.ndarray:
    """Return the vector stored as `data` (see `to_bytes`)."""
    return np.frombuffer(bytes(data), dtype=DTYPE)


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """Return the vector scaled to length 1 (a zero vector stays zero)."""
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


def nearest(
    base: KnowledgeBase, query: Sequence[float], *, limit: int, using: str = "default"
) -> list[tuple[int, float]]:
    """Return up to `limit` (chunk id, cosine similarity) of the base's chunks, nearest first.

    Chunks without an embedding are left out. `query` must have the base's dimensions.
    """
    if limit <= 0:
        return []
    if pgvector_installed(using) and len(query) <= PGVECTOR_MAX_DIMENSIONS:
        return _pgvector_nearest(base, query, limit=limit, using=using)
    return _exact_nearest(base, query, limit=limit, using=using)


def pgvector_installed(using: str = "default") -> bool:
    """Say whether the database has the `vector` extension installed (looked up once)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    key = f"{using}:{connection.settings_dict['NAME']}"
    with _detect_lock:
        if key not in _detected:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                _detected[key] = cursor.fetchone() is not None
        return _detected[key]


def forget() -> None:
    """Forget what this process learnt of the databases (the extension, the embeddings kept).

    For tests, after CREATE EXTENSION.
    """
    with _detect_lock:
        _detected.clear()
    with _matrices_lock:
        _matrices.clear()


# -- exact, numpy ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Version:
    """What a base's embeddings looked like when read (see `_matrix`)."""

    settings_revision: int
    dimensions: int
    chunks: int
    embedded: int
    last_id: int | None


@dataclass(frozen=True)
class _Matrix:
    """A base's embeddings as unit rows, with their chunk ids, and what they were read at."""

    version: _Version
    ids: np.ndarray
    rows: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.rows.nbytes)


_matrices: OrderedDict[tuple[str, str, int], _Matrix] = OrderedDict()
_matrices_lock = threading.Lock()


def _exact_nearest(
    base: KnowledgeBase, query: Sequence[float], *, limit: int, using: str
) -> list[tuple[int, float]]:
    target = unit(query)
    matrix = _matrix(base, len(target), using=using)
    if matrix is not None:
        ids, scores = _best(matrix.ids, _dot(matrix.rows, target), limit)
    else:
        # Not kept: stream it, carrying the best `limit` from batch to batch.
        ids, scores = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        for batch_ids, rows in _unit_rows(base, len(target), using=using):
            ids, scores = _best(
                np.concatenate([ids, batch_ids]),
                np.concatenate([scores, _dot(rows, target)]),
                limit,
            )
    order = np.lexsort((ids, -scores))  # best first, ties by id
    return [(int(ids[i]), float(scores[i])) for i in order]


def _dot(rows: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Return each row's dot product with `target`.

    Not `rows @ target`: that goes to the BLAS library's threads, which on a busy machine
    take milliseconds to wake for a product that needs a fraction of one on a single core.
    """
    scores: np.ndarray = np.einsum("ij,j->i", rows, target)
    return scores


def _best(ids: np.ndarray, scores: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the `limit` highest scores and their ids, in no particular order."""
    if len(ids) <= limit:
        return ids, scores
    keep = np.argpartition(-scores, limit - 1)[:limit]
    return ids[keep], scores[keep]


def _matrix(base: KnowledgeBase, dimensions: int, *, using: str) -> _Matrix | None:
    """Return the base's embeddings, read again only when they changed; None to stream them.

    Reading every embedding costs tens of milliseconds per 10,000 chunks (the bytes are
    most of a chunk's row), so a process keeps what it read, up to CACHE_BYTES in all, and
    checks a version first: the base's settings, and the count, the embedded count and the
    highest id of its chunks. That catches what ingestion does (chunks are added, replaced
    by new rows, deleted, or embedded once after being written); an embedding rewritten in
    place would not be seen, so nothing rewrites one: re-embedding makes new chunks.

    Inside a transaction nothing is kept or reused: what it sees may never be committed.
    """
    connection = connections[using]
    if connection.in_atomic_block:
        return None
    key = (using, str(connection.settings_dict["NAME"]), int(base.pk))
    version = _version(base, dimensions, using=using)
    with _matrices_lock:
        cached = _matrices.get(key)
        if cached is not None and cached.version == version:
            _matrices.move_to_end(key)
            return cached
    if version.embedded * dimensions * DTYPE.itemsize > CACHE_BYTES:
        return None  # too large to keep
    parts = list(_unit_rows(base, dimensions, using=using))
    matrix = _Matrix(
        version,
        np.concatenate([ids for ids, _ in parts]) if parts else np.empty(0, dtype=np.int64),
        np.concatenate([rows for _, rows in parts]) if parts else np.empty((0, dimensions)),
    )
    with _matrices_lock:
        _matrices[key] = matrix
        _matrices.move_to_end(key)
        while sum(m.nbytes for m in _matrices.values()) > CACHE_BYTES and len(_matrices) > 1:
            _matrices.popitem(last=False)
    return matrix


def _version(base: KnowledgeBase, dimensions: int, *, using: str) -> _Version:
    # Both counts come from indexes (the second from `knowledge_chunk_embedded`, partial):
    # a millisecond, where reading the rows to count the embedded ones would take ten.
    table = "SELECT count(*), max(id) FROM knowledge_chunk WHERE knowledge_base_id = %s"
    with connections[using].cursor() as cursor:
        cursor.execute(table, [base.pk])
        chunks, last_id = cursor.fetchone()
        cursor.execute(f"{table} AND embedding IS NOT NULL", [base.pk])
        embedded, _ = cursor.fetchone()
    return _Version(base.settings_revision, dimensions, chunks, embedded, last_id)


def _unit_rows(
    base: KnowledgeBase, dimensions: int, *, using: str
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (chunk ids, their embeddings scaled to length 1), READ_BATCH rows at a time.

    The ids come first from the index, then each batch by its ids: a query per batch that
    skips the rows before it would read (and sort) them all again on SQLite.
    """
    chunks = Chunk.objects.using(using).filter(knowledge_base=base)
    all_ids = list(chunks.order_by("pk").values_list("pk", flat=True))
    size = dimensions * DTYPE.itemsize
    for start in range(0, len(all_ids), READ_BATCH):
        window = all_ids[start : start + READ_BATCH]
        batch = chunks.filter(pk__in=window, embedding__isnull=False).values_list("pk", "embedding")
        # Chunks of another size (written before a settings change) are left out.
        kept = [(pk, bytes(data)) for pk, data in batch if len(data) == size]
        if not kept:
            continue
        rows = np.frombuffer(b"".join(data for _, data in kept), dtype=DTYPE)
        rows = rows.reshape(len(kept), dimensions).astype(np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        norms[norms == 0] = 1.0  # a zero vector scores 0, not NaN
        yield np.array([pk for pk, _ in kept], dtype=np.int64), rows / norms


# -- pgvector -------------------------------------------------------------------------------
#
# Written for databases with the extension; the machines this project is tested on do not
# have it, so this path runs only in tests/knowledge/test_search.py's pgvector test, which is
# skipped there. The bytes stay the stored form; `embedding_vector` is a copy pgvector can
# index, filled before a search, and cleared by a trigger when the bytes change.

_PGVECTOR_SETUP = (
    "ALTER TABLE knowledge_chunk ADD COLUMN IF NOT EXISTS embedding_vector vector",
    """
    CREATE OR REPLACE FUNCTION knowledge_chunk_vector_stale() RETURNS trigger AS $$
    BEGIN
        IF NEW.embedding IS DISTINCT FROM OLD.embedding THEN
            NEW.embedding_vector := NULL;
        END IF;
        RETURN NEW;
    END $$ LANGUAGE plpgsql
    """,
    "DROP TRIGGER IF EXISTS knowledge_chunk_vector_stale ON knowledge_chunk",
    """
    CREATE TRIGGER knowledge_chunk_vector_stale BEFORE UPDATE OF embedding ON knowledge_chunk
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_vector_stale()
    """,
    # The chunks still to copy, found without reading the others. Made last: its presence
    # says the statements above were run (and committed).
    "CREATE INDEX IF NOT EXISTS knowledge_chunk_vector_missing ON knowledge_chunk "
    "(knowledge_base_id) WHERE embedding IS NOT NULL AND embedding_vector IS NULL",
)
# An advisory lock id of our own: processes that find something to create do it one at a time.
_PGVECTOR_LOCK = 0x6B62_7665


def _vector_literal(vector: Sequence[float] | np.ndarray) -> str:
    return "[" + ",".join(f"{float(x):.8g}" for x in vector) + "]"


def _pgvector_nearest(
    base: KnowledgeBase, query: Sequence[float], *, limit: int, using: str
) -> list[tuple[int, float]]:
    connection = connections[using]
    # Only integers are formatted into the SQL below; the vector goes as a parameter.
    base_id, dimensions = int(base.pk), len(query)
    cast, index = f"vector({dimensions})", f"knowledge_chunk_hnsw_{base_id}_{dimensions}"
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('knowledge_chunk_vector_missing') IS NOT NULL, "
            "to_regclass(%s) IS NOT NULL",
            [index],
        )
        prepared, indexed = cursor.fetchone()
        if not (prepared and indexed):
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PGVECTOR_LOCK])
        if not prepared:
            for statement in _PGVECTOR_SETUP:
                cursor.execute(statement)
        _fill_vectors(cursor, base_id, dimensions)
        if not indexed:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {index} ON knowledge_chunk "
                f"USING hnsw ((embedding_vector::{cast}) vector_cosine_ops) "
                f"WHERE knowledge_base_id = {base_id}"
            )
        # An HNSW scan returns at most ef_search rows: ask for enough.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 2 * limit))}")
        literal = _vector_literal(query)
        cursor.execute(
            f"SELECT id, 1 - (embedding_vector::{cast} <=> %s::{cast}) FROM knowledge_chunk "
            f"WHERE knowledge_base_id = {base_id} AND embedding_vector IS NOT NULL "
            f"ORDER BY embedding_vector::{cast} <=> %s::{cast} LIMIT %s",
            [literal, literal, limit],
        )
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]


def _fill_vectors(cursor: Any, base_id: int, dimensions: int) -> None:
    """Copy the base's embeddings that have no `embedding_vector` yet into that column."""
    while True:
        cursor.execute(
            "SELECT id, embedding FROM knowledge_chunk WHERE knowledge_base_id = %s "
            "AND embedding IS NOT NULL AND embedding_vector IS NULL "
            "AND octet_length(embedding) = %s ORDER BY id LIMIT %s",
            [base_id, dimensions * DTYPE.itemsize, READ_BATCH],
        )
        rows = cursor.fetchall()
        if not rows:
            return
        cursor.executemany(
            "UPDATE knowledge_chunk SET embedding_vector = %s::vector WHERE id = %s",
            [(_vector_literal(from_bytes(data)), pk) for pk, data in rows],
        )
