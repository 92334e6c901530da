"""Embeddings: the scripted embedder, and OpenAI-compatible servers through the stub."""

from __future__ import annotations

import json
import math

import pytest

from knowledge import embeddings
from knowledge.embeddings import (
    BATCH_SIZE,
    SCRIPTED_DIMENSIONS,
    EmbeddingError,
    embed,
    scripted_embedding,
)
from tests.factories import ActorFactory
from tests.knowledge.embedding_stub import API_KEY, MakeActor, embedding_actor, stub_server
from tests.live_server import free_port
from tests.runner.providers.stub_server import (
    StubServer,
    error,
    hang_up,
    raw,
    redirect,
    reply,
    stub_embedding,
)
from workflows.models import Actor

__all__ = ["embedding_actor", "stub_server"]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- scripted -----------------------------------------------------------------------------


def test_it_embeds_words_deterministically_into_unit_vectors() -> None:
    first = scripted_embedding("The lighthouse keeper lit the lamp.")
    again = scripted_embedding("the LIGHTHOUSE keeper, lit the lamp")
    assert len(first) == SCRIPTED_DIMENSIONS
    assert first == again
    assert math.isclose(sum(x * x for x in first), 1.0, rel_tol=1e-9)


def test_it_puts_texts_that_share_words_closer_together() -> None:
    query = scripted_embedding("how do I reset my password")
    near = scripted_embedding("To reset your password, open the account page.")
    far = scripted_embedding("Invoices are sent on the first day of the month.")
    assert cosine(query, near) > cosine(query, far)


def test_it_embeds_a_text_without_words_as_the_zero_vector() -> None:
    assert scripted_embedding("  ... !! ") == [0.0] * SCRIPTED_DIMENSIONS


@pytest.mark.django_db
def test_it_embeds_with_a_scripted_actor_without_any_server() -> None:
    actor = ActorFactory(name="local")
    vectors = embed(actor, ["alpha beta", "gamma"])
    assert vectors == [scripted_embedding("alpha beta"), scripted_embedding("gamma")]


@pytest.mark.django_db
def test_it_returns_nothing_for_no_texts() -> None:
    assert embed(ActorFactory(name="local"), []) == []


@pytest.mark.django_db
def test_it_refuses_a_human_actor() -> None:
    actor = ActorFactory(name="people", human=True)
    with pytest.raises(EmbeddingError, match="'people' is not a model"):
        embed(actor, ["text"])


# -- OpenAI-compatible servers --------------------------------------------------------------


