"""Tools in runs: tool steps call a real MCP server (the demo server over stdio, the test
server over HTTP) or take a dry run's script's answers; llm steps with tools run the model's
tool loop through real HTTP to the stub server; every call is kept on the StepRun, pushed live
and read by the tool conditions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.base import ContentFile

from runner import events, services
from runner.inputs import InputsInvalid
from runner.models import Run, RunFile, StepRun
from tests.documents import png
from tests.factories import ActorFactory, UserFactory
from tests.runner.providers.stub_server import StubServer, reply, stub_server, tool_calls
from tests.runner.providers.wire_formats import gemini_signature
from tests.runner.recipes import branch, drive, publish_document, steps, stub_actor
from tests.tools.mcp_server import McpTestServer
from tools.client import discover
from tools.models import ToolServer
from workflows.models import Actor, Recipe

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="tooluser")


@pytest.fixture
def pushed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Collect the tool calls pushed live (through the schema-checked event builder)."""
    seen: list[dict[str, Any]] = []

    def push(run_id: int, seq: int, call: dict[str, Any]) -> None:
        seen.append(events.step_tool_call(seq=seq, call=call).data)

    monkeypatch.setattr(events, "push_tool_call", push)
    return seen


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpTestServer]:
    with McpTestServer() as server:
        yield server


@pytest.fixture
def demo_server(db: None) -> ToolServer:
    """The demo server over stdio, its tools discovered (as seed_demo does)."""
    server = ToolServer.objects.create(
        name="demo", transport=ToolServer.Transport.STDIO, command="demo", timeout_s=30
    )
    discover(server)
    return server


@pytest.fixture
def remote(mcp_server: McpTestServer, settings: Any) -> ToolServer:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1"]
    server = ToolServer.objects.create(
        name="remote", transport=ToolServer.Transport.HTTP, url=mcp_server.url, timeout_s=10
    )
    discover(server)
    return server


def publish(
    owner: Any,
    steps: list[dict[str, Any]],
    *,
    actors: dict[str, str] | None = None,
    slug: str = "tools",
) -> Recipe:
    document = {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"a": {"type": "string", "required": True}, "b": {"type": "string"}},
        "actors": actors or {},
        "steps": steps,
    }
    return publish_document(owner, document)


def run(user: Any, recipe: Recipe, script: Any = None, **inputs: Any) -> Run:
    return drive(
        services.run_start(
            user=user, recipe=recipe, inputs={"a": "2", "b": "3", **inputs}, script=script
        )
    )


def reasons(step_run: StepRun) -> dict[str, str]:
    return {e.branch: e.reason for e in step_run.evaluations.all()}


def add_step(**fields: Any) -> dict[str, Any]:
    return {
        "key": "add",
        "name": "Add",
        "kind": "tool",
        "tool": "demo.add",
        "arguments": {"a": "{a}", "b": "{b}"},
        "branches": fields.pop("branches", []),
        **fields,
    }


SAY = {
    "key": "say",
    "name": "Say",
    "kind": "llm",
    "actor": "writer",
    "prompt": "Answer {steps.add.response}",
    "branches": [],
}


# -- tool steps, scripted ---------------------------------------------------------------------


