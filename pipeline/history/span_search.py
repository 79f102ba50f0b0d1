"""Spans searched across runs (or within one): by name, kind, duration and error, as "runs whose retrieval took
over 1 s" or "LLM spans that failed" ask. One query against the store's spans, our own runs' and received
traces' alike; each span found names its run, so a result opens the run's drilldown.

A span's kind is its `span_kind` attribute (pipeline/tracing.py, pipeline/collect/assemble.py); spans stored
before spans carried one are kinded by their name or by their convention's own kind, in SQL and in Python alike
(`KIND_SQL`, `span_kind`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.errors import WorkbenchError
from pipeline.tracing import EMBEDDING, LLM, OTHER, RERANKER, RETRIEVER, SPAN_KIND, SPAN_KINDS
from store.db import Database, fetch_dicts

LIMIT = 200
# A received span's kind as its convention names it (OpenInference, gen_ai.operation.name, traceloop), lowercased.
_CONVENTION_KINDS = {
    LLM: ("llm", "chat", "text_completion", "completion", "generate_content"),
    RETRIEVER: ("retriever",),
    RERANKER: ("reranker",),
    EMBEDDING: ("embedding", "embeddings"),
}
_LLM_NAME = r"\.(a?stream_)?a?(chat|complete)$"  # LlamaIndex's `Ollama.chat`, `OpenAILike.stream_chat`, ...


def _kind_sql() -> str:
    attribute = f"json_extract_string(attributes, '$.{SPAN_KIND}')"
    convention = "lower(json_extract_string(attributes, '$.kind'))"
    by_convention = " ".join(
        f"WHEN {convention} IN ({', '.join(repr(k) for k in kinds)}) THEN '{kind}'"
        for kind, kinds in _CONVENTION_KINDS.items()
    )
    return f"""CASE
        WHEN {attribute} IS NOT NULL THEN {attribute}
        WHEN json_extract_string(attributes, '$.convention') IS NOT NULL THEN
            CASE {by_convention} ELSE '{OTHER}' END
        WHEN name = 'retrieve' OR name ILIKE '%retriever%' THEN '{RETRIEVER}'
        WHEN name ILIKE '%rerank%' THEN '{RERANKER}'
        WHEN name ILIKE '%embedding%' THEN '{EMBEDDING}'
        WHEN regexp_matches(name, '{_LLM_NAME}') THEN '{LLM}'
        ELSE '{OTHER}' END"""


KIND_SQL = _kind_sql()


def span_kind(name: str, attributes: dict) -> str:
    """What a span does (one of SPAN_KINDS), as KIND_SQL reads it in the store."""
    if attributes.get(SPAN_KIND):
        return str(attributes[SPAN_KIND])
    if attributes.get("convention") is not None:
        named = str(attributes.get("kind") or "").lower()
        return next((kind for kind, kinds in _CONVENTION_KINDS.items() if named in kinds), OTHER)
    lowered = name.lower()
    if name == "retrieve" or "retriever" in lowered:
        return RETRIEVER
    if "rerank" in lowered:
        return RERANKER
    if "embedding" in lowered:
        return EMBEDDING
    return LLM if re.search(_LLM_NAME, name) else OTHER


@dataclass(frozen=True)
class SpanQuery:
    """Which spans to find: every condition given must hold. `name` is a part of the span's name (any case);
    `min_ms` and `max_ms` bound its duration; `errors` keeps only spans that failed; `run_id` keeps one run's."""

    name: str = ""
    kind: str | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    errors: bool = False
    run_id: int | None = None
    limit: int = LIMIT

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in SPAN_KINDS:
            raise WorkbenchError(f"unknown span kind {self.kind!r}: use one of {', '.join(SPAN_KINDS)}")
        for label, value in (("the shortest duration", self.min_ms), ("the longest duration", self.max_ms)):
            if value is not None and value < 0:
                raise WorkbenchError(f"{label} must be 0 ms or more, not {value:g}")
        if self.min_ms is not None and self.max_ms is not None and self.min_ms > self.max_ms:
            raise WorkbenchError(
                f"the shortest duration ({self.min_ms:g} ms) is longer than the longest ({self.max_ms:g} ms)"
            )
        if self.limit < 1:
            raise WorkbenchError(f"the number of spans shown must be at least 1, not {self.limit}")

    def matches(self, name: str, kind: str, latency_ms: float | None, error: str | None) -> bool:
        """Whether one span holds every condition, as `where` asks the store (within a run's trace)."""
        if self.name.strip() and self.name.strip().lower() not in name.lower():
            return False
        if self.kind is not None and kind != self.kind:
            return False
        if self.min_ms is not None and (latency_ms is None or latency_ms < self.min_ms):
            return False
        if self.max_ms is not None and (latency_ms is None or latency_ms > self.max_ms):
            return False
        return not self.errors or error is not None

    @property
    def asks(self) -> bool:
        """Whether any condition is set (run_id aside)."""
        bounds = (self.kind, self.min_ms, self.max_ms)
        return bool(self.name.strip()) or self.errors or any(v is not None for v in bounds)

    def where(self) -> tuple[str, list]:
        conditions, values = ["s.run_id IS NOT NULL"], []
        if self.name.strip():
            conditions.append("contains(lower(s.name), lower(?))")
            values.append(self.name.strip())
        if self.kind is not None:
            conditions.append(f"({KIND_SQL}) = ?")
            values.append(self.kind)
        if self.min_ms is not None:
            conditions.append("s.latency_ms >= ?")
            values.append(self.min_ms)
        if self.max_ms is not None:
            conditions.append("s.latency_ms <= ?")
            values.append(self.max_ms)
        if self.errors:
            conditions.append("s.error IS NOT NULL")
        if self.run_id is not None:
            conditions.append("s.run_id = ?")
            values.append(self.run_id)
        return " AND ".join(conditions), values


@dataclass(frozen=True)
class SpanHits:
    spans: list[dict]  # the slowest first: run_id, span_id, name, kind, latency_ms, error, started_at, run's question
    total: int  # spans matching, shown or not
    runs: int  # runs with a matching span


def search_spans(db: Database, query: SpanQuery) -> SpanHits:
    """The spans matching the query, the slowest first (at most query.limit), with how many match in all and in
    how many runs."""
    where, values = query.where()
    with db.cursor() as cur:
        counted = cur.execute(f"SELECT count(*), count(DISTINCT run_id) FROM spans s WHERE {where}", values)
        total, runs = counted.fetchone()
        # the slowest first, then their kind and their run's question: only for the spans shown
        spans = fetch_dicts(
            cur,
            f"""
            WITH shown AS (
                SELECT run_id, span_id, name, latency_ms, error, started_at, attributes FROM spans s WHERE {where}
                ORDER BY latency_ms DESC NULLS LAST, run_id DESC, span_id LIMIT ?
            )
            SELECT s.run_id, s.span_id, s.name, {KIND_SQL} AS kind, s.latency_ms, s.error, s.started_at,
                   r.kind AS run_kind, r.question
            FROM shown s LEFT JOIN runs r ON r.id = s.run_id
            ORDER BY s.latency_ms DESC NULLS LAST, s.run_id DESC, s.span_id""",
            [*values, query.limit],
        )
    return SpanHits(spans, total, runs)
