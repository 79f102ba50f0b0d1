"""OTLP trace requests built by hand in OpenInference's conventions, as an instrumented RAG application sends
them: a root CHAIN span (question in, answer out), a RETRIEVER span with its documents, an LLM span."""

from __future__ import annotations

import base64
import json
import os
import time

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

TOWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."
BRIDGE = "The Golden Gate Bridge opened in 1937. Its main span is 1,280 metres long."


def new_trace_id() -> bytes:
    return os.urandom(16)


def value(v) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=str(v))


def span(trace_id, name, kind, attributes, parent=None, start=None, duration_ms=5.0, ended=True, error=None):
    start = start or time.time_ns()
    s = Span(
        trace_id=trace_id,
        span_id=os.urandom(8),
        parent_span_id=parent.span_id if parent is not None else b"",
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=start + int(duration_ms * 1e6) if ended else 0,
        attributes=[
            KeyValue(key=k, value=value(v)) for k, v in {"openinference.span.kind": kind, **attributes}.items()
        ],
    )
    if error:
        s.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=error))
    return s


def rag_trace(question, answer, documents, model="llama3.2", trace_id=None, root_ended=True, error=None):
    """The spans of one RAG request: [root, retriever, llm]."""
    trace_id = trace_id or new_trace_id()
    t0 = time.time_ns()
    root = span(
        trace_id,
        "RetrieverQueryEngine.query",
        "CHAIN",
        {"input.value": question, "output.value": answer} if answer is not None else {"input.value": question},
        start=t0,
        duration_ms=40,
        ended=root_ended,
        error=error,
    )
    docs = {}
    for n, (text, source, score) in enumerate(documents):
        docs[f"retrieval.documents.{n}.document.content"] = text
        docs[f"retrieval.documents.{n}.document.score"] = score
        docs[f"retrieval.documents.{n}.document.metadata"] = json.dumps({"file_name": source})
    retriever = span(
        trace_id, "VectorIndexRetriever.retrieve", "RETRIEVER", {"input.value": question, **docs}, root, t0 + 1_000_000
    )
    llm = span(
        trace_id,
        "Ollama.chat",
        "LLM",
        {
            "llm.model_name": model,
            "llm.token_count.prompt": 120,
            "llm.token_count.completion": 20,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"Context: ... Question: {question}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer or "",
        },
        root,
        t0 + 10_000_000,
        duration_ms=25,
    )
    return [root, retriever, llm]


def request(spans, service="tower-app") -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    resource_spans = message.resource_spans.add()
    resource_spans.resource.attributes.append(KeyValue(key="service.name", value=value(service)))
    resource_spans.scope_spans.add().spans.extend(spans)
    return message


def protobuf_body(spans, service="tower-app") -> bytes:
    return request(spans, service).SerializeToString()


def json_body(spans, service="tower-app") -> bytes:
    """OTLP/JSON: camelCase names and ids in hex (the specification), not protobuf's base64."""
    data = json_format.MessageToDict(request(spans, service))
    for resource_spans in data["resourceSpans"]:
        for scope in resource_spans["scopeSpans"]:
            for s in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
    return json.dumps(data).encode()


def plain_span(trace_id, name, attributes, parent=None, start=None, duration_ms=5.0, events=()):
    """A span in no particular convention: its attributes as given, and span events as (name, attributes)."""
    start = start or time.time_ns()
    s = Span(
        trace_id=trace_id,
        span_id=os.urandom(8),
        parent_span_id=parent.span_id if parent is not None else b"",
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=start + int(duration_ms * 1e6),
        attributes=[KeyValue(key=k, value=value(v)) for k, v in attributes.items()],
    )
    for event_name, event_attributes in events:
        event = s.events.add(name=event_name, time_unix_nano=start)
        event.attributes.extend(KeyValue(key=k, value=value(v)) for k, v in event_attributes.items())
    return s
