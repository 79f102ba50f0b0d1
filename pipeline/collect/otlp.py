"""OTLP trace requests, decoded with the OpenTelemetry protocol library, as the spans the store keeps.

Protobuf bodies are parsed by the generated message class; JSON bodies by protobuf's JSON parser after the ids,
which OTLP/JSON writes in hex where protobuf's JSON mapping expects base64, are turned into base64. Attribute
values become plain Python values (arrays as lists, key-value lists as dicts); span events are kept with their
attributes (a model's messages and a vector store's results travel in them). A span's kind is what its tracing
convention calls it (pipeline/collect/conventions)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime, timedelta, timezone

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from pipeline.collect.conventions import convention_of
from store.records import ReceivedSpan

PROTOBUF, JSON = "application/x-protobuf", "application/json"
UNKNOWN_SERVICE = "unknown_service"
_STATUS = {1: "OK", 2: "ERROR"}
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


class BadRequest(ValueError):
    """A body that is not a readable OTLP trace request; the message says why."""


def decode(body: bytes, content_type: str) -> list[ReceivedSpan]:
    """The spans of one export request (PROTOBUF or JSON). BadRequest when the body cannot be read."""
    request = _parse_json(body) if content_type == JSON else _parse_protobuf(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        service = str(resource.get("service.name") or resource.get("openinference.project.name") or UNKNOWN_SERVICE)
        for scope_spans in resource_spans.scope_spans:
            spans += [_span(span, service, len(spans) + n) for n, span in enumerate(scope_spans.spans)]
    return spans


def response(content_type: str) -> bytes:
    """The success answer of the export service, in the request's encoding."""
    message = ExportTraceServiceResponse()
    return json_format.MessageToJson(message).encode() if content_type == JSON else message.SerializeToString()


def _parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    try:
        return ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise BadRequest(f"the body is not an OTLP ExportTraceServiceRequest in protobuf ({exc})") from None


def _parse_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest("the body is JSON but not an object with resourceSpans")
    try:
        _hex_ids_to_base64(data)
        return json_format.ParseDict(data, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, BadRequest, TypeError, AttributeError) as exc:
        raise BadRequest(f"the body is not an OTLP/JSON trace request ({exc})") from None


def _hex_ids_to_base64(value) -> None:
    """OTLP/JSON writes trace and span ids in hex (the OTLP specification); protobuf's JSON mapping reads bytes
    as base64."""
    if isinstance(value, list):
        for item in value:
            _hex_ids_to_base64(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_FIELDS and isinstance(item, str):
                try:
                    value[key] = base64.b64encode(bytes.fromhex(item)).decode()
                except ValueError:
                    raise BadRequest(f"{key} {item[:40]!r} is not hexadecimal") from None
            else:
                _hex_ids_to_base64(item)


def _span(span, service: str, n: int) -> ReceivedSpan:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        raise BadRequest(f"span {n} ({span.name[:80]!r}) has no valid trace id (16 bytes, not all zero)")
    if len(span.span_id) != 8 or not any(span.span_id):
        raise BadRequest(f"span {n} ({span.name[:80]!r}) has no valid span id (8 bytes, not all zero)")
    if not span.start_time_unix_nano:
        raise BadRequest(f"span {n} ({span.name[:80]!r}) has no start time")
    attributes = attributes_of(span.attributes)
    parent = binascii.hexlify(span.parent_span_id).decode() if any(span.parent_span_id) else None
    received = ReceivedSpan(
        trace_id=binascii.hexlify(span.trace_id).decode(),
        span_id=binascii.hexlify(span.span_id).decode(),
        parent_id=parent,
        name=span.name,
        span_kind=None,
        service=service,
        started_at=_time(span.start_time_unix_nano),
        ended_at=_time(span.end_time_unix_nano) if span.end_time_unix_nano else None,
        status_code=_STATUS.get(span.status.code),
        status_message=span.status.message or None,
        attributes=attributes,
        events=[{"name": e.name, "attributes": attributes_of(e.attributes)} for e in span.events],
    )
    convention = convention_of(received)
    received.span_kind = _text(convention.kind(received)) if convention is not None else None
    return received


def _time(unix_nano: int) -> datetime:
    """To the microsecond, in whole numbers (through a float, a 25 ms span came out 24.999 ms)."""
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc) + timedelta(microseconds=nanos // 1000)


def _text(value) -> str | None:
    return None if value is None else str(value).upper()


def attributes_of(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(any_value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(any_value.bytes_value).decode()
    return getattr(any_value, kind)
