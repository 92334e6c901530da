"""Traces of runs: spans reach an in-memory exporter with the GenAI attributes and the run's
structure (one trace per run, steps under the run's span, calls under their step), branch
evaluations as events with their reasons, content only when the setting says so; and they
reach a real OTLP/HTTP receiver through the exporter the environment configures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from knowledge.ingest import add_document, create_base, ingest_document
from runner import advance, services, tracing
from runner.models import Run
from runner.status import RUNNABLE
from tests.factories import ActorFactory, UserFactory
from tests.runner.otlp_receiver import OtlpReceiver, attributes_of
from tests.runner.providers.stub_server import StubServer, error, reply, stub_server, tool_calls
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

TOPIC = "a lighthouse keeper called Wren-4417"
LOW = json.dumps(
    {"relevance": 2, "helpfulness": 2, "accuracy": 2, "completeness": 2, "feedback": "Say more."}
)
HIGH = json.dumps({"relevance": 25, "helpfulness": 25, "accuracy": 25, "completeness": 25})
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SHORT = "Wren lit the lamp."
LONG = "Wren lit the lamp every night, and one stormy night a ship found its way home."


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Trace into memory, each span exported as it ends; off again after the test."""
    exporter = InMemorySpanExporter()
    tracing.configure(tracing.make_provider(SimpleSpanProcessor(exporter)))
    yield exporter
    tracing.configure(None)


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="tracer")


def publish(owner: Any, document: dict[str, Any]) -> Recipe:
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def run_step_by_step(owner: Any, recipe: Recipe, inputs: dict[str, Any], script: Any) -> Run:
    """Start a run and execute it one step per `advance` (a fresh claim each time, as
    separate Celery tasks would), until it stops."""
    run = services.run_start(user=owner, recipe=recipe, inputs=inputs, script=script)
    for _ in range(20):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance.advance(run.pk, time_slice=0)
    raise AssertionError(f"run {run.pk} did not stop: {run.status}")


def default(target: str) -> dict[str, Any]:
    return {
        "name": "onward",
        "priority": 999,
        "when": {"type": "default"},
        "action": "CONTINUE",
        "target": target,
    }


def story_document() -> dict[str, Any]:
    """A step with a validation loop judged by `judge` and a branch the judge scores, then a
    second step."""
    return {
        "format": "branchline.recipe/v1",
        "slug": "traced-story",
        "name": "Traced story",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": "tr-writer", "judge": "tr-judge"},
        "steps": [
            {
                "key": "write",
                "name": "Write",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write a story about {topic}.",
                "validation": {
                    "threshold": 0.75,
                    "max_attempts": 3,
                    "judge": "judge",
                    "fallback": "No story.",
                },
                "branches": [
                    {
                        "name": "too_short",
                        "priority": 1,
                        "when": {"type": "length_check", "operator": "less_than", "value": 10},
                        "action": "REQUEST_MORE_DETAIL",
                        "target": "@repeat",
                    },
                    {
                        "name": "great",
                        "priority": 2,
                        "when": {
                            "type": "ai_evaluation",
                            "operator": "greater_equal",
                            "value": 8,
                            "evaluator": "judge",
                            "prompt": "Rate the story 1-10",
                        },
                        "action": "CONTINUE",
                        "target": "polish",
                    },
                    default("@complete"),
                ],
            },
            {
                "key": "polish",
                "name": "Polish",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Polish this story: {steps.write.response}",
                "branches": [default("@complete")],
            },
        ],
    }


@pytest.fixture
def story(owner: Any) -> Recipe:
    ActorFactory(name="tr-writer", config={"replies": ["unused"]})
    ActorFactory(name="tr-judge", config={"replies": ["unused"]})
    return publish(owner, story_document())


