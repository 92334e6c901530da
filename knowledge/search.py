"""Search a knowledge base: by its words, by meaning, or both, best first.

- `fulltext`: the database's own index (`fulltext.py`), score rank/(rank+1);
- `semantic`: the query embedded by the base's embedding actor, then the chunks nearest by
  cosine similarity (`vectors.py`), score the similarity clipped to [0, 1];
- `hybrid`: both rankings fused by reciprocal rank fusion (k=60), scaled so that a chunk first
  in every ranking that found something scores 1.0. A base without an embedding actor, or
  with no chunk embedded yet, searches by words only.

By meaning, chunks less similar to the query than SEMANTIC_FLOOR are no candidates at all:
nearest neighbours always exist, however unrelated, and would otherwise always be returned.

`min_score` filters on the score of the mode asked for (a hybrid search that fell back to
words filters on their score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from workflows.engine.sources import MAX_TOP_K, MODES

from .embeddings import EmbeddingError, embed, fingerprint
from .fulltext import fulltext_ranking, parse_query
from .models import Chunk, KnowledgeBase
from .vectors import nearest

__all__ = ["MAX_TOP_K", "MODES", "SEMANTIC_FLOOR", "Hit", "SearchError", "fuse", "search"]

RRF_K = 60
# The lowest cosine similarity a chunk found by meaning may have (see the module's docstring).
SEMANTIC_FLOOR = 0.2
# Each ranking fused in hybrid mode reads this many more candidates than it returns.
CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 50
# A query longer than this (a whole prompt) is cut before it is embedded.
MAX_EMBEDDED_QUERY_CHARS = 8000


class SearchError(Exception):
    """Say why a search cannot run: a bad argument, or an embedding that failed."""


@dataclass(frozen=True)
class Hit:
    """One chunk a search found, with what a citation shows."""

    chunk_id: int
    document_id: int
    document_title: str
    knowledge_base: str
    heading: str
    text: str
    score: float

    def as_json(self) -> dict[str, Any]:
        """Return the hit as JSON-ready data (stored on step runs, sent by the API)."""
        data = asdict(self)
        data["score"] = round(self.score, 4)
        return data


def search(
    base: KnowledgeBase,
    query: str,
    *,
    mode: str = "hybrid",
    top_k: int = 5,
    min_score: float = 0.0,
) -> list[Hit]:
    """Return up to `top_k` hits of `base` for `query` scoring at least `min_score`, best first.

    Raise SearchError for an empty query, an unknown mode, a `top_k` or `min_score` out of
    range, semantic mode on a base without an embedding actor, or an embedding that fails
    (server down, an answer of the wrong dimension).
    """
    if not isinstance(query, str) or not query.strip():
        raise SearchError("the query is empty")
    if mode not in MODES:
        raise SearchError(f"unknown search mode {mode!r}; expected one of {', '.join(MODES)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise SearchError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, not {top_k!r}")
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, int | float)
        or not 0 <= min_score <= 1
    ):
        raise SearchError(f"min_score must be a number from 0 to 1, not {min_score!r}")
    if mode == "semantic" and base.embedding_actor_id is None:
        raise SearchError(
            f"knowledge base {base.slug!r} has no embedding actor, so it cannot be searched "
            "by meaning; use mode fulltext, or give it an embedding actor"
        )
    if mode == "hybrid" and base.embedding_actor_id is None:
        mode = "fulltext"

    depth = top_k if mode != "hybrid" else max(MIN_CANDIDATES, top_k * CANDIDATE_FACTOR)
    words: list[tuple[int, float]] = []
    semantic: list[tuple[int, float]] = []
    if mode in ("fulltext", "hybrid"):
        words = fulltext_ranking(base.pk, parse_query(query), limit=depth)
    if mode in ("semantic", "hybrid"):
        semantic = _semantic_ranking(base, query, limit=depth)
    if mode == "fulltext":
        ranking = words
    elif mode == "semantic":
        ranking = [(pk, min(1.0, score)) for pk, score in semantic]
    else:
        # A base with nothing embedded yet is ranked by its words alone; one with embeddings by
        # both, so a chunk found by words only, near nothing by meaning, scores at most 0.5.
        ranking = fuse([words] if base.embedding_dimensions is None else [words, semantic])
    kept = [(pk, score) for pk, score in ranking if score >= min_score][:top_k]
    return _hits(base, kept)


def fuse(rankings: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, float]]:
    """Return the rankings fused by reciprocal rank fusion, 1.0 for first in every ranking."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (pk, _score) in enumerate(ranking, start=1):
            fused[pk] = fused.get(pk, 0.0) + 1.0 / (RRF_K + rank)
    best = max(1, len(rankings)) / (RRF_K + 1)
    return sorted(((pk, total / best) for pk, total in fused.items()), key=lambda i: (-i[1], i[0]))


def _semantic_ranking(base: KnowledgeBase, query: str, *, limit: int) -> list[tuple[int, float]]:
    if base.embedding_dimensions is None:
        return []  # nothing embedded yet: no chunk to compare with
    actor = base.embedding_actor
    assert actor is not None
    if base.embedding_fingerprint and base.embedding_fingerprint != fingerprint(actor):
        raise SearchError(
            f"the knowledge base's embeddings were made by another model than embedding actor "
            f"{actor.name!r} now uses; re-index it"
        )
    try:
        [vector] = embed(actor, [query[:MAX_EMBEDDED_QUERY_CHARS]])
    except EmbeddingError as exc:
        raise SearchError(f"cannot search by meaning: {exc}") from None
    if len(vector) != base.embedding_dimensions:
        raise SearchError(
            f"cannot search by meaning: embedding actor {actor.name!r} answered a vector of "
            f"{len(vector)} dimensions, but the chunks of {base.slug!r} have "
            f"{base.embedding_dimensions}; re-index the knowledge base"
        )
    return [
        (pk, score) for pk, score in nearest(base, vector, limit=limit) if score >= SEMANTIC_FLOOR
    ]


def _hits(base: KnowledgeBase, ranking: list[tuple[int, float]]) -> list[Hit]:
    chunks = (
        Chunk.objects.filter(pk__in=[pk for pk, _ in ranking])
        .select_related("document")
        .only("heading", "text", "document__title")
    )
    by_id = {chunk.pk: chunk for chunk in chunks}
    return [
        Hit(
            chunk_id=chunk.pk,
            document_id=chunk.document_id,
            document_title=chunk.document.title,
            knowledge_base=base.slug,
            heading=chunk.heading,
            text=chunk.text,
            score=score,
        )
        for pk, score in ranking
        if (chunk := by_id.get(pk)) is not None  # deleted since it was ranked
    ]
