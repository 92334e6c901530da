"""Print how fast a knowledge base of 10,000 chunks takes its chunks in and answers searches.

    .venv/bin/python benchmarks/retrieval.py [--chunks 10000] [--queries 200]
    createdb -h 127.0.0.1 -U postgres branchline_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/branchline_bench \\
    .venv/bin/python benchmarks/retrieval.py

Without DATABASE_URL it runs on a throwaway SQLite file; with it, on that PostgreSQL database
(migrated, and left holding the benchmark's knowledge base, which the next run replaces).

Ingest: `--chunks` chunks of ~800 characters (a seeded mix of words, a heading each) are
embedded with the scripted embedder (feature hashing, 256 dimensions: no server) and stored
with bulk inserts, the full-text index kept by the database as it is in production (triggers
on SQLite, a generated column on PostgreSQL). Printed as chunks per second.

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
CHUNKS_PER_DOCUMENT = 100
BULK_BATCH = 500
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


def chunk_text(rng: random.Random, words: list[str]) -> str:
    # Zipf-like: a few words are common, most are rare, as in prose.
    picked = [words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(120)]
    return " ".join(picked)[:800]


def fresh_base() -> Any:
    """Return an empty benchmark knowledge base with a scripted embedding actor."""
    from django.contrib.auth import get_user_model

    from knowledge.embeddings import SCRIPTED_DIMENSIONS
    from knowledge.models import KnowledgeBase
    from workflows.models import Actor

    user, _ = get_user_model().objects.get_or_create(username="benchmark")
    actor, _ = Actor.objects.update_or_create(
        name=ACTOR, defaults={"kind": Actor.Kind.LLM, "provider": Actor.Provider.SCRIPTED}
    )
    KnowledgeBase.objects.filter(slug=SLUG).delete()
    return KnowledgeBase.objects.create(
        slug=SLUG,
        name="Benchmark: retrieval",
        owner=user,
        embedding_actor=actor,
        embedding_dimensions=SCRIPTED_DIMENSIONS,
    )


def ingest(base: Any, texts: list[tuple[str, str]]) -> float:
    """Embed and store the chunks in bulk; return the seconds it took."""
    from django.db import transaction

    from knowledge import vectors
    from knowledge.embeddings import embed
    from knowledge.models import Chunk, Document

    started = time.perf_counter()
    with transaction.atomic():
        documents = Document.objects.bulk_create(
            Document(
                knowledge_base=base,
                title=f"Document {i + 1}",
                format="text",
                content_hash=f"{i:064d}",
                status=Document.Status.READY,
            )
            for i in range(0, len(texts), CHUNKS_PER_DOCUMENT)
        )
        for start in range(0, len(texts), BULK_BATCH):
            batch = texts[start : start + BULK_BATCH]
            embeddings = embed(base.embedding_actor, [text for _, text in batch])
            Chunk.objects.bulk_create(
                Chunk(
                    document=documents[(start + i) // CHUNKS_PER_DOCUMENT],
                    knowledge_base=base,
                    ordinal=(start + i) % CHUNKS_PER_DOCUMENT,
                    heading=heading,
                    text=text,
                    embedding=vectors.to_bytes(embedding),
                )
                for i, ((heading, text), embedding) in enumerate(
                    zip(batch, embeddings, strict=True)
                )
            )
    return time.perf_counter() - started


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
    parser.add_argument("--chunks", type=int, default=10_000, help="chunks to ingest (10000)")
    parser.add_argument("--queries", type=int, default=200, help="searches to time (200)")
    args = parser.parse_args()
    if args.chunks < 1 or args.queries < WARM_UP:
        parser.error(f"--chunks must be at least 1 and --queries at least {WARM_UP}")
    vendor = setup_django()

    rng = random.Random(SEED)
    words = vocabulary(rng)
    texts = [
        (f"Section {i // 7} › Part {i % 7}", chunk_text(rng, words)) for i in range(args.chunks)
    ]
    queries = [" ".join(rng.sample(words[:2000], rng.randint(2, 6))) for _ in range(args.queries)]

    base = fresh_base()
    seconds = ingest(base, texts)
    print(
        f"{vendor}: ingest {args.chunks} chunks: {args.chunks / seconds:.0f} chunks/s "
        f"({seconds:.1f} s, scripted embeddings, 256 dimensions)"
    )
    print(
        f"{vendor}: first search by meaning (reads every embedding): {cold_search(base) * 1000:.1f} ms"
    )
    verdict = "FAIL"
    for mode in ("fulltext", "semantic", "hybrid"):
        times = time_searches(base, queries, mode)
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        line = f"{vendor}: {mode:<8} search, top 5 of {args.chunks}: p50 {p50 * 1000:.1f} ms, "
        line += f"p95 {p95 * 1000:.1f} ms (mean {statistics.mean(times) * 1000:.1f} ms)"
        if mode == "hybrid":
            verdict = "PASS" if p95 * 1000 < TARGET_P95_MS else "FAIL"
            line += f"  target p95 < {TARGET_P95_MS:g} ms: {verdict}"
        print(line)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
