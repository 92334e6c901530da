"""The OTLP/HTTP span exporter, with an encoder that writes the protobuf wire format directly.

The SDK's exporter encodes a batch by building a protobuf message object for every span,
attribute and event (`opentelemetry.exporter.otlp.proto.common.trace_encoder`), about 40 µs a
span in Python: on a machine with few cores, that export thread took as much of the
interpreter as the spans' own recording and made tracing cost PostgreSQL steps over a tenth of
their time (`benchmarks/tracing_overhead.py`). Writing the same message's bytes here takes a
fraction of that: span keys repeat, so each key's bytes are encoded once and kept.

The bytes are the `ExportTraceServiceRequest` the SDK's encoder gives for the same spans
(tests/runner/test_otlp.py decodes both and compares them); everything else (the HTTP
client, retries, headers, compression, the size limit, the exporter's own metrics) is the
SDK's exporter.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http._common import _is_request_too_large
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status

log = logging.getLogger(__name__)


class SpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (configured by the same `OTEL_EXPORTER_OTLP_*` variables),
    encoding with `encode_spans` below. `export` is the SDK's, with the encoder swapped."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            log.warning("the span exporter is shut down: a batch of spans is dropped")
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = encode_spans(spans)
            except Exception as exc:  # a value no span here has; the batch cannot go
                log.error("could not encode a batch of spans: %s", exc)
                result.error = exc
                return SpanExportResult.FAILURE
            if _is_request_too_large(data, self._max_request_size):
                log.warning("a batch of spans is dropped: %d bytes is over the limit", len(data))
                result.error = ValueError("request too large")
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


# Field tags (field number << 3 | wire type) of opentelemetry/proto/trace/v1/trace.proto and
# common/v1/common.proto: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
_SPAN_TRACE_ID = b"\x0a"  # 1, bytes
_SPAN_SPAN_ID = b"\x12"  # 2, bytes
_SPAN_TRACE_STATE = b"\x1a"  # 3, string
_SPAN_PARENT_ID = b"\x22"  # 4, bytes
_SPAN_NAME = b"\x2a"  # 5, string
_SPAN_KIND = b"\x30"  # 6, enum
_SPAN_START = b"\x39"  # 7, fixed64
_SPAN_END = b"\x41"  # 8, fixed64
_SPAN_ATTRIBUTE = b"\x4a"  # 9, KeyValue
_SPAN_EVENT = b"\x5a"  # 11, Event
_SPAN_STATUS = b"\x7a"  # 15, Status
_SPAN_FLAGS = b"\x85\x01"  # 16, fixed32
_EVENT_TIME = b"\x09"  # 1, fixed64
_EVENT_NAME = b"\x12"  # 2, string
_EVENT_ATTRIBUTE = b"\x1a"  # 3, KeyValue
_STATUS_MESSAGE = b"\x12"  # 2, string
_STATUS_CODE = b"\x18"  # 3, enum
_KEY = b"\x0a"  # KeyValue.key 1, string
_VALUE = b"\x12"  # KeyValue.value 2, AnyValue
_STRING = b"\x0a"  # AnyValue.string_value 1
_BOOL = b"\x10"  # AnyValue.bool_value 2
_INT = b"\x18"  # AnyValue.int_value 3
_DOUBLE = b"\x21"  # AnyValue.double_value 4, fixed64
_ARRAY = b"\x2a"  # AnyValue.array_value 5
_BYTES = b"\x3a"  # AnyValue.bytes_value 7
_ARRAY_VALUE = b"\x0a"  # ArrayValue.values 1
_RESOURCE = b"\x0a"  # ResourceSpans.resource 1
_SCOPE_SPANS = b"\x12"  # ResourceSpans.scope_spans 2
_SCHEMA_URL = b"\x1a"  # ResourceSpans.schema_url 3, ScopeSpans.schema_url 3
_SCOPE = b"\x0a"  # ScopeSpans.scope 1
_SCOPE_SPAN = b"\x12"  # ScopeSpans.spans 2
_SCOPE_NAME = b"\x0a"  # InstrumentationScope.name 1
_SCOPE_VERSION = b"\x12"  # InstrumentationScope.version 2
_SCOPE_ATTRIBUTE = b"\x1a"  # InstrumentationScope.attributes 3
_RESOURCE_ATTRIBUTE = b"\x0a"  # Resource.attributes 1
_RESOURCE_SPANS = b"\x0a"  # ExportTraceServiceRequest.resource_spans 1

# SpanFlags: the parent's is-remote bit is known (0x100), and set (0x200) for a remote parent.
_FLAGS_LOCAL = struct.pack("<I", 0x100)
_FLAGS_REMOTE = struct.pack("<I", 0x300)
_ROOT_FLAGS = _SPAN_FLAGS + _FLAGS_LOCAL
_TRACE_ID_FIELD = _SPAN_TRACE_ID + b"\x10"  # and its 16 bytes
_SPAN_ID_FIELD = _SPAN_SPAN_ID + b"\x08"  # and its 8 bytes
_PARENT_ID_FIELD = _SPAN_PARENT_ID + b"\x08"


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def _varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint (negative int64s take ten bytes)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _varint(len(payload)) + payload


def _text(tag: bytes, text: str) -> bytes:
    return _field(tag, text.encode("utf-8", "surrogatepass")) if text else b""


@functools.lru_cache(maxsize=4096)
def _key(key: str) -> bytes:
    """KeyValue.key, encoded once per key."""
    return _text(_KEY, key)


def _any_value(value: Any) -> bytes:
    """An AnyValue message's bytes (the SDK's `_encode_value`, in the same order of checks)."""
    if value is None:
        return b""
    # The value is a oneof: a set member is written even when it is zero or empty.
    if isinstance(value, bool):
        return _BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return _field(_STRING, value.encode("utf-8", "surrogatepass"))
    if isinstance(value, int):
        return _INT + _varint(value)
    if isinstance(value, float):
        return _DOUBLE + struct.pack("<d", value)
    if isinstance(value, bytes):
        return _field(_BYTES, value)
    if isinstance(value, Sequence):
        items = b"".join(_field(_ARRAY_VALUE, _any_value(item)) for item in value)
        return _field(_ARRAY, items)
    if isinstance(value, Mapping):
        pairs = b"".join(_field(_ARRAY_VALUE, _key_value(str(k), v)) for k, v in value.items())
        return _field(b"\x32", pairs)  # AnyValue.kvlist_value 6, KeyValueList.values 1
    raise TypeError(f"cannot encode a {type(value).__name__} attribute")


def _key_value(key: str, value: Any) -> bytes:
    return _key(key) + _field(_VALUE, _any_value(value))


# Encoded attributes by (tag, key, value, type): spans repeat most of theirs (a step's kind and
# actor, a branch's name and reason). Emptied when full, so a stream of unique values (prompts in
# TRACE_CONTENT) only costs the lookups.
_encoded: dict[tuple[bytes, str, Any, type], bytes] = {}
_ENCODED_MAX = 8192
_CACHEABLE = (str, int, float, bool)


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    parts = []
    for key, value in attributes.items():
        if not isinstance(value, _CACHEABLE):  # a sequence, bytes or None
            parts.append(_field(tag, _key_value(key, value)))
            continue
        cache_key = (tag, key, value, type(value))
        encoded = _encoded.get(cache_key)
        if encoded is None:
            if len(_encoded) >= _ENCODED_MAX:
                _encoded.clear()
            encoded = _encoded[cache_key] = _field(tag, _key_value(key, value))
        parts.append(encoded)
    return b"".join(parts)


def _status(status: Status | None) -> bytes:
    if status is None:
        return b""
    code = status.status_code.value
    payload = _text(_STATUS_MESSAGE, status.description or "")
    if code:
        payload += _STATUS_CODE + _varint(code)
    return _field(_SPAN_STATUS, payload)


def _fixed64(tag: bytes, value: int | None) -> bytes:
    return tag + struct.pack("<Q", value) if value else b""


def _span(span: ReadableSpan) -> bytes:
    context: SpanContext = span.context  # type: ignore[assignment]  # finished spans have one
    parent = span.parent
    parts = [
        _TRACE_ID_FIELD + context.trace_id.to_bytes(16, "big"),
        _SPAN_ID_FIELD + context.span_id.to_bytes(8, "big"),
    ]
    if context.trace_state:
        state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
        parts.append(_text(_SPAN_TRACE_STATE, state))
    if parent is not None:
        parts.append(_PARENT_ID_FIELD + parent.span_id.to_bytes(8, "big"))
    parts.append(_text(_SPAN_NAME, span.name))
    parts.append(_SPAN_KIND + _varint(span.kind.value + 1))  # SPAN_KIND_INTERNAL is 1
    parts.append(_fixed64(_SPAN_START, span.start_time))
    parts.append(_fixed64(_SPAN_END, span.end_time))
    parts.append(_attributes(_SPAN_ATTRIBUTE, span.attributes))
    if span.dropped_attributes:
        parts.append(b"\x50" + _varint(span.dropped_attributes))  # 10
    for event in span.events:
        payload = (
            _fixed64(_EVENT_TIME, event.timestamp)
            + _text(_EVENT_NAME, event.name)
            + _attributes(_EVENT_ATTRIBUTE, event.attributes)
        )
        if event.dropped_attributes:
            payload += b"\x20" + _varint(event.dropped_attributes)  # 4
        parts.append(_field(_SPAN_EVENT, payload))
    if span.dropped_events:
        parts.append(b"\x60" + _varint(span.dropped_events))  # 12
    if span.links:
        raise TypeError("spans with links are not encoded here")
    parts.append(_status(span.status))
    if parent is not None and parent.is_remote:
        parts.append(_SPAN_FLAGS + _FLAGS_REMOTE)
    else:
        parts.append(_ROOT_FLAGS)
    return b"".join(parts)


@functools.lru_cache(maxsize=16)
def _resource(resource: Resource) -> bytes:
    """ResourceSpans.resource and schema_url (the same resource for all of a process' spans)."""
    return _field(_RESOURCE, _attributes(_RESOURCE_ATTRIBUTE, resource.attributes))


@functools.lru_cache(maxsize=16)
def _scope(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return _field(_SCOPE, b"")
    payload = (
        _text(_SCOPE_NAME, scope.name)
        + _text(_SCOPE_VERSION, scope.version or "")
        + _attributes(_SCOPE_ATTRIBUTE, scope.attributes)
    )
    return _field(_SCOPE, payload)


def encode_spans(spans: Sequence[ReadableSpan]) -> bytes:
    """Return the serialized `ExportTraceServiceRequest` of `spans`, grouped as the SDK groups
    them: by resource, then by instrumentation scope, in the order first seen."""
    # By identity: a Resource hashes by dumping its attributes to JSON, each time.
    grouped: dict[int, tuple[Resource, dict[InstrumentationScope | None, list[bytes]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = grouped.setdefault(id(resource), (resource, {}))
        scopes.setdefault(span.instrumentation_scope or None, []).append(_span(span))
    out = []
    for resource, scopes in grouped.values():
        scope_spans = []
        for scope, encoded in scopes.items():
            payload = _scope(scope) + b"".join(_field(_SCOPE_SPAN, span) for span in encoded)
            if scope is not None and scope.schema_url:
                payload += _text(_SCHEMA_URL, scope.schema_url)
            scope_spans.append(_field(_SCOPE_SPANS, payload))
        payload = _resource(resource) + b"".join(scope_spans)
        if resource.schema_url:
            payload += _text(_SCHEMA_URL, resource.schema_url)
        out.append(_field(_RESOURCE_SPANS, payload))
    return b"".join(out)