STORY_SCRIPT = {"writer": [SHORT, LONG, "Polished."], "judge": [LOW, HIGH, "9"]}


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def every_text(span: ReadableSpan) -> str:
    """Return everything a span says: its attributes and its events' attributes."""
    values = [str(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        values += [str(v) for v in (event.attributes or {}).values()]
    return "\n".join(values)


def test_a_run_is_one_trace_of_steps_under_the_runs_span_and_calls_under_their_step(
    owner: Any, story: Recipe, spans: InMemorySpanExporter
) -> None:
    run = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)

    assert run.status == "succeeded", run.error
    finished = spans.get_finished_spans()
    trace_id = tracing.trace_id_of(run.pk, run.created_at)
    assert {s.context.trace_id for s in finished} == {trace_id}
    [root] = by_name(finished, "invoke_workflow traced-story")
    assert root.parent is None
    assert root.context.span_id == tracing.root_span_id_of(run.pk, run.created_at)
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["gen_ai.workflow.name"] == "traced-story"
    assert root.attributes["branchline.run.status"] == "succeeded"
    assert root.start_time == (run.created_at - EPOCH) // timedelta(microseconds=1) * 1000
    [write] = by_name(finished, "step write")
    [polish] = by_name(finished, "step polish")
    for step in (write, polish):
        assert parent_id(step) == root.context.span_id
        assert step.parent is not None and step.parent.is_remote
    assert write.attributes["branchline.step.kind"] == "llm"
    assert write.attributes["branchline.step.seq"] == 1
    assert polish.attributes["branchline.step.seq"] == 2
    assert write.attributes["branchline.step.actor"] == "writer"
    assert write.attributes["branchline.step.status"] == "succeeded"
    assert write.attributes["branchline.next"] == "polish"
    assert polish.attributes["branchline.next"] == "@complete"
    calls = [s for s in finished if s.name.startswith("chat")]
    # Two answers and two validation judgements, the branch's judge, the polish.
    assert [parent_id(s) for s in calls] == [write.context.span_id] * 5 + [polish.context.span_id]
    for call in calls:
        assert call.kind == SpanKind.CLIENT
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.provider.name"] == "branchline.scripted"
        assert call.attributes["gen_ai.request.model"] == "script"
        assert call.start_time >= write.start_time
    assert [c.attributes["branchline.actor"] for c in calls] == [
        "writer",
        "judge",
        "writer",
        "judge",
        "judge",
        "writer",
    ]
    purposes = [c.attributes["branchline.call.purpose"] for c in calls]
    assert purposes[0] == purposes[5] == "answer"
    assert purposes[1] == purposes[3] == "judge"
    assert purposes[4] == "evaluation"


def test_a_steps_span_holds_its_confidence_validation_attempts_and_branch_events_with_reasons(
    owner: Any, story: Recipe, spans: InMemorySpanExporter
) -> None:
    run = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)

    stored = run.steps.get(step_key="write")
    [write] = by_name(spans.get_finished_spans(), "step write")
    assert write.attributes["branchline.validation.attempts"] == 2
    assert write.attributes["branchline.validation.used_fallback"] is False
    assert write.attributes["branchline.step.confidence"] == pytest.approx(stored.confidence)
    events = [e for e in write.events if e.name == "branch.evaluated"]
    assert [
        (
            e.attributes["branch.name"],
            e.attributes.get("branch.matched", False),
            e.attributes.get("branch.taken", False),
            e.attributes["branch.reason"],
        )
        for e in events
    ] == [(e.branch, e.matched, e.taken, e.reason) for e in stored.evaluations.order_by("order")]
    assert [e.attributes["branch.name"] for e in events] == ["too_short", "great"]
    assert "judge scored 9" in events[1].attributes["branch.reason"]


def test_prompts_and_answers_stay_out_of_spans_unless_the_setting_asks_for_them(
    owner: Any, story: Recipe, spans: InMemorySpanExporter, settings: Any
) -> None:
    run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)
    quiet = spans.get_finished_spans()
    spans.clear()
    settings.TRACE_CONTENT = True
    run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)
    told = spans.get_finished_spans()

    for span in quiet:
        assert "Wren" not in every_text(span), span.name
        assert "gen_ai.input.messages" not in (span.attributes or {})
    first = next(s for s in told if s.name.startswith("chat"))
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": f"Write a story about {TOPIC}."}]}
    ]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": SHORT}],
            "finish_reason": "stop",
        }
    ]


def test_two_runs_have_two_traces_whose_ids_the_run_alone_gives(
    owner: Any, story: Recipe, spans: InMemorySpanExporter
) -> None:
    first = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)
    second = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)

    traces = {s.context.trace_id for s in spans.get_finished_spans()}
    assert traces == {
        tracing.trace_id_of(first.pk, first.created_at),
        tracing.trace_id_of(second.pk, second.created_at),
    }
    assert len(tracing.trace_id_hex(first.pk, first.created_at)) == 32
    # Another database's run with the same id, made at another time, has another trace.
    other = datetime(2020, 1, 1, tzinfo=UTC)
    assert tracing.trace_id_of(first.pk, other) != tracing.trace_id_of(first.pk, first.created_at)


def test_a_cancelled_run_still_gets_its_own_span(
    owner: Any, story: Recipe, spans: InMemorySpanExporter
) -> None:
    run = services.run_start(user=owner, recipe=story, inputs={"topic": TOPIC}, script=None)
    run = Run.objects.select_related("recipe").get(pk=run.pk)

    services.run_cancel(run=run)

    [root] = spans.get_finished_spans()
    assert root.context.span_id == tracing.root_span_id_of(run.pk, run.created_at)
    assert root.attributes["branchline.run.status"] == "cancelled"


# -- model calls over HTTP, tools, failures -------------------------------------------------


