"""A real model with tools and with a knowledge base: SmolLM2 calls the demo MCP server's tools
through llama-cpp-python's function calling, and embeds a knowledge base that a retrieve step
then searches by meaning, through the real runner (a Celery worker takes each run)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import Document, KnowledgeBase
from knowledge.selectors import MOVING
from runner import services
from runner.models import ModelCall, Run, StepRun
from runner.status import RunStatus
from tests.models.conftest import MODEL, ModelServer, model_actor
from tests.runner.conftest import wait_for
from tests.runner.recipes import DEFAULT, branch, publish_document, steps
from tools.client import discover
from tools.models import ToolServer

pytestmark = pytest.mark.django_db(transaction=True)

FINISHED = (RunStatus.SUCCEEDED, RunStatus.ENDED)
RUN_TIMEOUT_S = 240


def finished(owner: Any, recipe: Any, **inputs: str) -> Run:
    run = services.run_start(user=owner, recipe=recipe, inputs=inputs)
    return wait_for(run, *FINISHED, RunStatus.FAILED, timeout=RUN_TIMEOUT_S)


def reasons(step: StepRun) -> dict[str, str]:
    return {e.branch: e.reason for e in step.evaluations.all()}


def taken(step: StepRun) -> str:
    return step.evaluations.get(taken=True).branch


def calls(step: StepRun) -> list[ModelCall]:
    return list(ModelCall.objects.filter(step_run=step).order_by("started_at", "pk"))


# -- the tool loop ------------------------------------------------------------------------------


@pytest.fixture
def demo_server(transactional_db: None) -> ToolServer:
    """The demo MCP server over stdio, its tools discovered (as seed_demo does)."""
    server = ToolServer.objects.create(
        name="demo", transport=ToolServer.Transport.STDIO, command="demo", timeout_s=30
    )
    discover(server)
    return server


def test_the_model_calls_a_tool_through_function_calling_and_the_run_ends_cleanly(
    worker: Any, runs_settled: None, owner: Any, model_server: ModelServer, demo_server: ToolServer
) -> None:
    """SmolLM2 asks for `demo.add` with arguments its tool's schema holds (the chat format's
    grammar sees to that), and the tool runs. The conversation cannot go on: llama-cpp-python
    0.3.36 refuses the assistant message that carries the calls, whose `content` is null as
    the API has it, with a 500 (its request model wants a string), and its chat format would
    not show the model a tool's result anyway. The step fails with the server's reason, and
    the recipe's error branch ends the run."""
    # The chatml-function-calling format offers the tools only when asked to (`tool_choice`).
    model_actor(model_server, "smol-tools", max_tokens=48, tool_choice="auto")
    called = {"type": "tool_called", "operator": "called", "tool": "demo.add"}
    failed = {"type": "execution_error", "operator": "equals", "value": True}
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "add",
            "name": "Add",
            "inputs": {"a": {"type": "string", "required": True}, "b": {"type": "string"}},
            "actors": {"model": "smol-tools"},
            "steps": [
                {
                    "key": "ask",
                    "name": "Ask",
                    "actor": "model",
                    "prompt": "What is {a} + {b}? Use the add tool.",
                    "tools": ["demo.add", "demo.multiply"],
                    "max_tool_calls": 2,
                    "branches": [
                        branch("failed", 1, failed, "@end", action="END_RECIPE"),
                        branch("used", 2, called, "@complete"),
                        branch("answered", 3, DEFAULT, "@complete"),
                    ],
                }
            ],
        },
    )

    done = finished(owner, recipe, a="2", b="3")

    ask = steps(done)["ask"]
    (call,) = ask.details["tool_calls"]
    assert (call["tool"], call["is_error"]) == ("demo.add", False)
    arguments = call["arguments"]
    assert set(arguments) == {"a", "b"} and all(
        isinstance(v, int | float) for v in arguments.values()
    )
    assert float(call["result"]) == arguments["a"] + arguments["b"]
    turns = calls(ask)
    assert [t.purpose for t in turns] == ["tool_turn", "tool_turn"]
    assert turns[0].error == "" and turns[0].tokens_estimated is False and turns[0].tokens_out
    assert "answered 500" in turns[1].error
    assert ask.status == "failed" and "answered 500" in ask.error
    assert (done.status, taken(ask)) == (RunStatus.ENDED, "failed")
    assert reasons(ask)["failed"].startswith("step failed: ")


