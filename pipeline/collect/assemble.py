"""A received trace as a question, an answer and the contexts it was written from, read span by span through
the tracing conventions (pipeline/collect/conventions: OpenInference, OTel GenAI, OpenLLMetry, and a service's
mapping).

The question: the mapped attribute, else the root span's input, else what the first retriever was asked. The
answer: the mapped attribute, else the root span's output, else the last model call's reply. The contexts: the
documents of the last reranker (what reached the model after reranking), else of every retriever. Every model
call span is a model call of the application (one around another describes the same call: the innermost
counts). A trace without contexts or without an output is no question-and-answer: it is kept as a trace with
the reason it was not evaluated, in the user's words (pipeline/collect/reasons.py)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from pipeline.collect import reasons
from pipeline.collect.conventions import Convention, convention_of
from pipeline.collect.conventions.base import LLM, RERANKER, RETRIEVER, ModelCall
from pipeline.evaluation.dataset import GivenContext
from pipeline.tracing import DOCUMENTS, SPAN_KIND
from store.records import LLMCallRecord, ReceivedSpan, SpanRecord

ORIGIN = "traced"  # the origin of an application's model calls, as the workbench's own are chat or evaluation
_SHORT = 200  # characters of an input or output kept on a run's span (the whole text stays in received_spans)


@dataclass
class TracedRequest:
    """What one received trace holds, as a run needs it."""

    trace_id: str
    service: str
    started_at: datetime
    latency_ms: float | None
    question: str | None
    answer: str | None
    contexts: list[GivenContext] = field(default_factory=list)
    calls: list[LLMCallRecord] = field(default_factory=list)
    spans: list[SpanRecord] = field(default_factory=list)
    model: str | None = None  # the application's generator (its last model call's model)
    error: str | None = None  # the root span's error, when the application's request failed
    not_evaluated: str | None = None  # why this trace is no question-and-answer to check (None: it is one)
    convention: str | None = None  # the conventions its spans were read in, most spans first, joined by '+'


@dataclass
class Reading:
    """One span as its convention reads it."""

    span: ReceivedSpan
    convention: Convention | None
    role: str
    kind: str | None

    def question(self) -> str | None:
        return self.convention.question(self.span) if self.convention else None

    def answer(self) -> str | None:
        return self.convention.answer(self.span) if self.convention else None


def assemble(spans: list[ReceivedSpan], mappings: dict | None = None) -> TracedRequest:
    """Read one trace's spans (every span received for its trace id, the root among them); `mappings`: the
    services' mappings (conventions/mapping.py), by service."""
    readings = [read(s, mappings or {}) for s in spans]
    root = _root(readings)
    retrievers = [r for r in readings if r.role in (RETRIEVER, RERANKER)]
    calls = [_call(r) for r in _model_calls(readings)]
    request = TracedRequest(
        trace_id=root.span.trace_id,
        service=root.span.service,
        started_at=root.span.started_at,
        latency_ms=_ms(root.span),
        question=_question(root, readings, retrievers),
        answer=_answer(root, readings, calls),
        contexts=_contexts(retrievers),
        calls=calls,
        spans=[_run_span(r) for r in readings],
        model=next((c.model for c in reversed(calls) if c.model and c.model != "unknown"), None),
        error=root.span.status_message or ("the request failed" if root.span.status_code == "ERROR" else None),
        convention=_conventions(readings),
    )
    request.not_evaluated = reasons.why_not(request, readings, retrievers)
    return request


def read(span: ReceivedSpan, mappings: dict) -> Reading:
    mapping = mappings.get(span.service)
    convention = convention_of(span, (mapping,) if mapping is not None else ())
    if convention is None:
        return Reading(span, None, "other", None)
    return Reading(span, convention, convention.role(span), convention.kind(span))


def _root(readings: list[Reading]) -> Reading:
    roots = [r for r in readings if r.span.parent_id is None]
    return min(roots or readings, key=lambda r: r.span.started_at)


def _mapped(readings: list[Reading], what: str) -> str | None:
    """What a service's mapping reads, on whichever span carries it (the root first)."""
    for reading in readings:
        if reading.convention is not None and reading.convention.name == "mapping":
            found = getattr(reading.convention, what)(reading.span)
            if found:
                return found
    return None