def test_it_embeds_through_an_openai_compatible_server(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    vectors = embed(embedding_actor(), ["red apple", "green pear"])

    assert vectors == [stub_embedding("red apple"), stub_embedding("green pear")]
    [sent] = stub_server.embedding_requests
    assert sent.json == {
        "model": "embed-1",
        "input": ["red apple", "green pear"],
        "encoding_format": "float",
    }
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"


def test_it_reaches_ollama_under_v1_of_the_url_ollama_documents(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    actor = embedding_actor(
        provider=Actor.Provider.OLLAMA, base_url=stub_server.url, api_key_env=""
    )
    assert embed(actor, ["tea"]) == [stub_embedding("tea")]
    [sent] = stub_server.embedding_requests
    assert sent.path == "/v1/embeddings"


def test_it_sends_large_inputs_in_batches_and_keeps_their_order(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    texts = [f"text number {i}" for i in range(2 * BATCH_SIZE + 3)]
    assert embed(embedding_actor(), texts) == [stub_embedding(t) for t in texts]
    sizes = [len(r.json["input"]) for r in stub_server.embedding_requests]
    assert sizes == [BATCH_SIZE, BATCH_SIZE, 3]


def test_it_orders_the_answer_by_its_indexes(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    body = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}
    stub_server.enqueue_embeddings(raw(json.dumps(body)))
    assert embed(embedding_actor(), ["first", "second"]) == [[1.0, 0.0], [0.0, 1.0]]


BAD_ANSWERS = [
    (raw("<html>oops</html>", content_type="text/html"), "a body that is not valid JSON"),
    (raw('{"data": [{"index": 0, "embedding": [1, 2]}]}'), "answered 1 embeddings for 2 texts"),
    (raw('{"object": "list"}'), "without a list of embeddings in data"),
    (
        raw('{"data": [{"embedding": [1, "2"]}, {"embedding": [3, 4]}]}'),
        "things other than numbers at 0",
    ),
    (
        raw('{"data": [{"embedding": [1, true]}, {"embedding": [3, 4]}]}'),
        "things other than numbers",
    ),
    (raw('{"data": [{"embedding": []}, {"embedding": [3, 4]}]}'), "no embedding at position 0"),
    (
        raw('{"data": [{"embedding": [1, 2, 3]}, {"embedding": [3, 4]}]}'),
        r"vectors of different sizes \(2, 3\)",
    ),
    (error(500, "model not loaded"), "answered 500: model not loaded"),
    (error(404, "no such model: embed-1"), "answered 404: no such model"),
    (
        redirect("http://elsewhere.example/v1/embeddings"),
        "answered 302: redirect to http://elsewhere.example/v1/embeddings not followed",
    ),
    (hang_up(), "is unreachable"),
]


@pytest.mark.parametrize(("answer", "message"), BAD_ANSWERS)
def test_it_refuses_answers_that_are_not_one_vector_per_text(
    embedding_actor: MakeActor, stub_server: StubServer, answer: object, message: str
) -> None:
    stub_server.enqueue_embeddings(answer)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match=message) as caught:
        embed(embedding_actor(), ["one", "two"])
    assert str(caught.value).startswith(f"embedding server at {stub_server.base_url} ")


def test_it_refuses_batches_of_different_sizes(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    stub_server.embedder = lambda text: [1.0, 0.0] if text == "a" else [1.0, 0.0, 0.0]
    with pytest.raises(EmbeddingError, match="vectors of 2 and of 3 dimensions"):
        embed(embedding_actor(), ["a"] * BATCH_SIZE + ["b"])


def test_it_says_when_the_server_is_down(embedding_actor: MakeActor, settings: object) -> None:
    port = free_port()
    settings.PROVIDER_URL_ALLOWLIST = [f"127.0.0.1:{port}"]  # type: ignore[attr-defined]
    actor = embedding_actor(base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EmbeddingError) as caught:
        embed(actor, ["anything"])
    assert str(caught.value).startswith(
        f"embedding server at http://127.0.0.1:{port}/v1 is unreachable"
    )


def test_it_gives_up_on_a_server_that_does_not_answer_in_time(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    stub_server.enqueue_embeddings(reply(delay_s=3))
    with pytest.raises(EmbeddingError, match="did not answer within 1 s"):
        embed(embedding_actor(timeout_s=1), ["slow"])


def test_it_never_shows_the_api_key_a_server_echoes(
    embedding_actor: MakeActor, stub_server: StubServer
) -> None:
    stub_server.enqueue_embeddings(error(401, f"Incorrect API key provided: {API_KEY}"))
    with pytest.raises(EmbeddingError) as caught:
        embed(embedding_actor(), ["secret?"])
    assert API_KEY not in str(caught.value)
    assert "Incorrect API key provided: ***" in str(caught.value)


def test_it_refuses_a_url_outside_the_allowlist_before_calling(
    embedding_actor: MakeActor, stub_server: StubServer, settings: object
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = []  # type: ignore[attr-defined]
    with pytest.raises(EmbeddingError, match="a loopback address; add it to PROVIDER_URL"):
        embed(embedding_actor(), ["text"])
    assert stub_server.requests == []


def test_it_says_which_api_key_variable_is_missing(
    embedding_actor: MakeActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRANCHLINE_TEST_EMBEDDING_KEY")
    with pytest.raises(
        EmbeddingError, match=r"BRANCHLINE_TEST_EMBEDDING_KEY \(api_key_env\) is not"
    ):
        embed(embedding_actor(), ["text"])


def test_it_hides_credentials_written_into_an_old_url(embedding_actor: MakeActor) -> None:
    actor = embedding_actor(base_url="http://user:hunter22@127.0.0.1:9/v1")
    with pytest.raises(EmbeddingError) as caught:
        embed(actor, ["text"])
    assert "hunter22" not in str(caught.value)


def test_it_stops_reading_an_answer_past_the_size_ceiling(
    embedding_actor: MakeActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "MAX_BODY_BYTES", 50)
    with pytest.raises(EmbeddingError, match="response body exceeded 50 bytes"):
        embed(embedding_actor(), ["a long answer follows"])
