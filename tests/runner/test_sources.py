"""Steps with data sources: retrieve steps and llm steps search a real index with the run
creator's access; hits become numbered citations on the StepRun, in templates, in branch
conditions and in the run's export; a dry run's script gives hits instead of searching."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import Chunk, Document, KnowledgeBase
from runner import services
from runner.inputs import InputsInvalid
from runner.models import Run
from tests.conftest import api_client
from tests.factories import ActorFactory, GroupFactory, UserFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from workflows.models import Actor, Recipe

pytestmark = pytest.mark.django_db

LIGHTHOUSES = b"""# Lighthouses

## Keeping the lamp

The keeper lights the lamp at dusk and trims the wick at midnight, so that ships far out at
sea can see the light all night long.

## Fog

In fog the keeper sounds the horn every thirty seconds.
"""
GARDENING = b"""# Gardening

## Tomatoes

Tomatoes need sun, warm soil and water at their roots every morning.
"""
ANSWER = "The keeper lights the lamp at dusk [1]."


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="alice")


@pytest.fixture
def docs(owner: Any) -> KnowledgeBase:
    """A knowledge base of two small Markdown files, searched by words and by meaning."""
    embedder = ActorFactory(name="k-embedder", config={})
    base = create_base(owner=owner, slug="docs", name="Docs", embedding_actor=embedder)
    for name, data in (("lighthouses.md", LIGHTHOUSES), ("gardening.md", GARDENING)):
        document, _ = add_document(base, owner, name, data)
        ingest_document(document.pk)  # the task, run here: the test holds the transaction
    assert set(base.documents.values_list("status", flat=True)) == {Document.Status.READY}
    return base


@pytest.fixture
def writer() -> Actor:
    """The recipes' model (answering with a citation), and their reviewer group."""
    GroupFactory(name="k-editors")
    return ActorFactory(name="k-writer", config={"replies": [ANSWER]})


def publish(owner: Any, steps: list[dict[str, Any]], slug: str = "ask-docs") -> Recipe:
    document = {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"question": {"type": "string", "required": True}},
        "actors": {"writer": "k-writer", "editors": "@human:k-editors"},
        "steps": steps,
    }
    return publish_document(owner, document)


NO_HITS = {"type": "retrieval", "operator": "less_than", "value": 1}
CITES = {"type": "cites_source", "operator": "cites"}


def retrieve_step(**source: Any) -> dict[str, Any]:
    return {
        "key": "find",
        "name": "Find",
        "kind": "retrieve",
        "sources": [{"knowledge_base": "docs", **source}],
        "branches": [branch("nothing_found", 1, NO_HITS, "unknown")],
    }


def answer_step(prompt: str = "Answer {question} from these sources:\n{sources}") -> dict:
    return {
        "key": "answer",
        "name": "Answer",
        "actor": "writer",
        "prompt": prompt,
        "branches": [
            branch("cited", 1, CITES, "@complete", action="QUALITY_APPROVED"),
            branch("uncited", 2, DEFAULT, "@end", action="END_RECIPE"),
        ],
    }


UNKNOWN = {
    "key": "unknown",
    "name": "Unknown",
    "actor": "writer",
    "prompt": "Say that the documents do not answer: {question}",
    "branches": [branch("said", 1, DEFAULT, "@complete")],
}


def run(user: Any, recipe: Recipe, question: str, script: Any = None) -> Run:
    """Start a run and execute its steps here until it stops."""
    return drive(
        services.run_start(user=user, recipe=recipe, inputs={"question": question}, script=script)
    )


def taken(run: Run) -> list[str]:
    return [e.branch for s in run.steps.order_by("seq") for e in s.evaluations.filter(taken=True)]


