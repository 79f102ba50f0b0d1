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

from pipeline.tracing import tree
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