def test_a_scripted_tool_step_answers_overlays_the_facts_and_records_the_call(
    owner: Any, pushed: list[dict[str, Any]]
) -> None:
    ActorFactory(name="t-writer", config={"replies": ["fine"]})
    big = {
        "type": "tool_result",
        "operator": "greater_equal",
        "tool": "demo.add",
        "field": "total",
        "value": 3,
    }
    not_five = {"type": "field_compare", "operator": "not_equals", "field": "total", "value": 5}
    recipe = publish(
        owner,
        [
            add_step(
                branches=[branch("not_five", 1, not_five, "@end"), branch("big", 2, big, "say")]
            ),
            SAY,
        ],
        actors={"writer": "t-writer"},
    )

    done = run(owner, recipe, script={"tool.demo.add": [{"total": 5}]})

    assert done.status == "succeeded", done.error
    add, say = steps(done)["add"], steps(done)["say"]
    assert json.loads(add.response) == {"total": 5}
    assert add.details["tool_calls"] == [
        {
            "tool": "demo.add",
            "arguments": {"a": "2", "b": "3"},
            "scripted": True,
            "result": '{"total": 5}',
            "is_error": False,
            "truncated": False,
            "latency_ms": 0,
        }
    ]
    assert reasons(add)["big"] == "tool demo.add field total 5 >= 3"
    assert say.prompt == 'Answer {"total": 5}'
    assert reasons(add)["not_five"] == "field total 5 == 5"  # the JSON overlaid the facts
    assert [(p["seq"], p["tool"], p["result"]) for p in pushed] == [
        (add.seq, "demo.add", '{"total": 5}')
    ]


def test_a_scripted_tool_error_fails_the_step_unless_a_branch_handles_it(owner: Any) -> None:
    ActorFactory(name="t-writer", config={"replies": ["sorry"]})
    failed = {"type": "tool_error", "operator": "failed", "tool": "demo.add"}
    handled = publish(
        owner,
        [add_step(branches=[branch("broke", 1, failed, "say")]), {**SAY, "prompt": "Sorry"}],
        actors={"writer": "t-writer"},
    )

    done = run(owner, handled, script={"tool.demo.add": ["@error: the calculator is down"]})

    assert done.status == "succeeded", done.error
    add = steps(done)["add"]
    assert add.status == "failed"
    assert add.error == "the calculator is down"
    assert reasons(add)["broke"] == "demo.add failed: the calculator is down"

    unhandled = publish(owner, [add_step()], slug="unhandled")
    failed_run = run(owner, unhandled, script={"tool.demo.add": "@error: down"})
    assert failed_run.status == "failed"
    assert "down" in failed_run.error


def test_a_script_for_a_tool_no_step_calls_is_refused(owner: Any) -> None:
    recipe = publish(owner, [add_step()])

    with pytest.raises(InputsInvalid) as raised:
        services.run_start(
            user=owner, recipe=recipe, inputs={"a": "1"}, script={"tool.demo.nope": ["1"]}
        )

    assert raised.value.errors == [
        "script.tool.demo.nope: no step of this recipe calls the tool 'demo.nope'"
    ]


# -- tool steps, real servers -------------------------------------------------------------------


def test_a_tool_step_calls_the_demo_server_over_stdio_with_typed_arguments(
    owner: Any, demo_server: ToolServer
) -> None:
    above = {"type": "tool_result", "operator": "greater_than", "tool": "demo.add", "value": 4}
    recipe = publish(owner, [add_step(branches=[branch("big", 1, above, "@complete")])])

    done = run(owner, recipe)

    add = steps(done)["add"]
    assert done.status == "succeeded", done.error
    assert add.response == "5.0"
    call = add.details["tool_calls"][0]
    assert call["arguments"] == {"a": 2, "b": 3}  # "2" typed as the schema's number
    assert call["is_error"] is False and call["latency_ms"] > 0
    assert reasons(add)["big"] == "tool demo.add result 5 > 4"


def test_an_unknown_tool_fails_the_step_with_a_clear_message(
    owner: Any, demo_server: ToolServer
) -> None:
    recipe = publish(owner, [add_step(tool="demo.divide")])

    done = run(owner, recipe)

    assert done.status == "failed"
    assert steps(done)["add"].error == "unknown tool 'demo.divide'"


def test_arguments_the_schema_refuses_are_not_sent(owner: Any, demo_server: ToolServer) -> None:
    recipe = publish(owner, [add_step()])

    done = run(owner, recipe, a="two")

    add = steps(done)["add"]
    assert add.status == "failed"
    assert "arguments of 'add' refused" in add.error
    assert add.details["tool_calls"][0]["arguments"] == {"a": "two", "b": 3}


