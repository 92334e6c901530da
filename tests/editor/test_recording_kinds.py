"""A real run that searched a knowledge base, called an MCP tool and ran a model's tool loop,
saved as a recipe test: its hits, tool results and tool-calling turns become the script, and
the test replays the same path without searching, calling the tool server or a model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from editor.replay import SAME
from editor.services import recipe_test_from_run, recipe_test_run_here, recipe_tests_replay
from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import KnowledgeBase
from runner.advance import advance
from runner.models import Run
from runner.services import run_start
from runner.status import RUNNABLE, RunStatus
from tests.factories import ActorFactory
from tools.client import discover
from tools.models import ToolServer
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

LIGHTHOUSES = b"""# Lighthouses

## Keeping the lamp

The keeper lights the lamp at dusk and trims the wick at midnight.
"""
TURN = '@tool_calls: [{"name": "demo.add", "arguments": {"a": 2, "b": 2}}]'

DOCUMENT: dict[str, Any] = {
    "format": "branchline.recipe/v1",
    "slug": "kinds",
    "name": "Search, tool, tool loop",
    "inputs": {
        "question": {"type": "string", "required": True},
        "a": {"type": "string", "required": True},
        "b": {"type": "string", "required": True},
    },
    "actors": {"model": "kinds-model"},
    "steps": [
        {
            "key": "find",
            "name": "Find",
            "kind": "retrieve",
            "sources": [{"knowledge_base": "lamps", "query": "{question}", "mode": "fulltext"}],
            "branches": [
                {
                    "name": "nothing_found",
                    "priority": 1,
                    "when": {"type": "retrieval", "operator": "less_than", "value": 1},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
            ],
        },
        {
            "key": "add",
            "name": "Add",
            "kind": "tool",
            "tool": "demo.add",
            "arguments": {"a": "{a}", "b": "{b}"},
            "branches": [],
        },
        {
            "key": "ask",
            "name": "Ask",
            "kind": "llm",
            "actor": "model",
            "prompt": "Add two and two, then answer.",
            "tools": ["demo.add"],
            "branches": [
                {
                    "name": "used",
                    "priority": 1,
                    "when": {"type": "tool_called", "operator": "called", "tool": "demo.add"},
                    "action": "QUALITY_APPROVED",
                    "target": "@complete",
                },
                {
                    "name": "unused",
                    "priority": 2,
                    "when": {"type": "default"},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
            ],
        },
    ],
}


@pytest.fixture
def lamps(author: Any) -> KnowledgeBase:
    embedder = ActorFactory(name="kinds-embedder", config={})
    base = create_base(owner=author, slug="lamps", name="Lamps", embedding_actor=embedder)
    document, _ = add_document(base, author, "lighthouses.md", LIGHTHOUSES)
    ingest_document(document.pk)
    return base


@pytest.fixture
def demo_server(db: None) -> ToolServer:
    server = ToolServer.objects.create(
        name="demo", transport=ToolServer.Transport.STDIO, command="demo", timeout_s=30
    )
    discover(server)
    return server


@pytest.fixture
def kinds(author: Any, lamps: KnowledgeBase, demo_server: ToolServer) -> Recipe:
    ActorFactory(name="kinds-model", config={"replies": [TURN, "It is 4."]})
    recipe = recipe_import(user=author, data=DOCUMENT).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def finish(run: Run) -> Run:
    for _ in range(20):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance(run.pk, time_slice=60)
    raise AssertionError(f"run {run.pk} did not stop: {run.status}")


def test_hits_tool_results_and_tool_turns_become_the_script_and_replay_the_path(
    kinds: Recipe, author: Any, demo_server: ToolServer
) -> None:
    inputs = {"question": "lamp dusk", "a": "2", "b": "3"}
    run = finish(run_start(user=author, recipe=kinds, inputs=inputs))
    assert run.status == RunStatus.SUCCEEDED, run.error
    real = {s.step_key: s for s in run.steps.all()}

    test = recipe_test_from_run(run=run, user=author)

    (hits,) = test.script["sources.find"]
    assert hits[0]["document"] == real["find"].details["retrieval"]["hits"][0]["document_title"]
    assert "lights the lamp at dusk" in hits[0]["text"]
    added, looped = test.script["tool.demo.add"]
    assert added == real["add"].response
    assert looped == real["ask"].details["tool_calls"][0]["result"]
    turn, answer = test.script["model"]
    assert json.loads(turn.removeprefix("@tool_calls:")) == [
        {"name": "demo.add", "arguments": {"a": 2, "b": 2}}
    ]
    assert answer == "It is 4."
    assert test.expected_path == ["find", "add", "ask"]

    # Neither the index, nor the tool server, nor the model is asked again.
    demo_server.delete()
    KnowledgeBase.objects.all().delete()
    report = recipe_tests_replay(recipe=kinds, user=author)
    recipe_test_run_here(test=test, user=author)

    assert [(r.verdict, r.message) for r in report.results] == [(SAME, "")]
    replay = report.results[0].run
    assert replay is not None
    assert replay.steps.get(step_key="find").details["retrieval"]["searches"][0]["scripted"]
    test.refresh_from_db()
    assert (test.last_result, test.last_message) == ("passed", "")
