"""A received trace, read in OpenInference's conventions, as a question, an answer and the contexts it was
written from.

The root span's input and output are the question and the answer; the documents of the last RERANKER span (what
reached the model after reranking), else of every RETRIEVER span, are the contexts with their scores; every LLM
span is a model call of the application. A trace without a retriever or without an output is no
question-and-answer: it is kept as a trace with the reason it was not evaluated."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from pipeline.evaluation.dataset import GivenContext
from store.records import LLMCallRecord, ReceivedSpan, SpanRecord

ORIGIN = "traced"  # the origin of an application's model calls, as the workbench's own are chat or evaluation
_DOCUMENT = re.compile(r"^(retrieval\.documents|reranker\.output_documents)\.(\d+)\.document\.(\w+)$")
_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$")
_QUESTION_KEYS = ("question", "query", "input", "query_str", "q", "prompt", "user_input")
_ANSWER_KEYS = ("answer", "output", "response", "result", "text", "content")
_SHOWN_ATTRIBUTES = (
    "openinference.span.kind",
    "llm.model_name",
    "llm.token_count.prompt",
    "llm.token_count.completion",
)
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
    model: str | None = None  # the application's generator (its last LLM span's model)
    error: str | None = None  # the root span's error, when the application's request failed
    not_evaluated: str | None = None  # why this trace is no question-and-answer to check (None: it is one)


def assemble(spans: list[ReceivedSpan]) -> TracedRequest:
    """Read one trace's spans (every span received for its trace id, the root among them)."""
    root = _root(spans)
    question = _question(root, spans)
    answer = _text_value(root.attributes.get("output.value"), root.attributes.get("output.mime_type"), _ANSWER_KEYS)
    retrievers = [s for s in spans if s.span_kind in ("RETRIEVER", "RERANKER")]
    calls = [_call(s) for s in _model_calls(spans)]
    request = TracedRequest(
        trace_id=root.trace_id,
        service=root.service,
        started_at=root.started_at,
        latency_ms=_ms(root),
        question=question,
        answer=answer,
        contexts=_contexts(retrievers),
        calls=calls,
        spans=[_run_span(s) for s in spans],
        model=next((c.model for c in reversed(calls) if c.model), None),
        error=root.status_message or ("the request failed" if root.status_code == "ERROR" else None),
    )
    request.not_evaluated = _why_not(request, retrievers)
    return request


def _model_calls(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """The LLM spans that are model calls: an LLM span around another (LlamaIndex's predict around its chat)
    describes the same call, so only the innermost counts."""
    by_id = {s.span_id: s for s in spans}
    outer = set()
    for span in spans:
        if span.span_kind != "LLM":
            continue
        parent, seen = by_id.get(span.parent_id or ""), set()
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            if parent.span_kind == "LLM":
                outer.add(parent.span_id)
            parent = by_id.get(parent.parent_id or "")
    return [s for s in spans if s.span_kind == "LLM" and s.span_id not in outer]


def _root(spans: list[ReceivedSpan]) -> ReceivedSpan:
    roots = [s for s in spans if s.parent_id is None]
    return min(roots or spans, key=lambda s: s.started_at)


def _why_not(request: TracedRequest, retrievers: list[ReceivedSpan]) -> str | None:
    if request.error:
        return f"the application's request failed: {request.error}"
    if not retrievers:
        return "no retriever span: the trace holds no contexts to check an answer against"
    if not request.question:
        return "the root span has no input: no question"
    if not request.answer:
        return "the root span has no output: no answer"
    return None


def _question(root: ReceivedSpan, spans: list[ReceivedSpan]) -> str | None:
    """The root's input; failing that, what the first retriever was asked."""
    for span in [root, *(s for s in spans if s.span_kind == "RETRIEVER")]:
        text = _text_value(span.attributes.get("input.value"), span.attributes.get("input.mime_type"), _QUESTION_KEYS)
        if text:
            return text
    return None


def _text_value(value, mime_type, keys: tuple[str, ...]) -> str | None:
    """An input or output value as text: a string as it is; JSON (a string, or an object holding the text under
    one of `keys`, or under its only key) read."""
    if value is None:
        return None
    if isinstance(value, str) and (mime_type == "application/json" or value[:1] in '{["'):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, dict):
        found = next((value[k] for k in keys if isinstance(value.get(k), str)), None)
        strings = [v for v in value.values() if isinstance(v, str)]
        value = found if found is not None else (strings[0] if len(strings) == 1 else None)
    if isinstance(value, (list, tuple)) or value is None:
        return None
    return str(value).strip() or None