@pytest.fixture
def stub_model(stub_server: StubServer, settings: Any) -> Actor:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    return ActorFactory(
        name="tr-stub",
        provider=Actor.Provider.OPENAI,
        model="stub-1",
        base_url=stub_server.base_url,
        api_key_env="",
        config={},
        timeout_s=5,
    )


def tool_loop_document() -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": "traced-tools",
        "name": "Traced tools",
        "inputs": {"a": {"type": "string", "required": True}},
        "actors": {"model": "tr-stub"},
        "steps": [
            {
                "key": "ask",
                "name": "Ask",
                "actor": "model",
                "prompt": "What is {a} + 3?",
                "tools": ["demo.add"],
                "branches": [default("@complete")],
            }
        ],
    }


def test_a_tool_loop_traces_each_turn_with_its_usage_and_each_tool_call(
    owner: Any,
    stub_model: Actor,
    stub_server: StubServer,
    spans: InMemorySpanExporter,
    settings: Any,
) -> None:
    settings.TRACE_CONTENT = True
    stub_server.enqueue(
        tool_calls(("demo__add", {"a": 2, "b": 3}), usage=(5, 3)), reply("It is 5.", usage=(9, 4))
    )
    recipe = publish(owner, tool_loop_document())

    run = run_step_by_step(owner, recipe, {"a": "2"}, {"tool.demo.add": ["5"]})

    assert run.status == "succeeded", run.error
    finished = spans.get_finished_spans()
    [step] = by_name(finished, "step ask")
    first, second = by_name(finished, "chat stub-1")
    [tool] = by_name(finished, "execute_tool demo.add")
    assert [parent_id(s) for s in (first, tool, second)] == [step.context.span_id] * 3
    assert first.start_time < tool.start_time < second.start_time
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "stub-1"
    assert (
        first.attributes["gen_ai.usage.input_tokens"],
        first.attributes["gen_ai.usage.output_tokens"],
    ) == (5, 3)
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (
        second.attributes["gen_ai.usage.input_tokens"],
        second.attributes["gen_ai.usage.output_tokens"],
    ) == (9, 4)
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "demo.add"
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert tool.attributes["gen_ai.tool.call.result"] == "5"
    assert "error.type" not in tool.attributes
    # The second turn was sent the conversation: the tool's answer is in its input.
    messages = json.loads(second.attributes["gen_ai.input.messages"])
    assert messages == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2 + 3?"}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_0",
                    "name": "demo__add",
                    "arguments": '{"a": 2, "b": 3}',
                }
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_0", "result": "5"}]},
    ]


def test_a_failed_model_call_and_a_failed_tool_call_say_what_failed(
    owner: Any, stub_model: Actor, stub_server: StubServer, spans: InMemorySpanExporter
) -> None:
    stub_server.enqueue(error(400, "bad request"))
    failing = publish(owner, {**tool_loop_document(), "slug": "traced-failure"})
    failed = run_step_by_step(owner, failing, {"a": "2"}, {"tool.demo.add": ["5"]})
    tool_step = {
        "format": "branchline.recipe/v1",
        "slug": "traced-tool-step",
        "name": "Traced tool step",
        "inputs": {"a": {"type": "string", "required": True}},
        "actors": {},
        "steps": [
            {
                "key": "add",
                "name": "Add",
                "kind": "tool",
                "tool": "demo.add",
                "arguments": {"a": "{a}", "b": "2"},
                "branches": [],
            }
        ],
    }
    down = run_step_by_step(
        owner, publish(owner, tool_step), {"a": "2"}, {"tool.demo.add": ["@error: down"]}
    )

    assert failed.status == "failed" and down.status == "failed"
    finished = spans.get_finished_spans()
    [call] = by_name(finished, "chat stub-1")
    assert call.attributes["error.type"] == "400"
    assert call.status.status_code == StatusCode.ERROR
    [step] = by_name(finished, "step ask")
    assert step.attributes["error.type"] == "failed"
    assert step.status.status_code == StatusCode.ERROR
    [tool] = by_name(finished, "execute_tool demo.add")
    assert tool.attributes["error.type"] == "call_failed"
    assert tool.status.status_code == StatusCode.ERROR
    roots = [s for s in finished if s.name.startswith("invoke_workflow")]
    assert {r.attributes["branchline.run.status"] for r in roots} == {"failed"}
    assert {r.attributes["error.type"] for r in roots} == {"run_failed"}


