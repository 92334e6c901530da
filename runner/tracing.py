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
the run's creation and ending then, with the ids derived above. Until then a tracing backend
shows the run's steps under a parent it has not received yet. A run failed before any step
could be claimed (its version no longer parses, its step was lost too many times) has no step
spans and no run span.

**A step span** covers the step's execution (`step_span`, around the executor in
`runner.advance`): the kind, actor and seq (the attempt only when it is not the first; the
key is in the span's name and the run's id on the run's own span), then its status,
confidence and validation attempts, where the run goes next, and each branch evaluated as a
`branch.evaluated` event with its reason. The model calls it makes (`model_call_span`, in
`Session.ask`: the answer, validation attempts, the judge, evaluators, a classifier, a tool
loop's turns, each with its tokens), its tool calls (`tool_call_span`) and its searches
(`retrieval_span`, holding the embedding of the query: `embeddings_call`) are its children.
Spans carry few attributes: each costs the step a little and its export more
(`benchmarks/tracing_overhead.py`).

**Spans are built here, not by the SDK's Tracer.** Through `Tracer.start_span`, the SDK's
attribute cleaning (`BoundedAttributes`: a lock and checks on every value), `add_event` and
`set_attributes`, the spans of a scripted step (a step span with four `branch.evaluated`
events and one chat span) took about 160 µs of the step, a tenth of a step on PostgreSQL;
built here, about 35 µs. An open span is a small object (`_Span`: a SpanContext with ids
drawn here, a plain dict of attributes, a list of events); when it ends it becomes the SDK's
finished span (`ReadableSpan`, with the provider's resource and this module's
instrumentation scope) and goes straight to the provider's span processors' `on_end`, which
for the BatchSpanProcessor only queues it. While a step's (or a search's) span is open, its
context is the current parent (a context variable), so the spans of its calls name it.

What the Tracer would do besides, and this module does not: call the processors' `on_start`
(the batch and simple processors do nothing there), and cut attributes and events to the
`OTEL_*_LIMIT` variables (spans here carry a handful, all of the types the exporters take:
str, bool, int, float, a tuple of str). The provider's sampler is asked only when it is not
the default (`parentbased_always_on`, or `always_on`), which samples every span of a run:
`OTEL_TRACES_SAMPLER` set to another one is asked for each span (only its decision and trace
state count), and a span it drops still gives its children their parent.

**Configuration.** Tracing is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not true); the OTLP/HTTP
exporter reads the other `OTEL_EXPORTER_OTLP_*` variables itself (headers, timeout,
compression, certificates), and the resource `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (service name `branchline` unless they give one). `setup` runs
once per process, from the runner app's `ready()` (web servers, the embedded worker that runs
inside them, `celery worker` and its pool's processes, management commands). Off, no SDK
provider exists and every helper returns a shared object that does nothing. On, spans go to
a BatchSpanProcessor: a step only queues them; a background thread exports them with the
SDK's OTLP/HTTP exporter. (An encoder of our own, writing the protobuf bytes directly, took a
quarter of the SDK's time a span, but at real model latencies it changed nothing: 1,000 runs
of 3 one-second calls, traced, took 24.5-24.9 s with it and 24.5-24.6 s with the SDK's, 23.6-24.1
and 23.6-23.8 s of worker CPU; `benchmarks/inflight.py --trace`.)

Prompts, answers, tool arguments and results, and search queries go into spans only when the
setting `TRACE_CONTENT` is on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import threading
import traceback
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from datetime import UTC, datetime, timedelta
from time import time_ns
from types import TracebackType
from typing import Any, Self

from django.conf import settings
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, DEFAULT_ON, Decision, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

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
# The instrumentation scope of every span (what `get_tracer(TRACER_NAME)` would give them).
_SCOPE = InstrumentationScope(TRACER_NAME)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
_UNSET = Status(StatusCode.UNSET)

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
# `gen_ai.provider.name` for our providers: an OpenAI-compatible server speaks OpenAI's API;
# `gcp.gemini` is the conventions' name for the Gemini API (not Vertex AI's).
_PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "openai": "openai",
    "ollama": "ollama",
    "scripted": "branchline.scripted",
}


# --------------------------------------------------------------------------------------------
# Set-up


class _Provider(TracerProvider):
    """A tracer provider that keeps its span processors in reach: this module hands them the
    spans it builds (see the module's docstring)."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource=resource)
        self.processors: tuple[SpanProcessor, ...] = ()

    def add_span_processor(self, span_processor: SpanProcessor) -> None:
        """Register `span_processor` with the SDK (which flushes and shuts it down) and here."""
        super().add_span_processor(span_processor)
        self.processors = (*self.processors, span_processor)


class _Recorder:
    """Where this process's spans go: a provider from `make_provider`, and its sampler unless
    it is the default one, which samples every span."""

    __slots__ = ("provider", "sampler")

    def __init__(self, provider: _Provider) -> None:
        self.provider = provider
        sampler = provider.sampler
        self.sampler: Sampler | None = None if sampler in (DEFAULT_ON, ALWAYS_ON) else sampler

    def start(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        parent: SpanContext | None,
        *,
        ids: tuple[int, int] | None = None,
        start_time: int | None = None,
    ) -> _Span:
        """Open a span under `parent` (None: a root, of a new trace unless `ids` gives its
        trace and span ids)."""
        if ids is not None:
            trace_id, span_id = ids
        else:
            trace_id = parent.trace_id if parent is not None else _random_id(128)
            span_id = _random_id(64)
        flags, trace_state = _SAMPLED, None
        recorder: _Recorder | None = self
        if self.sampler is not None:
            sampling = self.sampler.should_sample(
                trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None,
                trace_id,
                name,
                kind,
                attributes,
            )
            if sampling.decision is not Decision.RECORD_AND_SAMPLE:
                flags = _NOT_SAMPLED
            if sampling.decision is Decision.DROP:
                recorder = None
            trace_state = sampling.trace_state
        context = SpanContext(trace_id, span_id, False, flags, trace_state)
        return _Span(recorder, name, kind, context, parent, attributes, start_time or time_ns())


class _Span:
    """An open span: its context, attributes and events, until `end` hands it, finished, to
    the span processors (without a recorder, a span the sampler dropped: it only gives its
    children their parent)."""

    __slots__ = (
        "attributes",
        "context",
        "events",
        "kind",
        "name",
        "parent",
        "recorder",
        "start_time",
        "status",
    )

    def __init__(
        self,
        recorder: _Recorder | None,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        start_time: int,
    ) -> None:
        self.recorder = recorder
        self.name, self.kind, self.context, self.parent = name, kind, context, parent
        self.attributes = attributes
        self.events: list[Event] = []
        self.start_time = start_time
        self.status = _UNSET

    def fail(self, description: str | None = None) -> None:
        """Set the span's status to error."""
        self.status = Status(StatusCode.ERROR, description)

    def end(self, end_time: int | None = None) -> None:
        """Hand the finished span to the provider's span processors (once)."""
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return
        provider = recorder.provider
        finished = ReadableSpan(
            name=self.name,
            context=self.context,
            parent=self.parent,
            # Read each time: the SDK updates it in a forked process (its pid).
            resource=provider.resource,
            attributes=self.attributes,
            events=self.events,
            kind=self.kind,
            status=self.status,
            start_time=self.start_time,
            end_time=end_time or time_ns(),
            instrumentation_scope=_SCOPE,
        )
        for processor in provider.processors:
            processor.on_end(finished)


def _random_id(bits: int) -> int:
    return random.getrandbits(bits) or 1  # all zeros is the invalid id


class _State:
    """Where this process's spans go (None: tracing is off)."""

    recorder: _Recorder | None = None
    set_up = False
    lock = threading.Lock()


# The span whose children the spans started now are: a step's, a search's (or None).
_parent: ContextVar[SpanContext | None] = ContextVar("branchline_tracing_parent", default=None)


def make_provider(*processors: SpanProcessor) -> TracerProvider:
    """Return a tracer provider for `configure`, with these processors.

    The resource is read from the standard variables, named `branchline` unless they name it.
    """
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    provider = _Provider(resource)
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
        _State.recorder = None
        return
    if not isinstance(provider, _Provider):
        raise ValueError("the provider must come from tracing.make_provider (derived run ids)")
    _State.recorder = _Recorder(provider)


def setup() -> None:
    """Turn tracing on in this process if the environment asks for it; once per process."""
    with _State.lock:
        if _State.set_up:
            return
        _State.set_up = True
        configure(exporting_provider())


def enabled() -> bool:
    """Return whether this process records spans."""
    return _State.recorder is not None


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
def _run_span_context(run_id: int, created_at: datetime) -> SpanContext:
    """Return the context of the run's own span, the remote parent of its steps' spans (the
    same for each of the run's steps a worker executes in a row)."""
    return SpanContext(
        trace_id_of(run_id, created_at),
        root_span_id_of(run_id, created_at),
        is_remote=True,
        trace_flags=_SAMPLED,
    )


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
    recorder = _State.recorder
    if recorder is None:
        return
    span = recorder.start(
        f"invoke_workflow {workflow}".strip(),
        SpanKind.INTERNAL,
        {
            OPERATION: "invoke_workflow",
            WORKFLOW_NAME: workflow,
            RUN_ID: run_id,
            "branchline.run.status": status,
            "branchline.run.outcome": outcome,
        },
        None,  # the root
        ids=(trace_id_of(run_id, created_at), root_span_id_of(run_id, created_at)),
        start_time=_nanoseconds(created_at),
    )
    if status == "failed":
        span.attributes[ERROR_TYPE] = "run_failed"
        span.fail(error or None)
    span.end(end_time=_nanoseconds(timezone.now()))


# --------------------------------------------------------------------------------------------
# Spans of a step and of its calls


class _Scoped:
    """An open span, ended on leaving the `with`; an exception leaving it is recorded with its
    `error.type`. A span that has children (`PARENT`) is the current parent meanwhile, so that
    the spans started inside are its children. Without a span (tracing off), it does
    nothing."""

    PARENT = False

    def __init__(self, span: _Span | None = None) -> None:
        self.span = span
        self._token: Token[SpanContext | None] | None = None

    def __enter__(self) -> Self:
        if self.span is not None and self.PARENT:
            self._token = _parent.set(self.span.context)
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
            span.attributes[ERROR_TYPE] = error_type(exc)
            span.events.append(_exception_event(exc))
            span.fail(f"{type(exc).__name__}: {exc}")
        if self._token is not None:
            _parent.reset(self._token)
        span.end()


def _exception_event(exc: BaseException) -> Event:
    """Return the `exception` event the SDK's `record_exception` would add."""
    kind = type(exc)
    module = kind.__module__
    return Event(
        "exception",
        {
            "exception.type": (
                f"{module}.{kind.__qualname__}"
                if module and module != "builtins"
                else kind.__qualname__
            ),
            "exception.message": str(exc),
            "exception.stacktrace": "".join(traceback.format_exception(exc)),
            "exception.escaped": "False",
        },
        time_ns(),
    )


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


def _start(name: str, kind: SpanKind, attributes: dict[str, Any]) -> _Span | None:
    """Open a span of the current parent (a step's, a search's), if tracing is on."""
    recorder = _State.recorder
    if recorder is None:
        return None
    return recorder.start(name, kind, attributes, _parent.get())


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
        attributes = span.attributes
        attributes["branchline.step.status"] = outcome.status
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
            span.fail(outcome.error or None)
        if decision is not None:
            # The step the run goes to (a repeat names this one), or @complete, @end, @fail.
            attributes["branchline.next"] = decision.next_step or f"@{decision.kind}"
            if decision.kind == "fail":
                attributes["branchline.next.reason"] = decision.reason
            # The branches were evaluated together, once the step had its answer: one time.
            now = time_ns()
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
                span.events.append(Event("branch.evaluated", event, now))


_STEP_OFF = StepSpan()


def step_span(claim: Claim) -> StepSpan:
    """Open the span of the claimed step, a child of its run's span (use it in a `with`)."""
    recorder = _State.recorder
    if recorder is None:
        return _STEP_OFF
    step = claim.step
    # Few attributes (each costs the step a little, and its export more): the step's key is
    # in the span's name, the run is the trace (its id is on the run's own span), and the
    # attempt is there only when the step was executed before (its worker was lost).
    attributes: dict[str, Any] = {
        "branchline.step.kind": step.kind,
        "branchline.step.seq": claim.seq,
    }
    if claim.attempt != 1:
        attributes["branchline.step.attempt"] = claim.attempt
    actor = claim.next.get("actor") or step.actor
    if actor:
        attributes["branchline.step.actor"] = actor
    parent = _run_span_context(claim.run_id, claim.created_at)
    return StepSpan(recorder.start(f"step {step.key}", SpanKind.INTERNAL, attributes, parent))


class ModelCallSpan(_Scoped):
    """The span of one call to a model (see `model_call_span`)."""

    def __init__(self, span: _Span | None = None, model: str = "") -> None:
        super().__init__(span)
        self.model = model

    def result(self, result: ChatResult) -> None:
        """Record the model's usage (and its answer, with `TRACE_CONTENT`)."""
        span = self.span
        if span is None:
            return
        attributes = span.attributes
        if result.tool_calls:  # otherwise it stopped as models do (no attribute to say so)
            attributes[FINISH_REASONS] = ("tool_calls",)
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
    if _State.recorder is None:
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
        attributes = span.attributes
        attributes["branchline.tool.is_error"] = bool(record.get("is_error"))
        attributes["branchline.tool.truncated"] = bool(record.get("truncated"))
        attributes["branchline.tool.latency_ms"] = int(record.get("latency_ms") or 0)
        if record.get("scripted"):
            attributes["branchline.tool.scripted"] = True
        if record.get("error"):
            # The call could not be made (unknown tool, refused arguments, server down).
            attributes[ERROR_TYPE] = "call_failed"
            span.fail(str(record["error"]))
        elif record.get("is_error"):
            attributes[ERROR_TYPE] = "tool_error"  # the tool ran and reported a failure
            span.fail()
        if _content():
            attributes[TOOL_ARGUMENTS] = _json(record.get("arguments") or {})
            attributes[TOOL_RESULT] = str(record.get("result") or "")


_TOOL_CALL_OFF = ToolCallSpan()


def tool_call_span(tool: str) -> ToolCallSpan:
    """Open the span of a call to `tool` (SERVER.TOOL; an `execute_tool` span)."""
    if _State.recorder is None:
        return _TOOL_CALL_OFF
    attributes: dict[str, Any] = {
        OPERATION: "execute_tool",
        TOOL_NAME: tool,
        TOOL_TYPE: "extension",
    }
    return ToolCallSpan(_start(f"execute_tool {tool}", SpanKind.INTERNAL, attributes))


class RetrievalSpan(_Scoped):
    """The span of one search of a knowledge base (see `retrieval_span`): the embedding of
    its query, in a search by meaning, is its child."""

    PARENT = True

    def result(self, hits: int) -> None:
        """Record how many hits the search found."""
        if self.span is not None:
            self.span.attributes["branchline.retrieval.hits"] = hits


_RETRIEVAL_OFF = RetrievalSpan()


def retrieval_span(knowledge_base: str, query: str, *, mode: str, top_k: int) -> RetrievalSpan:
    """Open the span of a search of `knowledge_base` (a `retrieval` span; a search by
    meaning embeds the query inside it)."""
    if _State.recorder is None:
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
    recorder = _State.recorder
    if recorder is None:
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
    span = recorder.start(
        f"embeddings {actor.model}".strip(),
        SpanKind.CLIENT,
        attributes,
        _parent.get(),
        start_time=start,
    )
    if call.error:
        attributes[ERROR_TYPE] = "EmbeddingError"
        span.fail(call.error)
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
