"""The OTLP encoder writes the request the SDK's encoder builds, byte for byte once decoded."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from runner import otlp

RESOURCE = Resource({"service.name": "branchline", "host.cores": 2}, "https://schema/1")
SCOPE = InstrumentationScope("branchline.runner", "1.0", "https://scope/1", {"a": "b"})
TRACE = 0x0AF7651916CD43DD8448EB211C80319C


def span(
    name: str = "step write",
    *,
    span_id: int = 0x00F067AA0BA902B7,
    parent: SpanContext | None = None,
    attributes: dict[str, Any] | None = None,
    events: list[Event] | None = None,
    status: Status | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    resource: Resource = RESOURCE,
    scope: InstrumentationScope | None = SCOPE,
    trace_state: TraceState | None = None,
) -> ReadableSpan:
    context = SpanContext(TRACE, span_id, False, TraceFlags(1), trace_state)
    return ReadableSpan(
        name=name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=attributes or {},
        events=events or [],
        kind=kind,
        status=status or Status(StatusCode.UNSET),
        start_time=1_700_000_000_123_456_789,
        end_time=1_700_000_000_223_456_789,
        instrumentation_scope=scope,
    )


EVERY_VALUE = {
    "text": "a reason — with ünïcode",
    "empty": "",
    "yes": True,
    "no": False,
    "zero": 0,
    "count": 300,
    "negative": -5,
    "big": 2**62,
    "ratio": 0.25,
    "nought": 0.0,
    "finish": ("stop", "tool_calls"),
    "none": None,
    "raw": b"\x00\x01",
}

CASES = {
    "a root span with every kind of value": [span(attributes=EVERY_VALUE)],
    "a step under a remote run span, with branch events and a failure": [
        span(
            parent=SpanContext(TRACE, 7, True, TraceFlags(1)),
            attributes={"branchline.step.kind": "llm", "branchline.step.seq": 3},
            events=[
                Event("branch.evaluated", {"branch.name": "ok", "branch.reason": "matched"}, 5),
                Event("branch.evaluated", {"branch.name": "bad", "branch.taken": True}, 6),
                Event("exception", {}, 7),
            ],
            status=Status(StatusCode.ERROR, "the model timed out"),
        )
    ],
    "a call under a local parent, a client span, status ok, a trace state": [
        span(
            "chat m",
            parent=SpanContext(TRACE, 9, False, TraceFlags(1)),
            kind=SpanKind.CLIENT,
            status=Status(StatusCode.OK),
            trace_state=TraceState([("vendor", "x1")]),
            attributes={"gen_ai.usage.input_tokens": 12, "gen_ai.request.model": "m"},
        )
    ],
    "spans of two resources and two scopes, one of them none": [
        span(span_id=1),
        span(span_id=2, scope=None),
        span(span_id=3, resource=Resource({"service.name": "other"})),
        span(span_id=4),
    ],
    "no spans": [],
}


@pytest.mark.parametrize("spans", CASES.values(), ids=CASES.keys())
def test_the_encoder_writes_the_request_the_sdk_builds(spans: list[ReadableSpan]) -> None:
    ours = ExportTraceServiceRequest.FromString(otlp.encode_spans(spans))
    assert ours == sdk_encode(spans)


def test_attributes_seen_before_are_encoded_once_and_give_the_same_bytes() -> None:
    otlp._encoded.clear()
    first = otlp.encode_spans([span(attributes={"kind": "llm", "count": 1})])
    assert len(otlp._encoded) == 2
    assert otlp.encode_spans([span(attributes={"kind": "llm", "count": 1})]) == first
    # True and 1 are equal as keys, but are not the same attribute.
    assert otlp.encode_spans([span(attributes={"kind": "llm", "count": True})]) != first