def _contexts(retrievers: list[ReceivedSpan]) -> list[GivenContext]:
    """The last reranker's output documents, else every retriever's documents (repeats dropped), in order."""
    rerankers = [s for s in retrievers if s.span_kind == "RERANKER"]
    chosen = rerankers[-1:] if rerankers else retrievers
    contexts, seen = [], set()
    for span in chosen:
        for document in _documents(span):
            if document.text not in seen:
                seen.add(document.text)
                contexts.append(document)
    return contexts


def _documents(span: ReceivedSpan) -> list[GivenContext]:
    prefix = "reranker.output_documents" if span.span_kind == "RERANKER" else "retrieval.documents"
    documents: dict[int, dict] = {}
    for key, value in span.attributes.items():
        match = _DOCUMENT.match(key)
        if match and match.group(1) == prefix:
            documents.setdefault(int(match.group(2)), {})[match.group(3)] = value
    for n, document in enumerate(span.attributes.get(prefix) or []):  # nested, as some exporters send it
        if isinstance(document, dict):
            documents.setdefault(n, {}).update({k.removeprefix("document."): v for k, v in document.items()})
    return [_context(d) for _, d in sorted(documents.items()) if isinstance(d.get("content"), str)]


def _context(document: dict) -> GivenContext:
    metadata = document.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = {}
    metadata = metadata if isinstance(metadata, dict) else {}
    source = metadata.get("file_name") or metadata.get("source") or metadata.get("file_path") or document.get("id")
    score = document.get("score")
    return GivenContext(
        text=document["content"],
        source=str(source) if source is not None else None,
        score=float(score) if isinstance(score, (int, float)) else None,
    )


def _call(span: ReceivedSpan) -> LLMCallRecord:
    """An LLM span as a model call of the application."""
    messages = _messages(span.attributes)
    prompt = json.dumps(messages["input"]) if messages["input"] else span.attributes.get("input.value")
    completion = "\n".join(m.get("content", "") for m in messages["output"]) or span.attributes.get("output.value")
    prompt_tokens = span.attributes.get("llm.token_count.prompt")
    completion_tokens = span.attributes.get("llm.token_count.completion")
    return LLMCallRecord(
        stage="application",
        model=str(span.attributes.get("llm.model_name") or "unknown"),
        digest=None,
        prompt_hash=hashlib.sha256(str(prompt or "").encode()).hexdigest(),
        prompt_tokens=int(prompt_tokens) if isinstance(prompt_tokens, (int, float)) else None,
        completion_tokens=int(completion_tokens) if isinstance(completion_tokens, (int, float)) else None,
        latency_ms=_ms(span) or 0.0,
        cache_hit=False,
        error=span.status_message if span.status_code == "ERROR" else None,
        started_at=span.started_at,
        origin=ORIGIN,
        backend=str(span.attributes["llm.provider"]) if span.attributes.get("llm.provider") else None,
        prompt_text=None if prompt is None else str(prompt),
        completion_text=None if completion is None else str(completion),
        span_id=span.span_id,
    )


def _messages(attributes: dict) -> dict[str, list[dict]]:
    found: dict[str, dict[int, dict]] = {"input": {}, "output": {}}
    for key, value in attributes.items():
        match = _MESSAGE.match(key)
        if match:
            found[match.group(1)].setdefault(int(match.group(2)), {})[match.group(3)] = value
    return {side: [m for _, m in sorted(by_n.items())] for side, by_n in found.items()}


def _run_span(span: ReceivedSpan) -> SpanRecord:
    """A received span as a step of the run's trace: its kind, model and tokens, and its input and output cut
    short (the whole span stays in received_spans)."""
    attributes = {k: span.attributes[k] for k in _SHOWN_ATTRIBUTES if k in span.attributes}
    for key in ("input.value", "output.value"):
        value = span.attributes.get(key)
        if value is not None:
            text = str(value)
            attributes[key] = text if len(text) <= _SHORT else text[:_SHORT] + "…"
    documents = len(_documents(span)) if span.span_kind in ("RETRIEVER", "RERANKER") else 0
    if documents:
        attributes["documents"] = documents
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
