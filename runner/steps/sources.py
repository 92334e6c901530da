"""Search a step's sources (llm and retrieve steps): each knowledge base with the run creator's
access, or the hits a dry run's script gives instead.

What was searched and found is kept on the StepRun as `details["retrieval"]`:
`{"searches": [{"knowledge_base", "query", "mode", "top_k", "min_score", "error"?,
"scripted"?, "note"?}], "hits": [Hit.as_json() + {"number": n}]}`; the engine reads the hits
as numbered citations (`engine.Citation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from knowledge.embeddings import observed
from knowledge.search import SearchError, search
from knowledge.selectors import readable_base
from workflows import engine

from .. import tracing
from .session import Session

# A dry run's script gives a step's hits under this prefix and the step's key.
SCRIPT_PREFIX = "sources."
# Said of a search whose query rendered empty: it finds nothing (a branch on "no hits" takes
# it), it does not fail the step.
EMPTY_QUERY_NOTE = "the query is empty, so nothing was searched"


class SourcesFailed(Exception):
    """A search of the step could not run: the step fails with this message."""


@dataclass
class Retrieval:
    """What a step's searches were, and the hits they found, numbered in order."""

    searches: list[dict[str, Any]] = field(default_factory=list)
    hits: tuple[engine.Citation, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """Return what `StepRun.details["retrieval"]` stores."""
        return {"searches": self.searches, "hits": [hit.as_json() for hit in self.hits]}


def script_key(step_key: str) -> str:
    """Return the key under which a dry run's script gives the hits of step `step_key`."""
    return f"{SCRIPT_PREFIX}{step_key}"


def retrieve(session: Session, default_query: str, retrieval: Retrieval) -> None:
    """Search each of the step's sources in order, filling `retrieval`.

    A search without a query searches for `default_query`; one whose query renders empty
    finds nothing (noted on it). Raise SourcesFailed at the first search that cannot run (the
    base is unknown or unreadable, the search fails); `retrieval` then holds the searches
    made so far, the failed one with its error.
    """
    claim = session.claim
    step = claim.step
    scripted = _scripted_hits(session)
    found: list[dict[str, Any]] = []
    for i, source in enumerate(step.sources):
        where = f"sources[{i}]"
        try:
            query = session.render(source.query) if source.query else default_query
        except engine.TemplateError as exc:
            raise SourcesFailed(f"{where}.query: {exc}") from None
        search_doc: dict[str, Any] = {
            "knowledge_base": source.knowledge_base,
            "query": query,
            "mode": source.mode,
            "top_k": source.top_k,
            "min_score": source.min_score,
        }
        retrieval.searches.append(search_doc)
        if scripted is not None:
            search_doc["scripted"] = True
            continue
        try:
            found += _search(session, source, query, search_doc)
        except SourcesFailed as exc:
            search_doc["error"] = str(exc)
            raise SourcesFailed(f"{where} ({source.knowledge_base}): {exc}") from None
    retrieval.hits = engine.numbered(scripted if scripted is not None else found)


def _search(
    session: Session, source: engine.SourceSpec, query: str, search_doc: dict[str, Any]
) -> list[dict[str, Any]]:
    base = readable_base(session.creator(), source.knowledge_base)
    if base is None:
        raise SourcesFailed(
            f"there is no knowledge base '{source.knowledge_base}' that the run's creator may read"
        )
    if not query.strip():
        search_doc["note"] = EMPTY_QUERY_NOTE
        return []
    with tracing.retrieval_span(
        source.knowledge_base, query, mode=source.mode, top_k=source.top_k
    ) as span:
        try:
            # A search by meaning embeds the query: a model call of the step, recorded.
            with observed(session.record_embedding):
                hits = search(
                    base, query, mode=source.mode, top_k=source.top_k, min_score=source.min_score
                )
        except SearchError as exc:
            raise SourcesFailed(str(exc)) from None
        span.result(len(hits))
    return [hit.as_json() for hit in hits]


def _scripted_hits(session: Session) -> list[dict[str, Any]] | None:
    """Return the hits a dry run's script gives this execution of the step, or None.

    Executions consume the script's lists in order; the last one repeats.
    """
    key = script_key(session.claim.step.key)
    executions = (session.claim.script or {}).get(key)
    if not isinstance(executions, list) or not executions:
        return None
    index = session.next_call(key)
    hits = executions[min(index, len(executions) - 1)]
    return list(hits) if isinstance(hits, list) else []
