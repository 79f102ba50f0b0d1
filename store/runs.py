"""Write one question's whole log in one transaction; read runs back."""

from __future__ import annotations

import dataclasses
import functools
import json

from store.db import Database, fetch_dicts, insert_rows
from store.llm_log import insert_calls
from store.records import GradeRecord, RunLog, RunRecord
from store.spans import insert_spans


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


# Columns of a run's row that no RunRecord field holds: its context grades (RunLog.grades, a JSON list read only
# with the run) and the lower-cased text that the history's text filter searches.
DERIVED_RUN_COLUMNS = ("grades", "search_text")


@functools.cache
def _run_insert(record_type) -> tuple[list[str], str]:
    """The record's fields and the INSERT writing them with the derived columns, one column per field."""
    names = field_names(record_type)
    columns = [*names, *DERIVED_RUN_COLUMNS]
    sql = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) RETURNING id"
    return names, sql


def run_of_trace(cur, trace_id: str | None) -> int | None:
    """The run already made from this received trace, if any (None for a run that is no traced one)."""
    if trace_id is None:
        return None
    found = cur.execute("SELECT id FROM runs WHERE trace_id = ? LIMIT 1", [trace_id]).fetchone()
    return found[0] if found else None


def insert_run(cur, log: RunLog) -> int:
    """Write one question's log with an open cursor (inside the caller's transaction). A traced run whose trace
    already has its run is not written again: that run's id is returned (one run per received trace)."""
    found = run_of_trace(cur, log.run.trace_id)
    if found is not None:
        return found
    names, sql = _run_insert(type(log.run))
    values = [_column_value(getattr(log.run, name)) for name in names]
    grades = json.dumps([{name: getattr(g, name) for name in field_names(GradeRecord)} for g in log.grades])
    search_text = f"{log.run.question} {log.run.answer or ''}".lower()
    run_id = cur.execute(sql, [*values, grades, search_text]).fetchone()[0]
    _insert_many(cur, "retrievals", run_id, log.retrievals)
    _insert_many(cur, "attempts", run_id, log.attempts)
    _insert_many(cur, "claims", run_id, log.claims)
    insert_calls(cur, run_id, log.calls, log.cache_entries)
    insert_spans(cur, log.spans, run_id)
    return run_id


def save_run(db: Database, log: RunLog) -> int:
    with db.transaction() as cur:
        return insert_run(cur, log)


def record_values(row: dict, record_type: type = RunRecord) -> dict:
    """The keyword arguments of the record's fields from its stored row (a run, or an attempt, as get_run reads
    them), each read by name; a dict or list field, a JSON column, is decoded."""
    return {f.name: _stored_value(f, row[f.name]) for f in dataclasses.fields(record_type)}


def _stored_value(f: dataclasses.Field, value):
    if f.default_factory in (dict, list) and isinstance(value, str):
        return json.loads(value)
    if f.default_factory in (dict, list) and value is None:
        return f.default_factory()
    return value


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
            SELECT r.* EXCLUDE (context_text, context_source), coalesce(c.text, r.context_text) AS text,
                   coalesce(d.path, rd.path, r.context_source) AS source
            FROM retrievals r
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