def test_a_retrieve_step_searches_a_real_index_and_the_answer_cites_its_hits(
    owner: Any, docs: KnowledgeBase, writer: Actor
) -> None:
    recipe = publish(owner, [retrieve_step(), answer_step(), UNKNOWN])

    done = run(owner, recipe, "When does the keeper light the lamp?")

    assert (done.status, done.outcome, done.error) == ("succeeded", "approved", "")
    assert taken(done) == ["cited"]
    find, answer = steps(done)["find"], steps(done)["answer"]
    retrieval = find.details["retrieval"]
    assert retrieval["searches"] == [
        {
            "knowledge_base": "docs",
            "query": "When does the keeper light the lamp?",
            "mode": "hybrid",
            "top_k": 5,
            "min_score": 0.0,
        }
    ]
    first = retrieval["hits"][0]
    chunk = Chunk.objects.get(pk=first["chunk_id"])
    assert (first["number"], first["document_title"], first["knowledge_base"]) == (
        1,
        "Lighthouses",
        "docs",
    )
    assert first["heading"] == chunk.heading and chunk.heading.endswith("Keeping the lamp")
    assert first["text"] == chunk.text and 0 < first["score"] <= 1
    assert [h["number"] for h in retrieval["hits"]] == list(range(1, len(retrieval["hits"]) + 1))
    assert find.response.startswith(f"[1] Lighthouses › {chunk.heading}\n{chunk.text.strip()}")
    assert find.prompt == "docs: When does the keeper light the lamp?"
    assert (find.actor_alias, find.status) == ("", "succeeded")
    assert answer.prompt == (
        f"Answer When does the keeper light the lamp? from these sources:\n{find.response}"
    )
    assert "retrieval" not in answer.details
    reasons = [e.reason for e in answer.evaluations.all()]
    assert reasons == ["cites [1]"]
    assert done.state["sources_seq"] == find.seq


def test_no_hits_take_the_other_branch(owner: Any, docs: KnowledgeBase, writer: Actor) -> None:
    recipe = publish(owner, [retrieve_step(mode="fulltext"), answer_step(), UNKNOWN])

    done = run(owner, recipe, "xylophone quartets")

    assert (done.status, done.outcome) == ("succeeded", "completed")
    assert list(steps(done)) == ["find", "unknown"]
    assert taken(done) == ["nothing_found", "said"]
    find = steps(done)["find"]
    assert (find.response, find.details["retrieval"]["hits"]) == ("", [])
    assert [e.reason for e in find.evaluations.all()] == ["0 hits < 1"]


def test_an_llm_step_searches_before_the_call_and_lists_the_hits_under_its_prompt(
    owner: Any, docs: KnowledgeBase, writer: Actor
) -> None:
    step = answer_step("Answer this question: {question}")
    step["sources"] = [{"knowledge_base": "docs", "top_k": 2, "min_score": 0.1}]
    recipe = publish(owner, [step])

    done = run(owner, recipe, "What do tomatoes need?")

    answer = steps(done)["answer"]
    hits = answer.details["retrieval"]["hits"]
    assert hits[0]["document_title"] == "Gardening" and len(hits) <= 2
    assert all(h["score"] >= 0.1 for h in hits)
    # A search without a query looks for the prompt, rendered without any hits.
    assert answer.details["retrieval"]["searches"][0]["query"] == (
        "Answer this question: What do tomatoes need?"
    )
    prompt, _, shown = answer.prompt.partition("\n\nSources:\n")
    assert prompt == "Answer this question: What do tomatoes need?"
    first = shown.split("\n\n")[0]
    assert first == f"[1] Gardening › {hits[0]['heading']}\n{hits[0]['text'].strip()}"
    assert "Tomatoes need sun" in first
    assert (done.status, done.outcome, taken(done)) == ("succeeded", "approved", ["cited"])
    assert [e.reason for e in answer.evaluations.all()] == ["cites [1]"]


