"""Search of a knowledge base: full text, by meaning, hybrid; the index kept in sync.

A fixed corpus of ten chunks, each with a hand-made 4-dimension embedding (topics: accounts,
billing, stories, and a little of everything). The stub server embeds queries by counting
each topic's words, so which chunks are near a query is known in advance.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from knowledge import fulltext, vectors
from knowledge.embeddings import scripted_embedding
from knowledge.fulltext import ParsedQuery, parse_query
from knowledge.models import Chunk, Document, KnowledgeBase
from knowledge.search import SEMANTIC_FLOOR, Hit, SearchError, fuse, search
from tests.factories import ActorFactory, UserFactory
from tests.knowledge.embedding_stub import MakeActor, embedding_actor, stub_server
from tests.live_server import free_port
from tests.runner.providers.stub_server import StubServer
from workflows.models import Actor

__all__ = ["embedding_actor", "stub_server"]

pytestmark = pytest.mark.django_db

CORPUS: list[tuple[str, str, str, list[float]]] = [
    # (document, heading, text, embedding); chunk n is CORPUS[n - 1].
    (
        "Account guide",
        "Account › Passwords",
        "To reset your password, open Settings and choose Reset password. "
        "A reset link is emailed to you.",
        [1.0, 0.0, 0.0, 0.2],
    ),
    (
        "Account guide",
        "Account › Two-factor",
        "Two factor authentication adds a code from your phone at sign in.",
        [0.6, 0.0, 0.0, 0.8],
    ),
    (
        "Account guide",
        "Account › Email",
        "Change the email address of your account from the profile page.",
        [0.3, 0.0, 0.0, 0.95],
    ),
    (
        "Billing",
        "Billing › Invoices",
        "Invoices are emailed on the first day of each month as PDF files.",
        [0.0, 1.0, 0.0, 0.2],
    ),
    (
        "Billing",
        "Billing › Refunds",
        "Refunds are paid back to the original card within ten days.",
        [0.0, 0.9, 0.0, 0.4],
    ),
    (
        "Billing",
        "Billing › Plans",
        "Upgrade or downgrade your plan at any time; the price changes at the next invoice.",
        [0.0, 0.7, 0.0, 0.7],
    ),
    (
        "The lighthouse",
        "",
        "The keeper climbed the stairs and lit the lamp for the ships coming home.",
        [0.0, 0.0, 1.0, 0.2],
    ),
    (
        "The lighthouse",
        "",
        "Storms kept the ships in the harbour for three nights.",
        [0.0, 0.0, 0.9, 0.4],
    ),
    (
        "Administration",
        "Admin › Passwords",
        "Administrators can force a password reset for any user.",
        [0.9, 0.0, 0.0, 0.45],
    ),
    (
        "Administration",
        "Admin › Audit",
        "The audit log records every sign in and every change of settings.",
        [0.4, 0.0, 0.0, 0.9],
    ),
]
TOPICS = (
    {"password", "passwords", "reset", "login", "credentials"},
    {"invoice", "invoices", "refund", "refunds", "money", "price", "plan"},
    {"ship", "ships", "lamp", "storm", "storms", "keeper", "harbour"},
)


def topic_embedding(text: str) -> list[float]:
    """Embed a query the way the corpus was: topic word counts, and a little of everything."""
    words = text.lower().replace("?", " ").split()
    return [float(sum(word in topic for word in words)) for topic in TOPICS] + [0.2]


def cosine(a: list[float], b: list[float]) -> float:
    norms = sum(x * x for x in a) ** 0.5 * sum(x * x for x in b) ** 0.5
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms


def add_chunks(base: KnowledgeBase, corpus: list[tuple[str, str, str, list[float]]]) -> list[int]:
    """Store the corpus as documents and chunks of `base`; return the chunk ids in order."""
    documents: dict[str, Document] = {}
    ids = []
    for title, heading, text, embedding in corpus:
        document = documents.get(title)
        if document is None:
            document = documents[title] = Document.objects.create(
                knowledge_base=base,
                title=title,
                format="markdown",
                content_hash=f"{base.slug}-{title}",
                status=Document.Status.READY,
            )
        chunk = Chunk.objects.create(
            document=document,
            knowledge_base=base,
            ordinal=document.chunks.count(),
            heading=heading,
            text=text,
            embedding=vectors.to_bytes(embedding) if base.embedding_actor_id else None,
        )
        ids.append(chunk.pk)
    return ids


@pytest.fixture(autouse=True)
def _fresh_vectors() -> None:
    """Start each test with nothing learnt of the database by another."""
    vectors.forget()


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="alice")


@pytest.fixture
def guide(owner: Any, embedding_actor: MakeActor, stub_server: StubServer) -> KnowledgeBase:
    """The corpus in a base whose embedding actor is the stub, embedding by topics."""
    stub_server.embedder = topic_embedding
    base = KnowledgeBase.objects.create(
        slug="guide",
        name="Guide",
        owner=owner,
        embedding_actor=embedding_actor(),
        embedding_dimensions=4,
    )
    base.chunk_ids = add_chunks(base, CORPUS)  # type: ignore[attr-defined]
    return base


@pytest.fixture
def words_only(owner: Any) -> KnowledgeBase:
    """The corpus in a base with no embedding actor."""
    base = KnowledgeBase.objects.create(slug="words-only", name="Words only", owner=owner)
    base.chunk_ids = add_chunks(base, CORPUS)  # type: ignore[attr-defined]
    return base


def numbers(base: KnowledgeBase, hits: list[Hit]) -> list[int]:
    """Return the hits as chunk numbers (1 = CORPUS[0]) for readable assertions."""
    ids: list[int] = base.chunk_ids  # type: ignore[attr-defined]
    return [ids.index(hit.chunk_id) + 1 for hit in hits]


# -- full text ------------------------------------------------------------------------------


def test_it_finds_a_question_s_words_without_needing_all_of_them(guide: KnowledgeBase) -> None:
    hits = search(guide, "How do I reset my password?", mode="fulltext")
    assert numbers(guide, hits) == [1, 9]
    assert 1 > hits[0].score > hits[1].score > 0


def test_it_describes_each_hit(guide: KnowledgeBase) -> None:
    [hit] = search(guide, "refunds", mode="fulltext")
    assert hit.as_json() == {
        "chunk_id": guide.chunk_ids[4],  # type: ignore[attr-defined]
        "document_id": Document.objects.get(title="Billing").pk,
        "document_title": "Billing",
        "knowledge_base": "guide",
        "heading": "Billing › Refunds",
        "text": CORPUS[4][2],
        "score": round(hit.score, 4),
    }


def test_it_matches_words_by_their_stem(guide: KnowledgeBase) -> None:
    assert numbers(guide, search(guide, "refunded", mode="fulltext")) == [5]
    assert numbers(guide, search(guide, "climbing stair", mode="fulltext")) == [7]


def test_it_finds_words_in_headings(guide: KnowledgeBase) -> None:
    assert numbers(guide, search(guide, "audit", mode="fulltext")) == [10]
    assert sorted(numbers(guide, search(guide, "admin", mode="fulltext"))) == [9, 10]


def test_it_keeps_quoted_phrases_together(guide: KnowledgeBase) -> None:
    assert numbers(guide, search(guide, '"two factor"', mode="fulltext")) == [2]
    assert search(guide, '"authentication factor"', mode="fulltext") == []


def test_it_leaves_out_chunks_with_a_negated_word_or_phrase(guide: KnowledgeBase) -> None:
    assert numbers(guide, search(guide, "password -administrators", mode="fulltext")) == [1]
    assert numbers(guide, search(guide, 'sign -"audit log"', mode="fulltext")) == [2]


def test_it_searches_only_the_given_base(guide: KnowledgeBase, owner: Any) -> None:
    other = KnowledgeBase.objects.create(slug="other", name="Other", owner=owner)
    add_chunks(other, [("Elsewhere", "", "Reset the password of the router.", [0.0] * 4)])
    assert sorted(numbers(guide, search(guide, "password router", mode="fulltext"))) == [1, 9]
    assert [h.knowledge_base for h in search(other, "password", mode="fulltext")] == ["other"]


STRANGE_QUERIES = [
    "what is the",  # stop words only
    "?!...,;",
    'NEAR(reset password) AND "unterminated OR * ^ : {text} -',
    "reset* OR password^2 heading:passwords",
    "'; DROP TABLE knowledge_chunk; --",
    "-password",  # a negation alone
    '""',
    "ünïcödé ☃ 数据",
    "word " * 500,
]


@pytest.mark.parametrize("query", STRANGE_QUERIES)
@pytest.mark.parametrize("mode", ["fulltext", "semantic", "hybrid"])
def test_it_treats_any_query_text_as_words_never_as_syntax(
    guide: KnowledgeBase, query: str, mode: str
) -> None:
    hits = search(guide, query, mode=mode)
    assert all(0 <= hit.score <= 1 for hit in hits)
    assert Chunk.objects.count() == len(CORPUS)


def test_it_finds_words_with_punctuation_around_them(guide: KnowledgeBase) -> None:
    hits = search(guide, "...password???!!! (reset)", mode="fulltext")
    assert numbers(guide, hits) == [1, 9]


# -- by meaning -----------------------------------------------------------------------------


def test_it_finds_chunks_by_meaning_without_shared_words(
    guide: KnowledgeBase, stub_server: StubServer
) -> None:
    assert search(guide, "login credentials", mode="fulltext") == []
    hits = search(guide, "login credentials", mode="semantic", top_k=4)
    assert numbers(guide, hits) == [1, 9, 2, 10]
    assert hits[0].score == pytest.approx(cosine([2, 0, 0, 0.2], CORPUS[0][3]), abs=1e-6)
    assert [r.json["input"] for r in stub_server.embedding_requests] == [["login credentials"]]


def test_it_scores_by_meaning_as_cosine_similarity_clipped_to_0_1(guide: KnowledgeBase) -> None:
    hits = search(guide, "invoices", mode="semantic", top_k=10)
    assert numbers(guide, hits)[:3] == [4, 5, 6]
    assert hits[2].score == pytest.approx(cosine([0, 1, 0, 0.2], CORPUS[5][3]), abs=1e-6)
    assert all(0 <= hit.score <= 1 for hit in hits)


def test_it_leaves_out_chunks_less_similar_than_the_floor(guide: KnowledgeBase) -> None:
    # Chunks 1, 2, 3, 8, 9, 10 share only "a little of everything" with the query (< 0.2).
    hits = search(guide, "invoices", mode="semantic", top_k=10)
    assert numbers(guide, hits) == [4, 5, 6]
    assert min(hit.score for hit in hits) >= SEMANTIC_FLOOR == 0.2


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_an_unrelated_query_finds_nothing_by_meaning(owner: Any, mode: str) -> None:
    base = KnowledgeBase.objects.create(
        slug="local",
        name="Local",
        owner=owner,
        embedding_actor=ActorFactory(name="local-embedder"),
        embedding_dimensions=256,
    )
    add_chunks(base, [(t, h, text, scripted_embedding(text)) for t, h, text, _ in CORPUS])
    assert search(base, "banana", mode=mode, top_k=5) == []


def test_it_leaves_out_chunks_not_embedded_yet(guide: KnowledgeBase) -> None:
    Chunk.objects.filter(pk=guide.chunk_ids[0]).update(embedding=None)  # type: ignore[attr-defined]
    hits = search(guide, "login credentials", mode="semantic", top_k=2)
    assert numbers(guide, hits) == [9, 2]


@pytest.mark.django_db(transaction=True)
def test_it_sees_chunks_added_deleted_and_embedded_since_the_last_search(
    guide: KnowledgeBase,
) -> None:
    # Committed writes, as in production: a process keeps a base's embeddings between
    # searches (outside transactions), and must notice each of these changes.
    query = "login credentials"
    assert numbers(guide, search(guide, query, mode="semantic", top_k=2)) == [1, 9]
    assert vectors._matrices, "the embeddings were kept"
    [new] = add_chunks(guide, [("Late", "", "Lost login?", [1.0, 0.0, 0.0, 0.1])])
    assert search(guide, query, mode="semantic", top_k=1)[0].chunk_id == new
    Chunk.objects.filter(pk=new).delete()
    assert numbers(guide, search(guide, query, mode="semantic", top_k=2)) == [1, 9]
    Chunk.objects.filter(pk=guide.chunk_ids[0]).update(embedding=None)  # type: ignore[attr-defined]
    assert numbers(guide, search(guide, query, mode="semantic", top_k=2)) == [9, 2]
    Chunk.objects.filter(pk=guide.chunk_ids[0]).update(  # type: ignore[attr-defined]
        embedding=vectors.to_bytes([1.0, 0.0, 0.0, 0.2])
    )
    assert numbers(guide, search(guide, query, mode="semantic", top_k=2)) == [1, 9]


@pytest.mark.django_db(transaction=True)
def test_it_streams_embeddings_too_large_to_keep(
    guide: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "CACHE_BYTES", 10)
    monkeypatch.setattr(vectors, "READ_BATCH", 3)
    hits = search(guide, "login credentials", mode="semantic", top_k=4)
    assert numbers(guide, hits) == [1, 9, 2, 10]
    assert not vectors._matrices


def test_it_keeps_no_embeddings_read_inside_a_transaction(
    guide: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a transaction sees may be rolled back: other searches must not be served it.
    monkeypatch.setattr(vectors, "READ_BATCH", 3)
    hits = search(guide, "login credentials", mode="semantic", top_k=4)
    assert numbers(guide, hits) == [1, 9, 2, 10]
    assert not vectors._matrices


def test_it_refuses_to_search_by_meaning_without_an_embedding_actor(
    words_only: KnowledgeBase,
) -> None:
    with pytest.raises(SearchError, match="'words-only' has no embedding actor"):
        search(words_only, "password", mode="semantic")


def test_it_says_when_the_embedding_server_is_down(guide: KnowledgeBase, settings: Any) -> None:
    port = free_port()
    settings.PROVIDER_URL_ALLOWLIST = [f"127.0.0.1:{port}"]
    Actor.objects.filter(pk=guide.embedding_actor_id).update(base_url=f"http://127.0.0.1:{port}/v1")
    guide.refresh_from_db()
    for mode in ("semantic", "hybrid"):
        with pytest.raises(SearchError) as caught:
            search(guide, "password", mode=mode)
        assert str(caught.value).startswith(
            f"cannot search by meaning: embedding server at http://127.0.0.1:{port}/v1 "
            "is unreachable"
        )


def test_it_refuses_a_query_vector_of_another_dimension(
    guide: KnowledgeBase, stub_server: StubServer
) -> None:
    stub_server.embedder = lambda text: [1.0, 0.0, 0.0]
    with pytest.raises(SearchError, match=r"answered a vector of 3 dimensions, but the chunks"):
        search(guide, "password", mode="semantic")


def test_it_embeds_queries_with_the_scripted_actor_without_a_server(owner: Any) -> None:
    base = KnowledgeBase.objects.create(
        slug="local",
        name="Local",
        owner=owner,
        embedding_actor=ActorFactory(name="local-embedder"),
        embedding_dimensions=256,
    )
    corpus = [(t, h, text, scripted_embedding(text)) for t, h, text, _ in CORPUS]
    base.chunk_ids = add_chunks(base, corpus)  # type: ignore[attr-defined]
    hits = search(base, "the harbour in storms", mode="semantic", top_k=1)
    assert numbers(base, hits) == [8]


# -- hybrid ---------------------------------------------------------------------------------


def test_it_fuses_both_rankings_first_in_both_scoring_1(guide: KnowledgeBase) -> None:
    hits = search(guide, "login credentials reset", mode="hybrid", top_k=4)
    # Full text: 1, 9. By meaning: 1, 9, 2, 10, ...
    assert numbers(guide, hits) == [1, 9, 2, 10]
    expected = [1.0, 61 / 62, 61 / (2 * 63), 61 / (2 * 64)]
    assert [hit.score for hit in hits] == pytest.approx(expected)


def test_it_ranks_hybrid_hits_as_the_fusion_of_both_modes(guide: KnowledgeBase) -> None:
    query = "storms ships harbour refunds"
    words = search(guide, query, mode="fulltext", top_k=50)
    meaning = search(guide, query, mode="semantic", top_k=50)
    fused = fuse([[(h.chunk_id, h.score) for h in words], [(h.chunk_id, h.score) for h in meaning]])
    hits = search(guide, query, mode="hybrid", top_k=10)
    assert [(h.chunk_id, h.score) for h in hits] == pytest.approx(fused[:10])


def test_it_fuses_by_rank_so_second_in_both_beats_first_in_one() -> None:
    fused = fuse([[(1, 0.9), (2, 0.8)], [(3, 0.9), (2, 0.1)]])
    assert [pk for pk, _ in fused] == [2, 1, 3]
    assert fused[0][1] == pytest.approx(61 / 62)
    assert fuse([[(7, 0.1)], [(7, 0.2)]]) == [(7, 1.0)]


def test_it_searches_words_only_in_hybrid_mode_without_an_embedding_actor(
    words_only: KnowledgeBase,
) -> None:
    hybrid = search(words_only, "How do I reset my password?")
    assert hybrid == search(words_only, "How do I reset my password?", mode="fulltext")
    assert numbers(words_only, hybrid) == [1, 9]


def test_it_searches_by_words_until_chunks_are_embedded(
    guide: KnowledgeBase, stub_server: StubServer
) -> None:
    KnowledgeBase.objects.filter(pk=guide.pk).update(embedding_dimensions=None)
    guide.refresh_from_db()
    hits = search(guide, "reset", mode="hybrid")
    assert numbers(guide, hits) == [1, 9]
    assert hits[0].score == 1.0  # first in the only ranking there is
    assert stub_server.embedding_requests == []


def test_a_ranking_that_found_nothing_leaves_the_others_at_half() -> None:
    [(first, one), (second, two)] = fuse([[(1, 0.9), (2, 0.5)], []])
    assert (first, one, second) == (1, 0.5, 2)
    assert two == pytest.approx(61 / 62 / 2)
    assert fuse([[(3, 0.4)]]) == [(3, 1.0)]
    assert fuse([[], []]) == []


def test_words_alone_score_half_when_nothing_is_near_by_meaning(
    guide: KnowledgeBase, stub_server: StubServer
) -> None:
    # So that a minimum score above 0.5 tells "found by words and by meaning" from "a word
    # matched somewhere": the branch on no hits can fire for an unrelated question.
    stub_server.embedder = lambda text: [0.0, 0.0, 0.0, 0.0]  # similar to nothing
    hits = search(guide, "reset", mode="hybrid")
    assert numbers(guide, hits) == [1, 9]
    assert hits[0].score == 0.5
    assert search(guide, "reset", mode="hybrid", min_score=0.6) == []


# -- top_k, min_score, arguments ------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fulltext", "semantic", "hybrid"])
def test_it_returns_at_most_top_k_hits(guide: KnowledgeBase, mode: str) -> None:
    assert len(search(guide, "password reset login", mode=mode, top_k=1)) == 1
    assert len(search(guide, "password reset login", mode=mode, top_k=50)) <= len(CORPUS)


@pytest.mark.parametrize("mode", ["fulltext", "semantic", "hybrid"])
def test_it_keeps_hits_scoring_at_least_min_score(guide: KnowledgeBase, mode: str) -> None:
    every = search(guide, "How do I reset my password?", mode=mode, top_k=10)
    assert len(every) >= 2
    threshold = (every[0].score + every[1].score) / 2
    kept = search(guide, "How do I reset my password?", mode=mode, top_k=10, min_score=threshold)
    assert kept == every[:1]


def test_it_keeps_only_the_chunk_first_in_both_with_min_score_1(guide: KnowledgeBase) -> None:
    hits = search(guide, "login credentials reset", mode="hybrid", min_score=1.0)
    assert numbers(guide, hits) == [1]


BAD_ARGUMENTS = [
    ({"query": ""}, "the query is empty"),
    ({"query": " \n\t "}, "the query is empty"),
    ({"mode": "magic"}, "unknown search mode 'magic'; expected one of fulltext, semantic"),
    ({"top_k": 0}, "top_k must be a whole number from 1 to 50, not 0"),
    ({"top_k": 51}, "not 51"),
    ({"top_k": True}, "not True"),
    ({"top_k": "5"}, "not '5'"),
    ({"min_score": -0.1}, "min_score must be a number from 0 to 1, not -0.1"),
    ({"min_score": 1.5}, "not 1.5"),
    ({"min_score": "high"}, "not 'high'"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_ARGUMENTS)
def test_it_refuses_bad_arguments(
    words_only: KnowledgeBase, arguments: dict[str, Any], message: str
) -> None:
    arguments = {"query": "password", **arguments}
    with pytest.raises(SearchError, match=message.replace("(", r"\(")):
        search(words_only, **arguments)


# -- the index stays in sync ----------------------------------------------------------------


def test_it_indexes_a_chunk_s_new_text_and_forgets_the_old(words_only: KnowledgeBase) -> None:
    chunk = Chunk.objects.get(pk=words_only.chunk_ids[6])  # type: ignore[attr-defined]
    chunk.text = "The keeper painted the tower red."
    chunk.save()
    assert search(words_only, "lamp", mode="fulltext") == []
    assert numbers(words_only, search(words_only, "painted", mode="fulltext")) == [7]


def test_it_indexes_changes_made_by_queryset_updates(words_only: KnowledgeBase) -> None:
    Chunk.objects.filter(pk=words_only.chunk_ids[3]).update(  # type: ignore[attr-defined]
        heading="Billing › Receipts"
    )
    assert numbers(words_only, search(words_only, "receipts", mode="fulltext")) == [4]
    assert search(words_only, "invoices", mode="fulltext")[0].heading != "Billing › Invoices"


def test_it_leaves_the_index_alone_when_only_the_embedding_changes(
    words_only: KnowledgeBase,
) -> None:
    Chunk.objects.filter(knowledge_base=words_only).update(embedding=vectors.to_bytes([1.0]))
    assert numbers(words_only, search(words_only, "refunds", mode="fulltext")) == [5]


def test_it_forgets_deleted_chunks_and_documents(words_only: KnowledgeBase) -> None:
    Chunk.objects.filter(pk=words_only.chunk_ids[8]).delete()  # type: ignore[attr-defined]
    assert numbers(words_only, search(words_only, "password reset", mode="fulltext")) == [1]
    Document.objects.filter(title="Account guide").delete()
    assert search(words_only, "password reset", mode="fulltext") == []
    KnowledgeBase.objects.filter(pk=words_only.pk).delete()
    assert fulltext.fulltext_ranking(words_only.pk, parse_query("ships"), limit=5) == []
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM knowledge_chunk_fts WHERE knowledge_chunk_fts MATCH 'ships'"
            )
            assert cursor.fetchone()[0] == 0


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the triggers are SQLite's")
def test_it_restores_triggers_a_table_copy_dropped(words_only: KnowledgeBase) -> None:
    assert fulltext.repair_sqlite_triggers() is False
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER knowledge_chunk_fts_insert")
    add_chunks(words_only, [("Late", "", "A chunk written while the trigger was gone.", [])])
    assert fulltext.repair_sqlite_triggers() is True
    hits = search(words_only, "trigger gone", mode="fulltext")
    assert [hit.document_title for hit in hits] == ["Late"]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the triggers are SQLite's")
def test_it_checks_the_triggers_after_every_migrate() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER knowledge_chunk_fts_update")
    call_command("migrate", verbosity=0)
    assert fulltext.repair_sqlite_triggers() is False


@pytest.mark.django_db(transaction=True)
def test_its_migration_drops_and_recreates_the_index(owner: Any) -> None:
    base = KnowledgeBase.objects.create(slug="migrated", name="Migrated", owner=owner)
    ids = add_chunks(base, CORPUS[:3])
    executor = MigrationExecutor(connection)
    executor.migrate([("knowledge", "0001_initial")])
    assert not _index_exists()
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes("knowledge"))
    assert _index_exists()
    # Chunks written before the index existed are indexed when it is made.
    assert [h.chunk_id for h in search(base, "profile", mode="fulltext")] == [ids[2]]


def _index_exists() -> bool:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'knowledge_chunk_fts%'"
            )
            return bool(cursor.fetchone()[0])
        cursor.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'knowledge_chunk' AND column_name = 'search_vector'"
        )
        return bool(cursor.fetchone()[0])


# -- the query parser -----------------------------------------------------------------------


PARSED = [
    ("How do I reset my password?", ParsedQuery((("reset",), ("password",)), ())),
    ('"two factor" sign-in', ParsedQuery((("two", "factor"), ("sign",)), ())),
    # Phrases first, then words: the order of terms does not matter to either database.
    ('password -admin -"audit log"', ParsedQuery((("password",),), (("audit", "log"), ("admin",)))),
    ('AND OR NOT NEAR "unclosed', ParsedQuery((("unclosed",), ("near",)), ())),
    ("reset reset RESET", ParsedQuery((("reset",),), ())),
    ("the of and", ParsedQuery((), ())),
    ("- -- x", ParsedQuery((("x",),), ())),
]


@pytest.mark.parametrize(("text", "parsed"), PARSED)
def test_it_parses_queries_into_words_phrases_and_negations(text: str, parsed: ParsedQuery) -> None:
    assert parse_query(text) == parsed


def test_it_caps_the_terms_of_a_long_query() -> None:
    parsed = parse_query(" ".join(f"word{i}" for i in range(1000)))
    assert len(parsed.include) == fulltext.MAX_TERMS


# -- pgvector (where the extension exists) --------------------------------------------------


def _pgvector_available() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return cursor.fetchone() is not None


def test_it_searches_by_meaning_through_pgvector_when_installed(guide: KnowledgeBase) -> None:
    if not _pgvector_available():
        pytest.skip("needs PostgreSQL with the vector extension available")
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
    vectors.forget()
    try:
        assert vectors.pgvector_installed()
        hits = search(guide, "login credentials", mode="semantic", top_k=4)
        assert numbers(guide, hits) == [1, 9, 2, 10]
        # A changed embedding is copied again before the next search.
        Chunk.objects.filter(pk=guide.chunk_ids[0]).update(  # type: ignore[attr-defined]
            embedding=vectors.to_bytes([0.0, 1.0, 0.0, 0.0])
        )
        hits = search(guide, "login credentials", mode="semantic", top_k=2)
        assert numbers(guide, hits) == [9, 2]
    finally:
        vectors.forget()
