"""OpenTelemetry traces of runs: a run is a trace, a step a span, and each model call, tool
call and knowledge-base search a child span of its step (the GenAI semantic conventions:
`gen_ai.operation.name` chat / execute_tool / retrieval / embeddings, `gen_ai.request.model`,
`gen_ai.provider.name`, `gen_ai.usage.*`, `gen_ai.tool.name`, `error.type`). Every span is
made here.

**One trace per run, across processes.** A run's steps execute in different Celery tasks,
often in different processes, and nothing is handed from one to the next but the run's id. So
the trace is derived from the run: its trace id is 128 bits of a hash of the run's id and
creation time (`trace_id_of`; the time tells apart two databases' run 7), and the id of the
run's own span is derived the same way (`root_span_id_of`). Each step span names that span as
its parent (a remote SpanContext); no database field holds any of it, and the monitor shows
the same id (`trace_id_hex`, `trace_url`).

**The run's own span is emitted when the run ends** (`run_finished`): by the commit of the
step that ends it (`runner.advance`) or by a cancel (`runner.services.run_cancel`), starting at
the run's creation and ending then, with the ids derived above (`_RunIds` hands them to the
SDK for that one span). Until then a tracing backend shows the run's steps under a parent
it has not received yet. A run failed before any step could be claimed (its version no longer
parses, its step was lost too many times) has no step spans and no run span.

**A step span** covers the step's execution (`step_span`, around the executor in
`runner.advance`): the kind, actor, seq and attempt, then its status, confidence and
validation attempts, where the run goes next, and each branch evaluated as a
`branch.evaluated` event with its reason. The model calls it makes (`model_call_span`, in
`Session.ask`: the answer, validation attempts, the judge, evaluators, a classifier, a tool
loop's turns, each with its tokens), its tool calls (`tool_call_span`) and its searches
(`retrieval_span`, holding the embedding of the query: `embeddings_call`) are its children.
Spans carry few attributes: each costs the step a little and its export more
(`benchmarks/tracing_overhead.py`).

**Configuration.** Tracing is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not true); the OTLP/HTTP
exporter reads the other `OTEL_EXPORTER_OTLP_*` variables itself (headers, timeout,
compression, certificates), and the resource `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (service name `branchline` unless they give one). `setup` runs
once per process, from the runner app's `ready()` (web servers, the embedded worker that runs
inside them, `celery worker` and its pool's processes, management commands). Off, no SDK
provider exists and every helper returns a shared object that does nothing. On, spans go to
a BatchSpanProcessor: a step only queues them; a background thread exports them.

Prompts, answers, tool arguments and results, and search queries go into spans only when the
setting `TRACE_CONTENT` is on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self

from django.conf import settings
from django.utils import timezone
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from knowledge.embeddings import EmbeddingCall
from workflows import engine

from .actors import ResolvedActor
from .claims import Claim, StepOutcome
from .providers import ChatResult, ProviderError, ProviderTimeoutError
from .status import StepStatus

TRACER_NAME = "branchline.runner"
SERVICE = "branchline"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# What the derived ids hash (a change of it would move every run to a new trace id).
_ID_PREFIX = b"branchline.run/v1:"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

# The GenAI semantic conventions' names (development status: kept here, in one place).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
DATA_SOURCE = "gen_ai.data_source.id"
RETRIEVAL_TOP_K = "gen_ai.retrieval.top_k"
RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
WORKFLOW_NAME = "gen_ai.workflow.name"
ERROR_TYPE = "error.type"
# Our own, under one prefix.
RUN_ID = "branchline.run.id"
# `gen_ai.provider.name` for our providers: an OpenAI-compatible server speaks OpenAI's API.
_PROVIDER_NAMES = {"openai": "openai", "ollama": "ollama", "scripted": "branchline.scripted"}


# --------------------------------------------------------------------------------------------
# Set-up


class _RunIds(RandomIdGenerator):
    """Random ids, except for the span that `preset` asks for: a run's own span, whose ids
    are derived from the run (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._next = threading.local()

    def preset(self, ids: tuple[int, int] | None) -> None:
        """Hand out these ids (trace, span) for the next span this thread starts (a root
        span); None: random ones again."""
        self._next.ids = ids

    def generate_trace_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        return ids[0] if ids else super().generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        if ids:
            self._next.ids = None
            return int(ids[1])
        return super().generate_span_id()


class _State:
    """The tracer in use in this process (None: tracing is off), and its id generator."""

    tracer: trace.Tracer | None = None
    ids: _RunIds | None = None
    set_up = False
    lock = threading.Lock()


def make_provider(*processors: SpanProcessor) -> TracerProvider:
    """Return a tracer provider that gives runs their derived ids, with these processors.

    The resource is read from the standard variables, named `branchline` unless they name it.
    """
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    provider = TracerProvider(resource=resource, id_generator=_RunIds())
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def exporting_provider() -> TracerProvider | None:
    """Return a provider exporting over OTLP/HTTP in batches if the environment sets an OTLP
    endpoint (and does not disable the SDK); None otherwise."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES):
        return None
    # Imported here: a process that does not trace never loads the exporter (nor protobuf).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return make_provider(BatchSpanProcessor(OTLPSpanExporter()))


def configure(provider: TracerProvider | None) -> None:
    """Trace with `provider` from now on in this process (None: turn tracing off)."""
    if provider is None:
        _State.tracer, _State.ids = None, None
        return
    ids = provider.id_generator
    if not isinstance(ids, _RunIds):
        raise ValueError("the provider must come from tracing.make_provider (derived run ids)")
    _State.tracer, _State.ids = provider.get_tracer(TRACER_NAME), ids


def setup() -> None:
    """Turn tracing on in this process if the environment asks for it; once per process."""
    with _State.lock:
        if _State.set_up:
            return
        _State.set_up = True
        configure(exporting_provider())


def enabled() -> bool:
    """Return whether this process records spans."""
    return _State.tracer is not None


# --------------------------------------------------------------------------------------------
# A run's ids


def _derived(run_id: int, created_at: datetime, what: bytes, size: int) -> int:
    micros = (created_at - _EPOCH) // _MICROSECOND
    digest = hashlib.blake2b(
        _ID_PREFIX + f"{run_id}:{micros}:".encode() + what, digest_size=size
    ).digest()
    return int.from_bytes(digest, "big") or 1  # all zeros is the invalid id


def trace_id_of(run_id: int, created_at: datetime) -> int:
    """Return the trace id of a run (128 bits), the same in every process."""
    return _derived(run_id, created_at, b"trace", 16)


def root_span_id_of(run_id: int, created_at: datetime) -> int:
    """Return the span id of a run's own span (64 bits), the parent of its steps' spans."""
    return _derived(run_id, created_at, b"run", 8)


def trace_id_hex(run_id: int, created_at: datetime) -> str:
    """Return the run's trace id as tracing backends show it (32 hex digits)."""
    return trace.format_trace_id(trace_id_of(run_id, created_at))


def trace_url(run_id: int, created_at: datetime) -> str:
    """Return the link to the run's trace (`TRACE_URL_TEMPLATE`), or "" without a template."""
    template: str = settings.TRACE_URL_TEMPLATE
    if not template:
        return ""
    return template.replace("{trace_id}", trace_id_hex(run_id, created_at))


@functools.lru_cache(maxsize=256)
def _run_context(run_id: int, created_at: datetime) -> otel_context.Context:
    """Return a context whose current span is the run's own span, as a remote parent (the
    same for each of the run's steps a worker executes in a row)."""
    parent = trace.SpanContext(
        trace_id_of(run_id, created_at),
        root_span_id_of(run_id, created_at),
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def _nanoseconds(moment: datetime) -> int:
    return int((moment - _EPOCH) // _MICROSECOND) * 1000


# --------------------------------------------------------------------------------------------
# The run's own span


def run_finished(
    *,
    run_id: int,
    created_at: datetime,
    workflow: str,
    status: str,
    outcome: str,
    error: str,
) -> None:
    """Emit the run's own span (the root of its trace), from its creation until now."""
    tracer, ids = _State.tracer, _State.ids
    if tracer is None or ids is None:
        return
    ids.preset((trace_id_of(run_id, created_at), root_span_id_of(run_id, created_at)))
    try:
        span = tracer.start_span(
            f"invoke_workflow {workflow}".strip(),
            context=otel_context.Context(),  # no parent: the root
            kind=SpanKind.INTERNAL,
            start_time=_nanoseconds(created_at),
            attributes={
                OPERATION: "invoke_workflow",
                WORKFLOW_NAME: workflow,
                RUN_ID: run_id,
                "branchline.run.status": status,
                "branchline.run.outcome": outcome,
            },
        )
    finally:
        ids.preset(None)  # a tracer that made no span took no ids: none for the next one
    if status == "failed":
        span.set_attribute(ERROR_TYPE, "run_failed")
        span.set_status(Status(StatusCode.ERROR, error or None))
    span.end(end_time=_nanoseconds(timezone.now()))


# --------------------------------------------------------------------------------------------
# Spans of a step and of its calls


class _Scoped:
    """An open span, ended on leaving the `with`; an exception leaving it is recorded with its
    `error.type`. A span that has children (`PARENT`) is the current one meanwhile, so that
    the spans started inside are its children. Without a span (tracing off), it does
    nothing."""

    PARENT = False

    def __init__(self, span: trace.Span | None = None) -> None:
        self.span = span
        self._token: object = None

    def __enter__(self) -> Self:
        if self.span is not None and self.PARENT:
            self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self.span
        if span is None:
            return
        if exc is not None and isinstance(exc, Exception):
            span.set_attribute(ERROR_TYPE, error_type(exc))
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        span.end()


def error_type(exc: BaseException) -> str:
    """Return the low-cardinality `error.type` of a failure: `timeout`, the HTTP status a
    provider answered, or the exception's class."""
    if isinstance(exc, ProviderTimeoutError):
        return "timeout"
    if isinstance(exc, ProviderError) and exc.status_code is not None:
        return str(exc.status_code)
    return type(exc).__qualname__


def _content() -> bool:
    return bool(settings.TRACE_CONTENT)


def _start(name: str, kind: SpanKind, attributes: dict[str, Any]) -> trace.Span | None:
    tracer = _State.tracer
    if tracer is None:
        return None
    return tracer.start_span(name, kind=kind, attributes=attributes)


class StepSpan(_Scoped):
    """The span of one step execution (see `step_span`): its calls' spans are its children."""

    PARENT = True

    def result(self, outcome: StepOutcome, decision: engine.Decision | None) -> None:
        """Record how the step went and, once the engine decided, the branches it evaluated
        (one `branch.evaluated` event each, with its reason) and where the run goes next."""
        span = self.span
        if span is None:
            return
        # Few attributes: each costs the step a little, and its export more. The step's
        # latency is the span's; its tokens and actor are its calls' (on the chat spans).
        attributes: dict[str, Any] = {"branchline.step.status": outcome.status}
        if outcome.confidence is not None:
            attributes["branchline.step.confidence"] = outcome.confidence
        if outcome.decision:
            attributes["branchline.step.decision"] = outcome.decision  # a reviewer's
        validation = outcome.details.get("validation")
        if isinstance(validation, Mapping):
            attributes["branchline.validation.attempts"] = len(validation.get("attempts") or ())
            attributes["branchline.validation.used_fallback"] = bool(
                validation.get("used_fallback")
            )
        if outcome.status in (StepStatus.FAILED, StepStatus.TIMED_OUT):
            attributes[ERROR_TYPE] = "timeout" if outcome.timed_out else outcome.status
            span.set_status(Status(StatusCode.ERROR, outcome.error or None))
        if decision is not None:
            # The step the run goes to (a repeat names this one), or @complete, @end, @fail.
            attributes["branchline.next"] = decision.next_step or f"@{decision.kind}"
            if decision.kind == "fail":
                attributes["branchline.next.reason"] = decision.reason
            for evaluation in decision.evaluations:
                # `matched` and `taken` only when true (most branches are neither): each
                # attribute costs the step a little and its export more.
                event: dict[str, Any] = {
                    "branch.name": evaluation.branch,
                    "branch.reason": evaluation.reason,
                }
                if evaluation.matched:
                    event["branch.matched"] = True
                if evaluation.taken:
                    event["branch.taken"] = True
                span.add_event("branch.evaluated", event)
        span.set_attributes(attributes)


_STEP_OFF = StepSpan()


def step_span(claim: Claim) -> StepSpan:
    """Open the span of the claimed step, a child of its run's span (use it in a `with`)."""
    tracer = _State.tracer
    if tracer is None:
        return _STEP_OFF
    step = claim.step
    attributes: dict[str, Any] = {
        RUN_ID: claim.run_id,
        "branchline.step.key": step.key,
        "branchline.step.kind": step.kind,
        "branchline.step.seq": claim.seq,
        "branchline.step.attempt": claim.attempt,
    }
    actor = claim.next.get("actor") or step.actor
    if actor:
        attributes["branchline.step.actor"] = actor
    span = tracer.start_span(
        f"step {step.key}",
        context=_run_context(claim.run_id, claim.created_at),
        kind=SpanKind.INTERNAL,
        attributes=attributes,
    )
    return StepSpan(span)


class ModelCallSpan(_Scoped):
    """The span of one call to a model (see `model_call_span`)."""

    def __init__(self, span: trace.Span | None = None, model: str = "") -> None:
        super().__init__(span)
        self.model = model

    def result(self, result: ChatResult) -> None:
        """Record the model's usage (and its answer, with `TRACE_CONTENT`)."""
        span = self.span
        if span is None:
            return
        attributes: dict[str, Any] = {}
        if result.tool_calls:  # otherwise it stopped as models do (no attribute to say so)
            attributes[FINISH_REASONS] = ["tool_calls"]
        if result.model and result.model != self.model:
            attributes[RESPONSE_MODEL] = result.model
        if result.tokens_in is not None:
            attributes[INPUT_TOKENS] = result.tokens_in
        if result.tokens_out is not None:
            attributes[OUTPUT_TOKENS] = result.tokens_out
        if _content():
            parts: list[dict[str, Any]] = [{"type": "text", "content": result.text}]
            parts += [
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                for c in result.tool_calls
            ]
            message = {
                "role": "assistant",
                "parts": parts,
                "finish_reason": "tool_calls" if result.tool_calls else "stop",
            }
            attributes[OUTPUT_MESSAGES] = _json([message])
        span.set_attributes(attributes)


_MODEL_CALL_OFF = ModelCallSpan()


def model_call_span(
    actor: ResolvedActor,
    prompt: str,
    *,
    purpose: str = "answer",
    messages: Sequence[Mapping[str, Any]] | None = None,
) -> ModelCallSpan:
    """Open the span of a call to `actor` (a `chat` span: use it in a `with` around the
    provider call, then give it the ChatResult)."""
    if _State.tracer is None:
        return _MODEL_CALL_OFF
    config = actor.config
    if actor.scripted is not None or config is None:
        provider, model = "scripted", "script"
    else:
        provider, model = config.provider, config.model
    provider_name = _PROVIDER_NAMES.get(provider, provider)
    attributes: dict[str, Any] = {
        OPERATION: "chat",
        PROVIDER: provider_name,
        "branchline.call.purpose": str(purpose),
        "branchline.actor": actor.alias,
    }
    if model:
        attributes[REQUEST_MODEL] = model
    if _content():
        attributes[INPUT_MESSAGES] = _json(_input_messages(prompt, messages))
    return ModelCallSpan(_start(f"chat {model}".strip(), SpanKind.CLIENT, attributes), model)


class ToolCallSpan(_Scoped):
    """The span of one tool call (see `tool_call_span`)."""

    def result(self, record: Mapping[str, Any]) -> None:
        """Record how the call went, from its record (`runner.steps.tool_calls`)."""
        span = self.span
        if span is None:
            return
        attributes: dict[str, Any] = {
            "branchline.tool.is_error": bool(record.get("is_error")),
            "branchline.tool.truncated": bool(record.get("truncated")),
            "branchline.tool.latency_ms": int(record.get("latency_ms") or 0),
        }
        if record.get("scripted"):
            attributes["branchline.tool.scripted"] = True
        if record.get("error"):
            # The call could not be made (unknown tool, refused arguments, server down).
            attributes[ERROR_TYPE] = "call_failed"
            span.set_status(Status(StatusCode.ERROR, str(record["error"])))
        elif record.get("is_error"):
            attributes[ERROR_TYPE] = "tool_error"  # the tool ran and reported a failure
            span.set_status(Status(StatusCode.ERROR))
        if _content():
            attributes[TOOL_ARGUMENTS] = _json(record.get("arguments") or {})
            attributes[TOOL_RESULT] = str(record.get("result") or "")
        span.set_attributes(attributes)


_TOOL_CALL_OFF = ToolCallSpan()


def tool_call_span(tool: str) -> ToolCallSpan:
    """Open the span of a call to `tool` (SERVER.TOOL; an `execute_tool` span)."""
    if _State.tracer is None:
        return _TOOL_CALL_OFF
    attributes = {OPERATION: "execute_tool", TOOL_NAME: tool, TOOL_TYPE: "extension"}
    return ToolCallSpan(_start(f"execute_tool {tool}", SpanKind.INTERNAL, attributes))


class RetrievalSpan(_Scoped):
    """The span of one search of a knowledge base (see `retrieval_span`): the embedding of
    its query, in a search by meaning, is its child."""

    PARENT = True

    def result(self, hits: int) -> None:
        """Record how many hits the search found."""
        if self.span is not None:
            self.span.set_attribute("branchline.retrieval.hits", hits)


_RETRIEVAL_OFF = RetrievalSpan()


def retrieval_span(knowledge_base: str, query: str, *, mode: str, top_k: int) -> RetrievalSpan:
    """Open the span of a search of `knowledge_base` (a `retrieval` span; a search by
    meaning embeds the query inside it)."""
    if _State.tracer is None:
        return _RETRIEVAL_OFF
    attributes: dict[str, Any] = {
        OPERATION: "retrieval",
        DATA_SOURCE: knowledge_base,
        RETRIEVAL_TOP_K: top_k,
        "branchline.retrieval.mode": mode,
    }
    if _content():
        attributes[RETRIEVAL_QUERY] = query
    return RetrievalSpan(_start(f"retrieval {knowledge_base}", SpanKind.INTERNAL, attributes))


def embeddings_call(call: EmbeddingCall) -> None:
    """Record a knowledge base's call to its embedding actor, made and timed by the knowledge
    app (which reports it when it is over): an `embeddings` span of the current span."""
    tracer = _State.tracer
    if tracer is None:
        return
    actor = call.actor
    provider = _PROVIDER_NAMES.get(actor.provider, actor.provider)
    attributes: dict[str, Any] = {
        OPERATION: "embeddings",
        PROVIDER: provider,
        "branchline.call.purpose": "embedding",
        "branchline.embeddings.texts": len(call.texts),
    }
    if actor.model:
        attributes[REQUEST_MODEL] = actor.model
    if call.tokens is not None:
        attributes[INPUT_TOKENS] = call.tokens
    start = _nanoseconds(call.started_at)
    span = tracer.start_span(
        f"embeddings {actor.model}".strip(),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start,
    )
    if call.error:
        span.set_attribute(ERROR_TYPE, "EmbeddingError")
        span.set_status(Status(StatusCode.ERROR, call.error))
    span.end(end_time=start + call.latency_ms * 1_000_000)


# --------------------------------------------------------------------------------------------
# Content, as the conventions shape it


def _input_messages(
    prompt: str, messages: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """Return the model's input as the conventions' messages (role and typed parts), from the
    prompt or from a tool loop's conversation in the OpenAI chat format."""
    if not messages:
        return [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
    shaped = []
    for message in messages:
        role = str(message.get("role", "user"))
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "result": message.get("content"),
                }
            )
        elif message.get("content"):
            parts.append({"type": "text", "content": message.get("content")})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
        shaped.append({"role": role, "parts": parts})
    return shaped


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
