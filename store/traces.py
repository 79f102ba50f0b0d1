"""Spans received from other applications (`collect`), and the traces waiting for the online worker."""

from __future__ import annotations

import json
from datetime import datetime

from store.db import Database, fetch_dicts, insert_rows
from store.evals import insert_scores
from store.records import ReceivedSpan, RunLog
from store.runs import insert_run, run_of_trace

RECEIVED_COLUMNS = [
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "span_kind",
    "service",
    "started_at",
    "ended_at",
    "status_code",
    "status_message",
    "attributes",
    "events",
    "received_at",
]


def insert_received(cur, spans: list[ReceivedSpan], received_at: datetime, all_new: bool = False) -> None:
    """Store spans as they arrived; a span already stored (a batch sent again) is kept as it was. With `all_new`,
    a plain INSERT that raises duckdb.ConstraintException when one of the spans is already stored (or twice in
    `spans`): half the cost of the conflict check of INSERT OR IGNORE (about 1 ms and 3 ms of CPU for a dozen
    spans), for a caller that writes again without it on that error (store/journal.save_received)."""
    rows = [
        [
            s.trace_id,
            s.span_id,
            s.parent_id,
            s.name,
            s.span_kind,
            s.service,
            s.started_at,
            s.ended_at,
            s.status_code,
            s.status_message,
            json.dumps(s.attributes),
            json.dumps(s.events) if s.events else None,
            received_at,
        ]
        for s in spans
    ]
    insert_rows(cur, "received_spans", RECEIVED_COLUMNS, rows, verb="INSERT" if all_new else "INSERT OR IGNORE")


def insert_traced(cur, log: RunLog, scores) -> int:
    """A traced run and its metric scores in the caller's transaction; a trace that has its run keeps it as it
    is (the scores are not added twice)."""
    found = run_of_trace(cur, log.run.trace_id)
    if found is not None:
        return found
    run_id = insert_run(cur, log)
    insert_scores(cur, None, None, run_id, scores)
    return run_id


def waiting_traces(db: Database, received_before: datetime, limit: int, skip: list[str] | None = None) -> list[str]:
    """Trace ids whose root span has ended (received before `received_before`) and that have no run yet, the
    oldest root first."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT s.trace_id FROM received_spans s "
            "WHERE s.parent_id IS NULL AND s.ended_at IS NOT NULL AND s.received_at <= ? "
            "AND NOT list_contains(?::VARCHAR[], s.trace_id) "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.trace_id = s.trace_id) "
            "ORDER BY s.ended_at, s.trace_id LIMIT ?",
            [received_before, list(skip or []), limit],
        ).fetchall()
    return list(dict.fromkeys(r[0] for r in rows))


def trace_spans(db: Database, trace_id: str) -> list[ReceivedSpan]:
    """Every span received for one trace, in the order they started."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            f"SELECT {', '.join(RECEIVED_COLUMNS[:-1])} FROM received_spans WHERE trace_id = ? "
            "ORDER BY started_at, span_id",
            [trace_id],
        )
    for row in rows:
        row["attributes"] = json.loads(row["attributes"]) if row["attributes"] else {}
        row["events"] = json.loads(row["events"]) if row["events"] else []
    return [ReceivedSpan(**row) for row in rows]


def received_counts(db: Database) -> dict:
    """How much has arrived: spans, traces, traces whose root has ended, and traces made into runs."""
    with db.cursor() as cur:
        spans, traces, ended = cur.execute(
            "SELECT count(*), count(DISTINCT trace_id), "
            "count(DISTINCT trace_id) FILTER (WHERE parent_id IS NULL AND ended_at IS NOT NULL) FROM received_spans"
        ).fetchone()
        runs = cur.execute("SELECT count(*) FROM runs WHERE trace_id IS NOT NULL").fetchone()[0]
    return {"spans": spans, "traces": traces, "ended": ended, "runs": runs}


def traced_summary(db: Database, limit: int = 5) -> dict:
    """How the traced runs were read: runs per tracing convention, runs not evaluated per reason's first clause,
    and the latest runs not evaluated with their reason in full (for collect's GET /)."""
    with db.cursor() as cur:
        conventions = cur.execute(
            "SELECT coalesce(trace_convention, 'none'), count(*) FROM runs WHERE trace_id IS NOT NULL "
            "GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
        reasons = cur.execute(
            "SELECT split_part(split_part(abstain_reason, ';', 1), ':', 1), count(*) FROM runs "
            "WHERE trace_id IS NOT NULL AND status = 'not_evaluated' GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
        latest = fetch_dicts(
            cur,
            "SELECT trace_id, pipeline AS service, trace_convention AS convention, abstain_reason AS reason "
            "FROM runs WHERE trace_id IS NOT NULL AND status = 'not_evaluated' ORDER BY started_at DESC, id DESC "
            "LIMIT ?",
            [limit],
        )
    return {
        "conventions": dict(conventions),
        "not_evaluated": {"by_reason": dict(reasons), "latest": latest},
    }