def test_later_steps_show_the_hits_of_a_step_they_name(
    owner: Any, docs: KnowledgeBase, writer: Actor
) -> None:
    review = {
        "key": "review",
        "name": "Review",
        "kind": "human",
        "actor": "editors",
        "prompt": "Is this right? {steps.answer.response}",
        "material": "{steps.find.sources}",
        "branches": [branch("done", 1, DEFAULT, "@complete")],
    }
    answer = answer_step("Q: {question}\n{steps.find.sources}")
    answer["branches"] = [branch("next", 1, DEFAULT, "review")]
    recipe = publish(owner, [retrieve_step(query="{question} lamp"), answer, review, UNKNOWN])

    done = run(owner, recipe, "dusk", script={"editors": ["approve"]})

    find = steps(done)["find"]
    assert find.details["retrieval"]["searches"][0]["query"] == "dusk lamp"
    assert steps(done)["answer"].prompt == f"Q: dusk\n{find.response}"
    assert done.tasks.get().material == find.response
    assert done.status == "succeeded"


@pytest.mark.parametrize(
    ("slug", "whose"),
    [("nowhere", None), ("private", "mallory")],
    ids=["unknown-base", "unreadable-base"],
)
def test_a_base_the_run_creator_may_not_read_fails_the_step_clearly(
    owner: Any, docs: KnowledgeBase, writer: Actor, slug: str, whose: str | None
) -> None:
    if whose is not None:
        create_base(owner=UserFactory(username=whose), slug=slug, name="Private")
    recipe = publish(owner, [retrieve_step(knowledge_base=slug), answer_step(), UNKNOWN])

    done = run(owner, recipe, "lamp")

    message = (
        f"sources[0] ({slug}): there is no knowledge base '{slug}' that the run's creator may read"
    )
    find = steps(done)["find"]
    assert (find.status, find.error) == ("failed", message)
    assert find.details["retrieval"]["searches"][0]["error"] == (
        f"there is no knowledge base '{slug}' that the run's creator may read"
    )
    assert (done.status, done.error) == ("failed", f"step 'find' failed: {message}")


def test_a_query_that_renders_empty_finds_nothing_and_takes_the_other_branch(
    owner: Any, docs: KnowledgeBase, writer: Actor
) -> None:
    recipe = publish(owner, [retrieve_step(query="{question}"), answer_step(), UNKNOWN])

    done = run(owner, recipe, " \n ")

    assert (done.status, done.outcome) == ("succeeded", "completed")
    assert taken(done) == ["nothing_found", "said"]
    find = steps(done)["find"]
    assert find.status == "succeeded"
    assert find.details["retrieval"]["hits"] == []
    [search] = find.details["retrieval"]["searches"]
    assert search["note"] == "the query is empty, so nothing was searched"
    assert "error" not in search


def test_a_search_error_fails_the_step_with_its_message(owner: Any, writer: Actor) -> None:
    create_base(owner=owner, slug="docs", name="Words only")
    recipe = publish(owner, [retrieve_step(mode="semantic"), answer_step(), UNKNOWN])

    done = run(owner, recipe, "lamp")

    find = steps(done)["find"]
    assert find.status == "failed"
    assert find.error.startswith("sources[0] (docs): knowledge base 'docs' has no embedding actor")
    assert done.status == "failed"


def test_a_dry_runs_script_gives_the_hits_instead_of_a_search(owner: Any, writer: Actor) -> None:
    # No knowledge base exists: a scripted step searches none.
    recipe = publish(owner, [retrieve_step(), answer_step(), UNKNOWN])
    hit = {"document": "Guide", "heading": "Lamps", "text": "Lit at dusk.", "score": 0.9}
    script = {"sources.find": [[hit]], "writer": ["It is lit at dusk [1]."]}

    done = run(owner, recipe, "When is the lamp lit?", script=script)

    assert (done.status, done.outcome) == ("succeeded", "approved")
    find = steps(done)["find"]
    assert find.details["retrieval"] == {
        "searches": [
            {
                "knowledge_base": "docs",
                "query": "When is the lamp lit?",
                "mode": "hybrid",
                "top_k": 5,
                "min_score": 0.0,
                "scripted": True,
            }
        ],
        "hits": [
            {
                "number": 1,
                "chunk_id": None,
                "document_id": None,
                "document_title": "Guide",
                "knowledge_base": "",
                "heading": "Lamps",
                "text": "Lit at dusk.",
                "score": 0.9,
            }
        ],
    }
    assert find.response == "[1] Guide › Lamps\nLit at dusk."