def _question(root: Reading, readings: list[Reading], retrievers: list[Reading]) -> str | None:
    found = _mapped(readings, "question") or root.question()
    return found or next((q for q in (r.question() for r in retrievers if r.role == RETRIEVER) if q), None)


def _answer(root: Reading, readings: list[Reading], calls: list[LLMCallRecord]) -> str | None:
    found = _mapped(readings, "answer") or root.answer()
    if found:
        return found
    last = calls[-1].completion_text if calls else None  # the root carries no output: the final generation's
    return last.strip() or None if last else None


def _model_calls(readings: list[Reading]) -> list[Reading]:
    """The spans that are model calls: one around another (LlamaIndex's predict around its chat, an OpenInference
    LLM span around an instrumented client's) describes the same call, so only the innermost counts."""
    by_id = {r.span.span_id: r for r in readings}
    outer = set()
    for reading in readings:
        if reading.role != LLM:
            continue
        parent, seen = by_id.get(reading.span.parent_id or ""), set()
        while parent is not None and parent.span.span_id not in seen:
            seen.add(parent.span.span_id)
            if parent.role == LLM:
                outer.add(parent.span.span_id)
            parent = by_id.get(parent.span.parent_id or "")
    return [r for r in readings if r.role == LLM and r.span.span_id not in outer]


def _contexts(retrievers: list[Reading]) -> list[GivenContext]:
    """The last reranker's output documents, else every retriever's documents (repeats dropped), in order."""
    rerankers = [r for r in retrievers if r.role == RERANKER]
    chosen = rerankers[-1:] if rerankers else retrievers
    contexts, seen = [], set()
    for reading in chosen:
        for document in reading.convention.documents(reading.span):
            if document.text not in seen:
                seen.add(document.text)
                contexts.append(document)
    return contexts


def _conventions(readings: list[Reading]) -> str | None:
    counts = Counter(r.convention.name for r in readings if r.convention is not None)
    return "+".join(name for name, _ in counts.most_common()) or None


def _call(reading: Reading) -> LLMCallRecord:
    """A model call span as a model call of the application."""
    span = reading.span
    call = reading.convention.call(span) or ModelCall()
    return LLMCallRecord(
        stage="application",
        model=call.model or "unknown",
        digest=None,
        prompt_hash=hashlib.sha256(str(call.prompt or "").encode()).hexdigest(),
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        latency_ms=_ms(span) or 0.0,
        cache_hit=False,
        error=span.status_message if span.status_code == "ERROR" else None,
        started_at=span.started_at,
        origin=ORIGIN,
        backend=call.provider,
        prompt_text=call.prompt,
        completion_text=call.completion,
        span_id=span.span_id,
    )


def _run_span(reading: Reading) -> SpanRecord:
    """A received span as a step of the run's trace: its convention and kind, its model and tokens, and its
    input and output cut short (the whole span stays in received_spans)."""
    span, attributes = reading.span, {}
    if reading.convention is not None:
        attributes = {
            "convention": reading.convention.name,
            "kind": reading.kind or reading.role,
            SPAN_KIND: reading.role,
        }
        if reading.role == LLM:
            call = reading.convention.call(span) or ModelCall()
            shown = {
                "model": call.model,
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
            }
            attributes.update({k: v for k, v in shown.items() if v is not None})
        for key, value in (("input", reading.question()), ("output", reading.answer())):
            if value:
                attributes[key] = value if len(value) <= _SHORT else value[:_SHORT] + "…"
        documents = reading.convention.documents(span) if reading.role in (RETRIEVER, RERANKER) else []
        if documents:
            attributes["documents"] = len(documents)
            attributes[DOCUMENTS] = [d.model_dump() for d in documents]  # whole: the explorer shows them
    return SpanRecord(
        span.span_id,
        span.parent_id,
        span.name,
        span.started_at,
        _ms(span),
        span.status_message if span.status_code == "ERROR" else None,
        attributes,
    )


def _ms(span: ReceivedSpan) -> float | None:
    return None if span.ended_at is None else (span.ended_at - span.started_at).total_seconds() * 1000
