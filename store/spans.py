"""The spans of each run's trace."""

from __future__ import annotations

import json

from store.db import Database, fetch_dicts, insert_rows
from store.records import SpanRecord

SPAN_COLUMNS = [
    "run_id",
    "eval_run_id",
    "span_id",
    "parent_id",
    "name",
    "started_at",
    "latency_ms",
    "error",
    "attributes",
]


def insert_spans(cur, spans: list[SpanRecord], run_id: int | None, eval_run_id: int | None = None) -> None:
    insert_rows(
        cur,
        "spans",
        SPAN_COLUMNS,
        [
            [
                run_id,
                eval_run_id,
                s.span_id,
                s.parent_id,
                s.name,
                s.started_at,
                s.latency_ms,
                s.error,
                json.dumps(s.attributes),
            ]
            for s in spans
        ],
    )


def spans_for_run(db: Database, run_id: int) -> list[SpanRecord]:
    """A run's spans in the order they started."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            "SELECT span_id, parent_id, name, started_at, latency_ms, error, attributes "
            "FROM spans WHERE run_id = ? ORDER BY started_at, span_id",
            [run_id],
        )
    return [
        SpanRecord(
            r["span_id"],
            r["parent_id"],
            r["name"],
            r["started_at"],
            r["latency_ms"],
            r["error"],
            json.loads(r["attributes"]) if r["attributes"] else {},
        )
        for r in rows
    ]