def test_a_tool_step_over_http_reads_json_and_times_out_quickly(
    owner: Any, remote: ToolServer
) -> None:
    echo = add_step(tool="remote.echo", arguments={"text": "{a}", "times": "{b}"})
    slow = {
        "key": "slow",
        "name": "Slow",
        "kind": "tool",
        "tool": "remote.slow",
        "arguments": {"seconds": "30"},
        "timeout_s": 1,
        "branches": [
            branch(
                "too_slow",
                1,
                {"type": "tool_error", "operator": "failed"},
                "@end",
                action="END_RECIPE",
            )
        ],
    }
    recipe = publish(owner, [echo, slow])

    done = run(owner, recipe, a="ab")

    add, slow_run = steps(done)["add"], steps(done)["slow"]
    assert json.loads(add.response) == {"text": "ababab", "times": 3}
    assert slow_run.status == "failed"
    assert slow_run.latency_ms is not None and slow_run.latency_ms < 10_000
    assert "remote.slow failed" in reasons(slow_run)["too_slow"]


# -- the model's tool loop, through the stub server ---------------------------------------------


@pytest.fixture
def stub_model(stub_server: StubServer, settings: Any) -> Actor:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    return stub_actor(stub_server, "t-stub")


def ask_step(**fields: Any) -> dict[str, Any]:
    return {
        "key": "ask",
        "name": "Ask",
        "actor": "model",
        "prompt": "What is {a} + {b}?",
        "tools": ["demo.add", "demo.multiply"],
        "branches": fields.pop("branches", []),
        **fields,
    }


def test_the_model_calls_a_tool_and_answers_with_its_result(
    owner: Any,
    stub_model: Actor,
    stub_server: StubServer,
    demo_server: ToolServer,
    pushed: list[dict[str, Any]],
) -> None:
    stub_server.enqueue(
        tool_calls(("demo__add", {"a": 2, "b": 3}), usage=(5, 3)), reply("It is 5.", usage=(9, 4))
    )
    called = {"type": "tool_called", "operator": "called", "tool": "demo.add"}
    recipe = publish(
        owner,
        [ask_step(branches=[branch("used", 1, called, "@complete")])],
        actors={"model": "t-stub"},
    )

    done = run(owner, recipe)

    ask = steps(done)["ask"]
    assert done.status == "succeeded", done.error
    assert ask.response == "It is 5."
    assert (ask.tokens_in, ask.tokens_out) == (14, 7)
    assert [(c["tool"], c["arguments"], c["result"]) for c in ask.details["tool_calls"]] == [
        ("demo.add", {"a": 2, "b": 3}, "5.0")
    ]
    assert reasons(ask)["used"] == "called demo.add once"
    first, second = stub_server.chat_requests
    offered = [t["function"]["name"] for t in first.json["tools"]]
    assert offered == ["demo__add", "demo__multiply"]
    assert first.json["tools"][0]["function"]["parameters"]["properties"]["a"]
    assert [m["role"] for m in second.json["messages"]] == ["user", "assistant", "tool"]
    assert second.json["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "5.0",
    }
    assert [p["tool"] for p in pushed] == ["demo.add"]