# -- a knowledge base embedded by the model ---------------------------------------------------

LIGHTHOUSES = b"""# Lighthouses

The keeper lights the lamp at dusk and trims the wick at midnight, so that ships far out at
sea can see the light all night long.
"""
GARDENING = b"""# Gardening

Tomatoes need sun, warm soil and water at their roots every morning.
"""
TAXES = b"""# Taxes

File your income tax return before the end of April; late filings pay a penalty and interest.
"""
# No word of it is in the lighthouse text: only its meaning leads there.
QUESTION = "How do sailors find their way in the dark?"


@pytest.fixture
def docs(owner: Any, model_server: ModelServer) -> KnowledgeBase:
    """A knowledge base of three small Markdown files, embedded by the local model."""
    embedder = model_actor(model_server, "smol-embedder", max_tokens=1)
    base = create_base(owner=owner, slug="docs", name="Docs", embedding_actor=embedder)
    files = (("lighthouses.md", LIGHTHOUSES), ("gardening.md", GARDENING), ("taxes.md", TAXES))
    for name, data in files:
        document, _ = add_document(base, owner, name, data)
        # Here, rather than waiting for the worker; when the worker took the document first,
        # this call leaves it to the worker, and the wait below is for the worker's ingestion.
        ingest_document(document.pk)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and base.documents.filter(status__in=MOVING).exists():
        time.sleep(0.1)
    assert set(base.documents.values_list("status", flat=True)) == {Document.Status.READY}
    return base


def test_a_retrieve_step_finds_by_meaning_with_the_models_embeddings(
    worker: Any, runs_settled: None, owner: Any, model_server: ModelServer, docs: KnowledgeBase
) -> None:
    model_actor(model_server, "smol", max_tokens=48)
    nothing = {"type": "retrieval", "operator": "less_than", "value": 1}
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "ask-docs",
            "name": "Ask the docs",
            "inputs": {"question": {"type": "string", "required": True}},
            "actors": {"model": "smol"},
            "steps": [
                {
                    "key": "find",
                    "name": "Find",
                    "kind": "retrieve",
                    "sources": [{"knowledge_base": "docs", "mode": "semantic", "top_k": 1}],
                    "branches": [branch("nothing", 1, nothing, "@end", action="END_RECIPE")],
                },
                {
                    "key": "answer",
                    "name": "Answer",
                    "actor": "model",
                    "prompt": "Answer from the source: {question}\n{sources}",
                    "branches": [branch("done", 1, DEFAULT, "@complete")],
                },
            ],
        },
    )

    done = finished(owner, recipe, question=QUESTION)

    assert done.status == RunStatus.SUCCEEDED, done.error
    find, answer = steps(done)["find"], steps(done)["answer"]
    (hit,) = find.details["retrieval"]["hits"]
    assert hit["document_title"] == "Lighthouses" and hit["score"] > 0.5
    # The query was embedded by the server, which counted its tokens.
    (embedded,) = calls(find)
    direct = httpx.post(
        f"{model_server.base_url}/embeddings",
        json={"model": MODEL, "input": [QUESTION]},
        timeout=60,
    ).json()
    assert (embedded.purpose, embedded.error, embedded.tokens_estimated) == ("embedding", "", False)
    assert embedded.tokens_in == direct["usage"]["prompt_tokens"]
    # The lighthouse text reached the model, which answers from it.
    assert hit["text"] in answer.prompt and answer.response.strip()