def test_script_hits_are_consumed_in_order_and_the_last_repeats(owner: Any, writer: Actor) -> None:
    step = retrieve_step()
    step["branches"] = [
        branch(
            "again", 1, NO_HITS, "@repeat", action="REQUEST_MORE_DETAIL", params={"max_retries": 3}
        ),
        branch("found", 2, DEFAULT, "@complete"),
    ]
    recipe = publish(owner, [step])
    hit = {"document": "Guide", "text": "Lit at dusk.", "score": 0.5}

    done = run(owner, recipe, "lamp", script={"sources.find": [[], [], [hit]]})

    runs = done.steps.order_by("seq")
    assert [len(s.details["retrieval"]["hits"]) for s in runs] == [0, 0, 1]
    assert taken(done) == ["again", "again", "found"]


@pytest.mark.parametrize(
    ("script", "errors"),
    [
        (
            {"sources.answer": [[]]},
            ["script.sources.answer: no step 'answer' of this recipe searches sources"],
        ),
        (
            {"sources.find": [[{"document": "Guide", "score": 3}]]},
            [
                "script.sources.find[0][0].text: must be non-empty text",
                "script.sources.find[0][0].score: must be a number from 0 to 1, got 3",
            ],
        ),
        (
            {"sources.find": []},
            ["script.sources.find: must be a non-empty list, per execution, of lists of hits"],
        ),
    ],
)
def test_it_refuses_a_script_with_bad_hits(
    owner: Any, writer: Actor, script: dict[str, Any], errors: list[str]
) -> None:
    recipe = publish(owner, [retrieve_step(), answer_step(), UNKNOWN])
    with pytest.raises(InputsInvalid) as raised:
        services.run_start(user=owner, recipe=recipe, inputs={"question": "q"}, script=script)
    assert raised.value.errors == errors
    assert not Run.objects.exists()


def test_the_citations_are_exported_with_the_run(
    owner: Any, docs: KnowledgeBase, writer: Actor
) -> None:
    recipe = publish(owner, [retrieve_step(), answer_step(), UNKNOWN])
    done = run(owner, recipe, "When does the keeper light the lamp?")

    exported = api_client(owner).get(f"/api/runs/{done.pk}/").json()

    find = next(s for s in exported["steps"] if s["step"] == "find")
    assert find["details"]["retrieval"] == steps(done)["find"].details["retrieval"]
    assert find["details"]["retrieval"]["hits"][0]["document_title"] == "Lighthouses"
    finished = [
        e["data"]
        for e in api_client(owner).get(f"/api/runs/{done.pk}/events").json()
        if e["type"] == "step.finished" and e["data"]["step"] == "find"
    ]
    assert finished[0]["details"]["retrieval"]["hits"][0]["number"] == 1


def test_a_dry_run_started_through_the_api_takes_script_hits(owner: Any, writer: Actor) -> None:
    publish(owner, [retrieve_step(), answer_step(), UNKNOWN])
    hit = {"document": "Guide", "text": "Lit at dusk.", "score": 0.9}

    answer = api_client(owner).post(
        "/api/recipes/ask-docs/runs",
        {"inputs": {"question": "lamp"}, "script": {"sources.find": [[hit]]}},
        format="json",
    )

    assert answer.status_code == 201, answer.json()
    assert answer.json()["script"] == {"sources.find": [[{**hit, "heading": ""}]]}