def test_every_turn_of_the_tool_loop_shows_the_steps_images(
    owner: Any, stub_model: Actor, stub_server: StubServer, demo_server: ToolServer
) -> None:
    stub_server.enqueue(tool_calls(("demo__add", {"a": 2, "b": 3})), reply("It is 5."))
    document = {
        "format": "branchline.recipe/v1",
        "slug": "sums-in-pictures",
        "name": "Sums in pictures",
        "inputs": {"a": {"type": "string"}, "b": {"type": "string"}, "photo": {"type": "file"}},
        "actors": {"model": "t-stub"},
        "steps": [ask_step(images=["photo"])],
    }
    stub_model.capabilities = ["vision", "tools"]  # images need vision declared
    stub_model.save(update_fields=["capabilities"])
    recipe = publish_document(owner, document)
    started = services.run_start(user=owner, recipe=recipe, inputs={"a": "2", "b": "3"})
    picture = png(4, 4)
    RunFile.objects.create(
        run=started,
        input_name="photo",
        name="sum.png",
        media_type="image/png",
        size=len(picture),
        sha256="0" * 64,
        blob=ContentFile(picture, name="sum.png"),
    )

    done = drive(started)

    assert done.status == "succeeded", done.error
    first, second = stub_server.chat_requests
    for sent in (first, second):
        question = sent.json["messages"][0]["content"]
        assert question[0] == {"type": "text", "text": "What is 2 + 3?"}
        assert question[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert [m["role"] for m in second.json["messages"]] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("provider", [Actor.Provider.ANTHROPIC, Actor.Provider.GEMINI])
def test_an_anthropic_or_gemini_model_goes_round_its_tool_loop_in_its_apis_form(
    owner: Any,
    stub_server: StubServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    monkeypatch.setenv("BRANCHLINE_TEST_TOOLS_KEY", "sk-tools-test-key")
    ActorFactory(
        name="t-native",
        provider=provider,
        model="native-1",
        base_url=stub_server.url,
        api_key_env="BRANCHLINE_TEST_TOOLS_KEY",
        config={},
        timeout_s=5,
    )
    stub_server.enqueue(
        tool_calls(("demo__add", {"a": 2, "b": 3}), usage=(5, 3)), reply("It is 5.", usage=(9, 4))
    )
    recipe = publish(owner, [ask_step()], actors={"model": "t-native"})

    done = run(owner, recipe, script={"tool.demo.add": ["5"], "tool.demo.multiply": ["6"]})

    ask = steps(done)["ask"]
    assert done.status == "succeeded", done.error
    assert (ask.response, ask.tokens_in, ask.tokens_out) == ("It is 5.", 14, 7)
    assert [(c["tool"], c["arguments"]) for c in ask.details["tool_calls"]] == [
        ("demo.add", {"a": 2, "b": 3})
    ]
    second = stub_server.chat_requests[1].json
    if provider == Actor.Provider.GEMINI:
        model_turn, results = second["contents"][1:]
        # The call goes back with the thought signature it came with (Gemini 3 needs it).
        assert model_turn["parts"][0]["thoughtSignature"] == gemini_signature(0)
        assert results["parts"][0]["functionResponse"]["name"] == "demo__add"
        assert results["parts"][0]["functionResponse"]["response"] == {"output": "5"}
    else:
        assistant, results = second["messages"][1:]
        assert assistant["content"][0]["name"] == "demo__add"
        assert results["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_0", "content": "5"}
        ]


def test_a_tool_the_model_was_not_given_is_answered_with_an_error_not_a_crash(
    owner: Any, stub_model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(tool_calls(("demo__rm_rf", {})), reply("I cannot do that."))
    failed = {"type": "tool_error", "operator": "failed"}
    recipe = publish(
        owner,
        [ask_step(branches=[branch("tool_failed", 1, failed, "@complete")])],
        actors={"model": "t-stub"},
    )

    done = run(owner, recipe, script={"tool.demo.add": ["5"], "tool.demo.multiply": ["6"]})

    ask = steps(done)["ask"]
    assert done.status == "succeeded", done.error
    assert ask.response == "I cannot do that."
    call = ask.details["tool_calls"][0]
    assert call["tool"] == "demo__rm_rf" and call["is_error"] is True
    assert "offers no tool 'demo__rm_rf'" in call["error"]
    sent = stub_server.chat_requests[1].json["messages"][2]["content"]
    assert sent.startswith("error: the step offers no tool 'demo__rm_rf'")
    assert reasons(ask)["tool_failed"].startswith("demo__rm_rf failed: the step offers no tool")


def test_the_call_cap_asks_once_more_without_tools_then_fails_a_model_that_will_not_stop(
    owner: Any, stub_model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        tool_calls(("demo__add", {"a": 1, "b": 1}), ("demo__add", {"a": 2, "b": 2})),
        reply("Done: 2."),
    )
    recipe = publish(owner, [ask_step(max_tool_calls=1)], actors={"model": "t-stub"})
    script = {"tool.demo.add": ["2", "4"], "tool.demo.multiply": ["6"]}

    done = run(owner, recipe, script=script)

    ask = steps(done)["ask"]
    assert done.status == "succeeded", done.error
    assert len(ask.details["tool_calls"]) == 1
    last = stub_server.chat_requests[-1].json
    assert "tools" not in last
    assert last["messages"][-1]["content"].startswith("not called: the limit of 1 tool calls")

    stub_server.enqueue(tool_calls(("demo__add", {"a": 1, "b": 1})), tool_calls(("demo__add", {})))
    stubborn = run(owner, recipe, script=script)
    assert stubborn.status == "failed"
    assert "asked for tools again after its 1 tool calls" in stubborn.error


def test_the_loop_times_out_after_max_tool_seconds(
    owner: Any, stub_model: Actor, stub_server: StubServer, remote: ToolServer, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address, "127.0.0.1"]
    stub_server.enqueue(tool_calls(("remote__slow", {"seconds": 30})))
    timeout = {"type": "execution_timeout", "operator": "equals", "value": True}
    recipe = publish(
        owner,
        [
            ask_step(
                tools=["remote.slow"],
                max_tool_seconds=2,
                branches=[branch("late", 1, timeout, "@end", action="END_RECIPE")],
            )
        ],
        actors={"model": "t-stub"},
    )

    done = run(owner, recipe)

    ask = steps(done)["ask"]
    assert ask.status == "timed_out"
    assert "max_tool_seconds 2 s" in ask.error
    assert ask.latency_ms is not None and ask.latency_ms < 10_000
    assert ask.details["tool_calls"][0]["is_error"] is True


def test_a_scripted_model_asks_for_tool_calls_in_a_dry_run(owner: Any) -> None:
    ActorFactory(name="t-writer", config={"replies": ["unused"]})
    recipe = publish(owner, [ask_step()], actors={"model": "t-writer"})
    script = {
        "model": ['@tool_calls: [{"name": "demo.multiply", "arguments": {"a": 2, "b": 21}}]', "42"],
        "tool.demo.multiply": ["42.0"],
        "tool.demo.add": ["5.0"],
    }

    done = run(owner, recipe, script=script)

    ask = steps(done)["ask"]
    assert done.status == "succeeded", done.error
    assert ask.response == "42"
    assert ask.details["tool_calls"][0]["arguments"] == {"a": 2, "b": 21}


def test_the_call_cap_is_the_steps_not_each_validation_attempts(owner: Any) -> None:
    ActorFactory(name="t-writer", config={"replies": ["unused"]})
    ActorFactory(name="t-judge", config={"replies": ["unused"]})
    validation = {"judge": "judge", "threshold": 0.9, "max_attempts": 3, "fallback": "-"}
    recipe = publish(
        owner,
        [ask_step(max_tool_calls=1, validation=validation)],
        actors={"model": "t-writer", "judge": "t-judge"},
    )
    add = '@tool_calls: [{"name": "demo.add", "arguments": {"a": 1, "b": 1}}]'
    script = {
        # The second attempt asks for a tool again, when the step's one call is used up.
        "model": [add, "first", add, "second"],
        "judge": ['{"relevance": 1, "helpfulness": 1, "accuracy": 1, "completeness": 1}'],
        "tool.demo.add": ["2"],
        "tool.demo.multiply": ["6"],
    }

    done = run(owner, recipe, script=script)

    ask = steps(done)["ask"]
    assert len(ask.details["tool_calls"]) == 1
    assert done.status == "failed"
    assert "asked for tools again after its 1 tool calls" in done.error
