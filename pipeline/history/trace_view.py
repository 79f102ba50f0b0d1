"""One run's trace laid out for the trace viewer: the span tree as rows (depth, start offset from the trace's
start, duration, calls linked to each span), folding, and the calls of one span.

Pure functions over stored spans and calls, for our own traces and received ones alike: a received trace's
calls (origin 'traced') link to its spans by span_id as ours do.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from pipeline.history.span_search import span_kind
from pipeline.tracing import DOCUMENTS, OTHER, SPAN_KIND, tree
from store.records import SpanRecord


@dataclass(frozen=True)
class SpanRow:
    """One span as a row of the tree and a bar of the waterfall."""

    span_id: str
    parent_id: str | None
    name: str
    depth: int
    start_ms: float  # from the start of the trace's first span
    duration_ms: float | None  # None: the span never closed
    calls: int  # model calls linked to this span itself
    children: int
    error: str | None = None
    attributes: dict = field(default_factory=dict)

    @property
    def end_ms(self) -> float:
        return self.start_ms + (self.duration_ms or 0.0)

    @property
    def kind(self) -> str:
        """What the span does: llm, retriever, reranker, embedding or other (pipeline/history/span_search.py)."""
        return span_kind(self.name, self.attributes)


@dataclass(frozen=True)
class SpanDocument:
    """A document a retriever span returned, as the explorer shows it."""

    rank: int
    text: str
    score: float | None
    source: str | None


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def trace_rows(spans: list[SpanRecord], calls: list[dict]) -> list[SpanRow]:
    """The spans depth-first (siblings in the order they started), each with its offset from the trace start."""
    if not spans:
        return []
    spans = [replace(s, started_at=_utc(s.started_at)) for s in spans]  # naive times (as UTC) beside aware ones
    start = min(s.started_at for s in spans)
    own_calls = Counter(c.get("span_id") for c in calls)
    ordered = tree(spans)
    ids = {s.span_id for s in spans}
    children = Counter(s.parent_id for s in spans if s.parent_id in ids)
    return [
        SpanRow(
            span_id=span.span_id,
            parent_id=span.parent_id if span.parent_id in ids else None,
            name=span.name,
            depth=depth,
            start_ms=(span.started_at - start).total_seconds() * 1000,
            duration_ms=span.latency_ms,
            calls=own_calls.get(span.span_id, 0),
            children=children.get(span.span_id, 0),
            error=span.error,
            attributes=dict(span.attributes),
        )
        for depth, span in ordered
    ]


def visible_rows(rows: list[SpanRow], folded: Collection[str] = (), max_depth: int | None = None) -> list[SpanRow]:
    """The rows left when the folded spans' descendants are hidden, and those deeper than max_depth."""
    shown: list[SpanRow] = []
    hidden_below: int | None = None  # depth of the folded span whose subtree is being skipped
    for row in rows:
        if hidden_below is not None:
            if row.depth > hidden_below:
                continue
            hidden_below = None
        if max_depth is not None and row.depth > max_depth:
            continue
        shown.append(row)
        if row.span_id in folded and row.children:
            hidden_below = row.depth
    return shown


def tree_label(row: SpanRow) -> str:
    """The row's name indented by its depth."""
    return " " * row.depth + ("└ " if row.depth else "") + row.name


def fold_marker(row: SpanRow, folded: Collection[str] = ()) -> str:
    """'▸ 3' for a folded span with 3 child spans, '▾ 3' for an open one, '' for a leaf."""
    if not row.children:
        return ""
    return f"{'▸' if row.span_id in folded else '▾'} {row.children}"


def calls_of(span_id: str | None, calls: list[dict]) -> list[dict]:
    """The model calls linked to one span, in the order they started."""
    if span_id is None:
        return []
    linked = [c for c in calls if c.get("span_id") == span_id]
    earliest = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(linked, key=lambda c: _utc(c["started_at"]) if c.get("started_at") else earliest)


def span_documents(row: SpanRow, retrievals: list[dict]) -> list[SpanDocument]:
    """The documents the span retrieved, in rank order: our own runs' retrievals name the span of their round's
    `retrieve` step; a received retriever keeps its documents on the span itself."""
    kept = row.attributes.get(DOCUMENTS)
    if isinstance(kept, list):
        return [
            SpanDocument(n, str(d.get("text") or ""), d.get("score"), d.get("source"))
            for n, d in enumerate(kept, start=1)
            if isinstance(d, dict)
        ]
    own = sorted((r for r in retrievals if r.get("span_id") == row.span_id), key=lambda r: r["rank"])
    return [SpanDocument(r["rank"], r.get("text") or "", r.get("score"), r.get("source")) for r in own]


def shown_attributes(row: SpanRow) -> dict:
    """The attributes listed in the span's detail: the documents are shown as documents, not as one long value, and
    the kind heads the detail."""
    return {k: v for k, v in row.attributes.items() if k not in (DOCUMENTS, SPAN_KIND)}


def calls_below(row: SpanRow, rows: list[SpanRow], calls: list[dict]) -> int:
    """How many model calls the span's descendants made (its subtree, the span itself left out)."""
    start = rows.index(row)
    below = set()
    for other in rows[start + 1 :]:
        if other.depth <= row.depth:
            break
        below.add(other.span_id)
    return sum(c.get("span_id") in below for c in calls)


def picker_label(row: SpanRow, number: int) -> str:
    """The span in the span picker: its number in tree order, indented by its depth, its kind when it has one."""
    kind = "" if row.kind == OTHER else f"  ({row.kind})"
    return f"{number}. " + "\u00a0\u00a0" * row.depth + row.name + kind + (" · failed" if row.error else "")


def unlinked_calls(rows: list[SpanRow], calls: list[dict]) -> int:
    """How many calls link to no span of the trace (calls from before spans were recorded, for one)."""
    ids = {r.span_id for r in rows}
    return sum(c.get("span_id") not in ids for c in calls)


def prompt_as_text(prompt: str | None) -> str:
    """Chat messages (stored as JSON) as role-headed text; anything else as it is."""
    try:
        messages = json.loads(prompt or "")
    except ValueError:
        return prompt or ""
    if not isinstance(messages, list):
        return prompt or ""
    return "\n\n".join(
        f"[{m.get('role', '?')}]\n{m.get('content', '')}" if isinstance(m, dict) else str(m) for m in messages
    )
