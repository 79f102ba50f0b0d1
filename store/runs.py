"""Write one question's whole log in one transaction; read runs back."""

from __future__ import annotations

import dataclasses
import functools
import json

from store.db import Database, fetch_dicts, insert_rows
from store.llm_log import insert_calls
from store.records import GradeRecord, RunLog, RunRecord
from store.spans import insert_spans

RUN_FIELDS = (
    "kind",
    "question",
    "status",
    "answer",
    "faithfulness",
    "n_claims",
    "n_supported",
    "n_attempts",
    "final_attempt",
    "rewritten_query",
    "abstain_reason",
    "error",
    "generator_model",
    "config",
    "started_at",
    "finished_at",
    "latency_ms",
    "grades",
)


def _insert_many(cur, table: str, run_id: int, records: list) -> None:
    if not records:
        return
    names = field_names(type(records[0]))
    rows = [[run_id] + [_column_value(getattr(r, name)) for name in names] for r in records]
    insert_rows(cur, table, ["run_id", *names], rows)


@functools.cache
def field_names(record_type) -> list[str]:
    """The record's fields, read per attribute: asdict's deep copy took half a millisecond per saved run."""
    return [f.name for f in dataclasses.fields(record_type)]


def _column_value(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def insert_run(cur, log: RunLog) -> int:
    """Write one question's log with an open cursor (inside the caller's transaction)."""
    run = {name: getattr(log.run, name) for name in field_names(RunRecord)}
    run["config"] = json.dumps(run["config"])
    run["grades"] = json.dumps([{name: getattr(g, name) for name in field_names(GradeRecord)} for g in log.grades])
    run["search_text"] = f"{run['question']} {run['answer'] or ''}".lower()
    fields = RUN_FIELDS + ("search_text",)
    run_id = cur.execute(
        f"INSERT INTO runs ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))}) RETURNING id",
        [run[name] for name in fields],
    ).fetchone()[0]
    _insert_many(cur, "retrievals", run_id, log.retrievals)
    _insert_many(cur, "attempts", run_id, log.attempts)
    _insert_many(cur, "claims", run_id, log.claims)
    insert_calls(cur, run_id, log.calls, log.cache_entries)
    insert_spans(cur, log.spans, run_id)
    return run_id


def save_run(db: Database, log: RunLog) -> int:
    with db.transaction() as cur:
        return insert_run(cur, log)


def get_run(db: Database, run_id: int) -> dict | None:
    """One run with its grades, retrievals (with chunk text and source), attempts and claims."""
    with db.cursor() as cur:
        runs = fetch_dicts(cur, "SELECT * EXCLUDE (search_text) FROM runs WHERE id = ?", [run_id])
        if not runs:
            return None
        run = runs[0]
        run["grades"] = sorted(json.loads(run["grades"] or "[]"), key=lambda g: g["round"])
        run["retrievals"] = fetch_dicts(
            cur,
            """
            SELECT r.*, c.text, coalesce(d.path, rd.path) AS source FROM retrievals r
            LEFT JOIN chunks c ON c.id = r.chunk_id LEFT JOIN documents d ON d.id = c.document_id
            LEFT JOIN retired_documents rd ON rd.id = c.document_id
            WHERE r.run_id = ? ORDER BY r.round, r.rank""",
            [run_id],
        )
        run["attempts"] = fetch_dicts(cur, "SELECT * FROM attempts WHERE run_id = ? ORDER BY attempt_no", [run_id])
        run["claims"] = fetch_dicts(
            cur, "SELECT * FROM claims WHERE run_id = ? ORDER BY attempt_no, claim_no", [run_id]
        )
    return run
