"""Data sources of a step: the searches it makes (`sources`), the hits it cites, their text.

A step's `sources` name knowledge bases to search before the step runs (an llm step) or as
the step itself (a retrieve step). The runner searches; the engine reads the searches from
the recipe, numbers the hits it is given as citations `[1]`, `[2]`… (`format_sources`),
finds the numbers an answer cites (`cited_numbers`), and checks the hits a dry run's script
gives instead of a search (`read_script_hits`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.engine.checks import is_int, is_number, listed
from workflows.engine.errors import TemplateError
from workflows.engine.templating import SOURCES_NAME, step_sources_reference, template_names

MODES: tuple[str, ...] = ("fulltext", "semantic", "hybrid")
DEFAULT_MODE = "hybrid"
DEFAULT_TOP_K = 5
MAX_TOP_K = 50
DEFAULT_MIN_SCORE = 0.0
# A knowledge base's slug, as `knowledge.models.KnowledgeBase.slug` accepts it.
BASE_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
MAX_BASE_SLUG = 100
# How many searches one step may make: each is a database query (and maybe an embedding).
MAX_SOURCES = 10
# A citation marker: `[3]`, or several numbers in one pair of brackets: `[1, 3]`.
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*,\s*\d{1,4})*)\]")
# Script hits per step execution, and hits per execution: enough for any test of a recipe.
MAX_SCRIPT_EXECUTIONS = 100
MAX_SCRIPT_HITS = MAX_TOP_K * MAX_SOURCES


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """One search of a step: a knowledge base (slug), a query template, how many hits.

    An empty `query` searches with the step's default: an llm step's rendered prompt, a
    retrieve step's first input.
    """

    knowledge_base: str
    query: str = ""
    top_k: int = DEFAULT_TOP_K
    min_score: float = DEFAULT_MIN_SCORE
    mode: str = DEFAULT_MODE

    def as_json(self) -> dict[str, Any]:
        """Return the search as the recipe document writes it."""
        return {
            "knowledge_base": self.knowledge_base,
            "query": self.query,
            "top_k": self.top_k,
            "min_score": self.min_score,
            "mode": self.mode,
        }


@dataclass(frozen=True, slots=True)
class Citation:
    """A hit as a step cites it: its number in the step's list, where it comes from, its text.

    The ids are those of the knowledge base's rows, None for a dry run's scripted hit.
    """

    number: int
    document: str
    text: str
    score: float
    heading: str = ""
    knowledge_base: str = ""
    chunk_id: int | None = None
    document_id: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], number: int | None = None) -> Citation:
        """Read a stored hit (`Hit.as_json()` with its `number`) or a script's hit.

        A script names the document as `document`, a stored hit as `document_title`.
        """
        title = data.get("document_title", data.get("document", ""))
        score = data.get("score", 0.0)
        return cls(
            number=number if number is not None else int(data.get("number") or 0),
            document=str(title or ""),
            text=str(data.get("text") or ""),
            score=float(score) if is_number(score) else 0.0,
            heading=str(data.get("heading") or ""),
            knowledge_base=str(data.get("knowledge_base") or ""),
            chunk_id=data.get("chunk_id") if is_int(data.get("chunk_id")) else None,
            document_id=data.get("document_id") if is_int(data.get("document_id")) else None,
        )

    def as_json(self) -> dict[str, Any]:
        """Return the hit as `StepRun.details["retrieval"]["hits"]` stores it."""
        return {
            "number": self.number,
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "document_title": self.document,
            "knowledge_base": self.knowledge_base,
            "heading": self.heading,
            "text": self.text,
            "score": self.score,
        }

    @property
    def title(self) -> str:
        """Return what a citation's line names: `Document › Heading` (or the document)."""
        return f"{self.document} › {self.heading}" if self.heading else self.document


def numbered(hits: Iterable[Mapping[str, Any]]) -> tuple[Citation, ...]:
    """Return hits (stored or scripted JSON) as citations numbered from 1, in order.

    The same chunk found by two searches is cited once, under its first number.
    """
    seen: set[int] = set()
    citations: list[Citation] = []
    for hit in hits:
        chunk = hit.get("chunk_id")
        if isinstance(chunk, int) and not isinstance(chunk, bool):
            if chunk in seen:
                continue
            seen.add(chunk)
        citations.append(Citation.from_json(hit, len(citations) + 1))
    return tuple(citations)


def format_sources(hits: Sequence[Citation]) -> str:
    """Return hits as a prompt shows them: `[1] Title › heading`, then the text; "" for none."""
    return "\n\n".join(f"[{hit.number}] {hit.title}\n{hit.text.strip()}" for hit in hits)


def cited_numbers(text: str) -> tuple[int, ...]:
    """Return the numbers cited in `text` as `[n]` or `[n, m]`, in order of first citation."""
    found: dict[int, None] = {}
    for marker in _MARKER.finditer(text):
        for number in marker.group(1).split(","):
            found[int(number)] = None
    return tuple(found)


def names_sources(template: str) -> bool:
    """Tell whether a template shows hits (`{sources}` or `{steps.KEY.sources}`)."""
    try:
        names = template_names(template)
    except TemplateError:
        return False
    return any(n == SOURCES_NAME or step_sources_reference(n) is not None for n in names)


