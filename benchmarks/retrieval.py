"""Print how fast a knowledge base of 10,000 chunks takes its chunks in and answers searches.

    .venv/bin/python benchmarks/retrieval.py [--documents 100] [--queries 200]
    createdb -h 127.0.0.1 -U postgres branchline_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    .venv/bin/python benchmarks/retrieval.py

Without DATABASE_URL it runs on a throwaway SQLite file; with it, on that PostgreSQL database
(migrated, and left holding the benchmark's knowledge base, which the next run replaces).

Ingest: `--documents` Markdown documents of 100 sections (a heading and ~800 characters of a
seeded mix of words each: one chunk per section) go through the write path a production
upload takes: `ingest.add_document` (hash, conversion, the stored document) then
`ingest.ingest_document` (chunking, embedding with the scripted embedder: feature hashing,
256 dimensions, no server; the chunks stored, the full-text index kept by the database:
triggers on SQLite, a generated column on PostgreSQL), one document after the other in this
process. Printed as chunks per second.

Search: first, one search by meaning in a process that has not read the base's embeddings yet
(each process reads them once, and again after they change: `knowledge/vectors.py`). Then
`--queries` queries of 2 to 6 of those words, searched in each mode (hybrid: full text plus
cosine similarity, fused), after a warm-up. The query's embedding is the scripted one,
computed in-process (a fraction of a millisecond), so the figure is the search itself, not a
model server. Printed: p50 and p95 per mode; exit status 0 when the hybrid p95 is under the
target (PASS), 1 otherwise.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
os.environ["EMBEDDED_WORKER"] = "0"

TARGET_P95_MS = 50.0
SLUG = "bench-retrieval"
ACTOR = "bench-embedder"
SECTIONS_PER_DOCUMENT = 100
WARM_UP = 10
SEED = 12


def setup_django() -> str:
    """Point Django at the database to use, migrate it, and return its vendor."""
    if "DATABASE_URL" not in os.environ:
        folder = tempfile.mkdtemp(prefix="branchline-bench-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/retrieval.sqlite3"
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    call_command("migrate", verbosity=0)
    return str(connection.vendor)


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Return `size` distinct made-up words of 3 to 10 letters."""
    words: set[str] = set()
    while len(words) < size:
        length = rng.randint(3, 10)
        words.add("".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(length)))
    return sorted(words)


def section_text(rng: random.Random, words: list[str]) -> str:
    # Zipf-like: a few words are common, most are rare, as in prose.
    picked = [words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(120)]
    return " ".join(picked)[:800]


def fresh_base() -> Any:
    """Return an empty benchmark knowledge base with a scripted embedding actor."""
    from django.contrib.auth import get_user_model

    from knowledge import ingest
    from knowledge.models import KnowledgeBase
    from workflows.models import Actor

    user, _ = get_user_model().objects.get_or_create(username="benchmark")
    actor, _ = Actor.objects.update_or_create(
        name=ACTOR, defaults={"kind": Actor.Kind.LLM, "provider": Actor.Provider.SCRIPTED}
    )
    KnowledgeBase.objects.filter(slug=SLUG).delete()
    return ingest.create_base(
        owner=user, slug=SLUG, name="Benchmark: retrieval", embedding_actor=actor
    )


def markdown(number: int, sections: list[str]) -> bytes:
    """Return a Markdown document of these sections, each under its own heading."""
    parts = [f"# Document {number}"]
    parts += [f"## Section {i}\n\n{text}" for i, text in enumerate(sections)]
    return "\n\n".join(parts).encode()


def ingest_documents(base: Any, documents: list[bytes]) -> tuple[float, int]:
    """Add and ingest each document as an upload is; return the seconds and the chunks."""
    from knowledge import ingest
    from knowledge.models import Chunk

    # The benchmark ingests here, in this process: no message for a worker.
    ingest.send_on_commit = lambda document_id: None
    started = time.perf_counter()
    for number, data in enumerate(documents, start=1):
        document, created = ingest.add_document(base, base.owner, f"doc-{number}.md", data)
        assert created and ingest.ingest_document(document.pk), f"document {number} failed"
    seconds = time.perf_counter() - started
    return seconds, Chunk.objects.filter(knowledge_base=base).count()


def time_searches(base: Any, queries: list[str], mode: str) -> list[float]:
    """Return the seconds each search took, after a warm-up."""
    from knowledge.search import search

    for query in queries[:WARM_UP]:
        search(base, query, mode=mode, top_k=5)
    times = []
    for query in queries:
        started = time.perf_counter()
        search(base, query, mode=mode, top_k=5)
        times.append(time.perf_counter() - started)
    return times


def cold_search(base: Any) -> float:
    """Return the seconds of a search by meaning that must read the embeddings first."""
    from knowledge import vectors
    from knowledge.search import search

    vectors.forget()
    started = time.perf_counter()
    search(base, "the first query", mode="semantic", top_k=5)
    return time.perf_counter() - started


def percentile(times: list[float], fraction: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--documents", type=int, default=100, help="documents of ~100 chunks to ingest (100)"
    )
    parser.add_argument("--queries", type=int, default=200, help="searches to time (200)")
    args = parser.parse_args()
    if args.documents < 1 or args.queries < WARM_UP:
        parser.error(f"--documents must be at least 1 and --queries at least {WARM_UP}")
    vendor = setup_django()

    rng = random.Random(SEED)
    words = vocabulary(rng)
    documents = [
        markdown(n, [section_text(rng, words) for _ in range(SECTIONS_PER_DOCUMENT)])
        for n in range(1, args.documents + 1)
    ]
    queries = [" ".join(rng.sample(words[:2000], rng.randint(2, 6))) for _ in range(args.queries)]

    base = fresh_base()
    seconds, chunks = ingest_documents(base, documents)
    base.refresh_from_db()
    print(
        f"{vendor}: ingest {args.documents} Markdown documents, {chunks} chunks (add_document + "
        f"ingest_document): {chunks / seconds:.0f} chunks/s, {args.documents / seconds:.1f} "
        f"documents/s ({seconds:.1f} s, scripted embeddings, 256 dimensions)"
    )
    print(
        f"{vendor}: first search by meaning (reads every embedding): {cold_search(base) * 1000:.1f} ms"
    )
    verdict = "FAIL"
    for mode in ("fulltext", "semantic", "hybrid"):
        times = time_searches(base, queries, mode)
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        line = f"{vendor}: {mode:<8} search, top 5 of {chunks}: p50 {p50 * 1000:.1f} ms, "
        line += f"p95 {p95 * 1000:.1f} ms (mean {statistics.mean(times) * 1000:.1f} ms)"
        if mode == "hybrid":
            verdict = "PASS" if p95 * 1000 < TARGET_P95_MS else "FAIL"
            line += f"  target p95 < {TARGET_P95_MS:g} ms: {verdict}"
        print(line)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