def test_a_search_of_a_knowledge_base_is_a_retrieval_span_of_its_step_holding_the_embedding(
    owner: Any, spans: InMemorySpanExporter
) -> None:
    embedder = ActorFactory(name="tr-embedder", config={})
    base = create_base(owner=owner, slug="tr-docs", name="Docs", embedding_actor=embedder)
    document, _ = add_document(base, owner, "lamp.md", b"# Lamp\n\nThe keeper lights the lamp.")
    ingest_document(document.pk)
    find = {
        "key": "find",
        "name": "Find",
        "kind": "retrieve",
        "sources": [{"knowledge_base": "tr-docs", "mode": "hybrid", "top_k": 4}],
        "branches": [default("@complete")],
    }
    recipe = publish(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "traced-search",
            "name": "Traced search",
            "inputs": {"question": {"type": "string", "required": True}},
            "actors": {},
            "steps": [find],
        },
    )

    run = run_step_by_step(owner, recipe, {"question": "Who lights the lamp?"}, None)

    assert run.status == "succeeded", run.error
    finished = spans.get_finished_spans()
    [step] = by_name(finished, "step find")
    [search] = by_name(finished, "retrieval tr-docs")
    assert parent_id(search) == step.context.span_id
    assert search.attributes["gen_ai.operation.name"] == "retrieval"
    assert search.attributes["gen_ai.data_source.id"] == "tr-docs"
    assert search.attributes["gen_ai.retrieval.top_k"] == 4
    assert search.attributes["branchline.retrieval.mode"] == "hybrid"
    assert search.attributes["branchline.retrieval.hits"] == 1
    assert "gen_ai.retrieval.query.text" not in search.attributes
    # Searching by meaning embedded the query: the knowledge base's model call, timed there.
    [embedding] = by_name(finished, "embeddings")
    assert parent_id(embedding) == search.context.span_id
    assert embedding.kind == SpanKind.CLIENT
    assert embedding.attributes["gen_ai.operation.name"] == "embeddings"
    assert embedding.attributes["gen_ai.provider.name"] == "branchline.scripted"
    assert search.start_time <= embedding.start_time <= embedding.end_time <= search.end_time


# -- configuration --------------------------------------------------------------------------


def test_tracing_is_off_without_an_otlp_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in tracing.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert tracing.exporting_provider() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.exporting_provider() is None


def test_off_every_helper_hands_back_the_same_object_that_does_nothing(
    owner: Any, story: Recipe
) -> None:
    tracing.configure(None)  # as a process without an OTLP endpoint is set up
    run = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)

    assert run.status == "succeeded"
    assert tracing.tool_call_span("demo.add") is tracing.tool_call_span("demo.other")
    assert tracing.retrieval_span("kb", "q", mode="fulltext", top_k=3).span is None


def test_a_provider_without_derived_ids_is_refused() -> None:
    with pytest.raises(ValueError, match="make_provider"):
        tracing.configure(TracerProvider())


def test_spans_reach_an_otlp_http_receiver_the_environment_names(
    owner: Any, story: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as receiver:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        provider = tracing.exporting_provider()
        assert provider is not None
        tracing.configure(provider)
        try:
            run = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)
            assert provider.force_flush(timeout_millis=10_000)
        finally:
            tracing.configure(None)
            provider.shutdown()
        received = receiver.received()

    assert receiver.requests >= 1
    trace_id = tracing.trace_id_of(run.pk, run.created_at).to_bytes(16, "big")
    assert {s.trace_id for s in received} == {trace_id}
    names = sorted(s.name for s in received)
    assert names == sorted(
        ["invoke_workflow traced-story", "step write", "step polish"] + ["chat script"] * 6
    )
    root = next(s for s in received if s.name.startswith("invoke_workflow"))
    write = next(s for s in received if s.name == "step write")
    assert write.parent_span_id == root.span_id
    assert attributes_of(write)["branchline.validation.attempts"] == 2
    assert [e.name for e in write.events] == ["branch.evaluated", "branch.evaluated"]
    chats = [s for s in received if s.name == "chat script"]
    assert all(attributes_of(c)["gen_ai.operation.name"] == "chat" for c in chats)


@pytest.mark.parametrize(
    ("sampler", "arg", "kept"), [("always_off", "", False), ("traceidratio", "1.0", True)]
)
def test_a_sampler_the_environment_names_decides_which_spans_are_kept(
    owner: Any, story: Recipe, monkeypatch: pytest.MonkeyPatch, sampler: str, arg: str, kept: bool
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", arg)
    exporter = InMemorySpanExporter()
    tracing.configure(tracing.make_provider(SimpleSpanProcessor(exporter)))
    try:
        run = run_step_by_step(owner, story, {"topic": TOPIC}, STORY_SCRIPT)
    finally:
        tracing.configure(None)

    assert run.status == "succeeded"
    names = sorted(span.name for span in exporter.get_finished_spans())
    if kept:
        assert names == sorted(
            ["invoke_workflow traced-story", "step write", "step polish"] + ["chat script"] * 6
        )
    else:
        assert names == []