# -- the searches of a step document ------------------------------------------------------


def source_problems(value: object, path: str) -> tuple[SourceSpec | None, list[tuple[str, str]]]:
    """Read one search document; return it (None if it cannot be read) and its problems.

    Each problem is (path, message); the query's template names are checked by the caller,
    who knows the recipe's inputs and steps.
    """
    if not isinstance(value, Mapping):
        got = "null" if value is None else type(value).__name__
        return None, [(path, f"must be an object, got {got}")]
    problems: list[tuple[str, str]] = []
    base = value.get("knowledge_base")
    if base is None or base == "":
        problems.append((f"{path}.knowledge_base", "is required: the slug of a knowledge base"))
    elif not isinstance(base, str):
        problems.append((f"{path}.knowledge_base", f"must be a string, got {type(base).__name__}"))
    elif len(base) > MAX_BASE_SLUG or not BASE_SLUG.fullmatch(base):
        problems.append(
            (
                f"{path}.knowledge_base",
                f"must be a knowledge base's slug (^[a-z0-9][a-z0-9_-]*$, at most "
                f"{MAX_BASE_SLUG} characters), got {base!r}",
            )
        )
    query = value.get("query")
    if query is None:
        query = ""
    elif not isinstance(query, str):
        problems.append((f"{path}.query", f"must be a string, got {type(query).__name__}"))
        query = ""
    top_k = value.get("top_k")
    if top_k is None:
        top_k = DEFAULT_TOP_K
    elif not is_int(top_k) or not 1 <= top_k <= MAX_TOP_K:
        problems.append(
            (f"{path}.top_k", f"must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
        )
    min_score = value.get("min_score")
    if min_score is None:
        min_score = DEFAULT_MIN_SCORE
    elif not is_number(min_score) or not 0 <= min_score <= 1:
        problems.append((f"{path}.min_score", f"must be a number from 0 to 1, got {min_score!r}"))
    mode = value.get("mode")
    if mode is None:
        mode = DEFAULT_MODE
    elif mode not in MODES:
        problems.append(
            (f"{path}.mode", f"unknown mode {mode!r}; expected one of: {listed(MODES)}")
        )
    if problems:
        return None, problems
    return SourceSpec(str(base), query, int(top_k), float(min_score), str(mode)), []


def sources_problem(value: object) -> str | None:
    """Return why a step's `sources` is not a list of searches, or None."""
    if not isinstance(value, list):
        return f"must be a list of searches, got {type(value).__name__}"
    if len(value) > MAX_SOURCES:
        return f"a step searches at most {MAX_SOURCES} sources, got {len(value)}"
    return None


# -- a dry run's scripted hits -----------------------------------------------------------


def read_script_hits(value: object, path: str) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """Check a script's hits for one step: a list, per execution, of lists of hits.

    A hit is `{"document": title, "text": ..., "score": 0.9, "heading"?: ...}`. Return the
    hits normalised (score a float, heading "" when left out) and every problem as
    `path: message`.
    """
    if not isinstance(value, list) or not value:
        return [], [f"{path}: must be a non-empty list, per execution, of lists of hits"]
    if len(value) > MAX_SCRIPT_EXECUTIONS:
        return [], [f"{path}: at most {MAX_SCRIPT_EXECUTIONS} executions, got {len(value)}"]
    errors: list[str] = []
    executions: list[list[dict[str, Any]]] = []
    for i, hits in enumerate(value):
        if not isinstance(hits, list):
            errors.append(f"{path}[{i}]: must be a list of hits (an empty list: none found)")
            continue
        if len(hits) > MAX_SCRIPT_HITS:
            errors.append(f"{path}[{i}]: at most {MAX_SCRIPT_HITS} hits, got {len(hits)}")
            continue
        read: list[dict[str, Any]] = []
        for j, hit in enumerate(hits):
            normalised = _script_hit(hit, f"{path}[{i}][{j}]", errors)
            if normalised is not None:
                read.append(normalised)
        executions.append(read)
    return executions, errors


_HIT_KEYS = frozenset({"document", "text", "score", "heading"})


def _script_hit(hit: object, path: str, errors: list[str]) -> dict[str, Any] | None:
    if not isinstance(hit, Mapping):
        errors.append(f"{path}: must be an object with document, text and score")
        return None
    before = len(errors)
    unknown = sorted(str(k) for k in hit if k not in _HIT_KEYS)
    if unknown:
        errors.append(f"{path}: unknown key '{unknown[0]}'; a hit has {listed(_HIT_KEYS)}")
    for key in ("document", "text"):
        if not isinstance(hit.get(key), str) or not hit[key].strip():
            errors.append(f"{path}.{key}: must be non-empty text")
    heading = hit.get("heading", "")
    if not isinstance(heading, str):
        errors.append(f"{path}.heading: must be text")
    score = hit.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        errors.append(f"{path}.score: must be a number from 0 to 1, got {score!r}")
    if len(errors) > before or not isinstance(score, int | float):
        return None
    return {
        "document": hit["document"],
        "heading": heading,
        "text": hit["text"],
        "score": float(score),
    }
