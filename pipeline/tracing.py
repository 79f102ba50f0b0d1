"""Run traces: the steps of a run as a tree of spans, recorded through LlamaIndex's instrumentation.

Our own steps open spans on a LlamaIndex dispatcher (`step("retrieve")`), so LlamaIndex's own spans — the
retriever, every LLM chat, every embedding — nest under whichever step is active, and any handler on the
root dispatcher (an OpenInference exporter, for one) sees the same tree. One span handler keeps the spans
of traces being recorded (`recording()`) and ignores every other span, so nothing piles up outside a run.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.instrumentation import get_dispatcher, root_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index_instrumentation.span import active_span_id
from llama_index_instrumentation.span.simple import SimpleSpan
from llama_index_instrumentation.span_handlers import BaseSpanHandler

from store.records import SpanRecord

dispatcher = get_dispatcher("workbench")
# The attribute that says what a span does, for the trace explorer's search: one of SPAN_KINDS. LlamaIndex's spans
# get it from the object they run on; a step of ours that does such work names it (`step("retrieve",
# span_kind=RETRIEVER)`). Received spans get it from their tracing convention (pipeline/collect/assemble.py).
SPAN_KIND = "span_kind"
LLM, RETRIEVER, RERANKER, EMBEDDING, OTHER = "llm", "retriever", "reranker", "embedding", "other"
SPAN_KINDS = (LLM, RETRIEVER, RERANKER, EMBEDDING, OTHER)
# A received retriever's documents ({text, score, source} each), kept on its span; our own runs' are retrievals
# rows that name their span.
DOCUMENTS = "retrieved_documents"
_KIND_OF_CLASS = (
    (BaseLLM, LLM),
    (BaseEmbedding, EMBEDDING),
    (BaseRetriever, RETRIEVER),
    (BaseNodePostprocessor, RERANKER),
)
_UUID_SUFFIX = 37  # "-" + a uuid4, as LlamaIndex's span ids end


@dataclass
class _Open:
    record: SpanRecord
    t0: float


@dataclass
class Trace:
    """The spans of one run, in the order they started."""

    root_id: str
    spans: dict[str, _Open] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def records(self) -> list[SpanRecord]:
        """Every span so far; one still open (the root, while the run saves itself) gets its latency up to
        now, in a copy, so the open span still closes normally."""
        now = time.perf_counter()
        with self.lock:
            opened = list(self.spans.values())
        return [
            span.record
            if span.record.latency_ms is not None
            else dataclasses.replace(span.record, latency_ms=(now - span.t0) * 1000)
            for span in opened
        ]

    def annotate(self, span_id: str | None, **attributes: Any) -> None:
        with self.lock:
            span = self.spans.get(span_id or "")
        if span is not None:
            span.record.attributes.update(_plain(attributes))


class _TraceHandler(BaseSpanHandler[SimpleSpan]):
    """Collects the spans that descend from a recorded root; other spans pass by untouched."""

    def __init__(self) -> None:
        super().__init__()
        self._trace_of: dict[str, Trace] = {}
        self._roots: dict[str, Trace] = {}
        self._guard = threading.Lock()

    @classmethod
    def class_name(cls) -> str:
        return "WorkbenchTraceHandler"

    def span_enter(self, id_, bound_args, instance=None, parent_id=None, tags=None, **kwargs) -> None:
        with self._guard:
            trace = self._roots.get(id_) or self._trace_of.get(parent_id or "")
            if trace is None:
                return
            self._trace_of[id_] = trace
        opened = _opened_spans.get()
        if opened is not None:
            opened.append((id_, parent_id))
        record = SpanRecord(
            id_,
            parent_id if trace.root_id != id_ else None,
            _name(id_),
            datetime.now(timezone.utc),
            attributes=_attributes(bound_args, instance),
        )
        with trace.lock:
            trace.spans[id_] = _Open(record, time.perf_counter())

    def span_exit(self, id_, bound_args, instance=None, result=None, **kwargs) -> None:
        self._close(id_, None)

    def span_drop(self, id_, bound_args, instance=None, err=None, **kwargs) -> None:
        self._close(id_, f"{type(err).__name__}: {err}" if err is not None else "dropped")

    def _close(self, id_: str, error: str | None) -> None:
        with self._guard:
            trace = self._trace_of.get(id_)
        if trace is None:
            return
        with trace.lock:
            span = trace.spans.get(id_)
        if span is not None and span.record.latency_ms is None:
            span.record.latency_ms = (time.perf_counter() - span.t0) * 1000
            span.record.error = error

    def start(self, trace: Trace) -> None:
        with self._guard:
            self._roots[trace.root_id] = trace

    def finish(self, trace: Trace) -> None:
        with self._guard:
            self._roots.pop(trace.root_id, None)
            with trace.lock:
                span_ids = list(trace.spans)  # every span of the trace entered through span_enter
            for span_id in span_ids:
                self._trace_of.pop(span_id, None)

    # BaseSpanHandler's abstract hooks; span_enter/exit/drop above replace the machinery that calls them.
    def new_span(self, *args, **kwargs):
        return None

    def prepare_to_exit_span(self, *args, **kwargs):
        return None

    def prepare_to_drop_span(self, *args, **kwargs):
        return None


_handler = _TraceHandler()
root_dispatcher.add_span_handler(_handler)
_current_trace: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("workbench_trace", default=None)
# The recorded spans entered inside `innermost_span` (id, parent id), in the order they were entered.
_opened_spans: contextvars.ContextVar[list[tuple[str, str | None]] | None] = contextvars.ContextVar(
    "workbench_opened_spans", default=None
)


@contextmanager
def recording(name: str, **attributes: Any) -> Iterator[Trace]:
    """Record a trace rooted at a span called `name`; inside another recording it is just a step of it."""
    outer = _current_trace.get()
    if outer is not None:
        with step(name, **attributes):
            yield outer
        return
    trace = Trace(root_id=_new_id(name))
    _handler.start(trace)
    token = _current_trace.set(trace)
    try:
        with step(name, _span_id=trace.root_id, **attributes):
            yield trace
    finally:
        _reset(_current_trace, token)
        _handler.finish(trace)


@contextmanager
def step(name: str, _span_id: str | None = None, **attributes: Any) -> Iterator[str]:
    """A span for one step of the current run; yields its id (for `annotate`)."""
    span_id = _span_id or _new_id(name)
    bound = inspect.signature(_attributes_of).bind(**_plain(attributes))
    token = active_span_id.set(span_id)
    parent = token.old_value if token.old_value is not contextvars.Token.MISSING else None
    dispatcher.span_enter(id_=span_id, bound_args=bound, parent_id=parent)
    try:
        yield span_id
    except BaseException as exc:
        if isinstance(exc, GeneratorExit):
            dispatcher.span_drop(id_=span_id, bound_args=bound, err=RuntimeError("stopped before it finished"))
        else:
            dispatcher.span_drop(id_=span_id, bound_args=bound, err=exc)
        raise
    else:
        dispatcher.span_exit(id_=span_id, bound_args=bound)
    finally:
        _reset(active_span_id, token, fallback=parent)


def annotate(**attributes: Any) -> None:
    """Add attributes to the innermost active span of the current trace (a verdict, a score)."""
    trace = _current_trace.get()
    if trace is not None:
        trace.annotate(active_span_id.get(), **attributes)


def current_span_id() -> str | None:
    return active_span_id.get() if _current_trace.get() is not None else None


@contextmanager
def innermost_span(found: Callable[[str], None]) -> Iterator[None]:
    """Watch the spans a model request opens (LlamaIndex's `Ollama.chat` inside our step, its
    `_get_query_embedding` inside `get_query_embedding`) and hand the innermost to `found` when the block ends,
    failed or not: the last one entered that no other span entered in the block descends from (a retry's span
    after the failed attempt's). Nothing is handed over when the block opened no recorded span."""
    opened: list[tuple[str, str | None]] = []
    token = _opened_spans.set(opened)
    try:
        yield
    finally:
        _reset(_opened_spans, token)
        parents = {parent for _, parent in opened}
        leaves = [span_id for span_id, _ in opened if span_id not in parents]
        if leaves:
            found(leaves[-1])


def submit(pool: Executor, fn: Callable, *args: Any) -> Future:
    """Submit to a thread pool with a copy of the current context, so spans opened there join this trace."""
    return pool.submit(contextvars.copy_context().run, fn, *args)


def tree(spans: list[SpanRecord]) -> list[tuple[int, SpanRecord]]:
    """Spans depth-first with their depth, siblings in the order they started; orphans count as roots."""
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for span in sorted(spans, key=lambda s: s.started_at):
        children.setdefault(span.parent_id if span.parent_id in ids else None, []).append(span)
    ordered: list[tuple[int, SpanRecord]] = []
    stack = [(0, s) for s in reversed(children.get(None, []))]
    while stack:
        depth, span = stack.pop()
        ordered.append((depth, span))
        stack += [(depth + 1, c) for c in reversed(children.get(span.span_id, []))]
    return ordered


def _attributes_of(**attributes: Any) -> None:
    """The signature our steps' bound arguments are bound to (span handlers read bound_args.arguments)."""


def _attributes(bound_args: inspect.BoundArguments | None, instance: Any) -> dict:
    attributes: dict = {}
    if bound_args is not None:
        attributes.update(bound_args.arguments.get("attributes", {}))
    model = getattr(instance, "model", None) or getattr(instance, "model_name", None)
    if isinstance(model, str):
        attributes["model"] = model
    kind = next((kind for cls, kind in _KIND_OF_CLASS if isinstance(instance, cls)), None)
    if kind is not None:
        attributes.setdefault(SPAN_KIND, kind)
    return _plain(attributes)


def _plain(attributes: dict) -> dict:
    """JSON-safe attribute values (numbers, booleans, short strings)."""
    plain = {}
    for key, value in attributes.items():
        if isinstance(value, (bool, int, float)) or value is None:
            plain[key] = value
        else:
            plain[key] = str(value)[:500]
    return plain


def _name(span_id: str) -> str:
    return span_id[:-_UUID_SUFFIX] if len(span_id) > _UUID_SUFFIX and span_id[-_UUID_SUFFIX] == "-" else span_id


def _new_id(name: str) -> str:
    return f"{name}-{uuid.uuid4()}"


def _reset(var: contextvars.ContextVar, token: contextvars.Token, fallback: Any = None) -> None:
    try:
        var.reset(token)
    except ValueError:  # a generator closed from another context: put the parent back by hand
        var.set(fallback)
