"""The LLM response cache and the log of LLM calls made outside a run."""
from __future__ import annotations

import json

from store.db import Database
from store.records import LLMCallRecord

CALL_COLUMNS = ("run_id, stage, model, digest, prompt_hash, prompt_tokens, completion_tokens, "
                "latency_ms, cache_hit, error, started_at")


def call_rows(run_id: int | None, calls: list[LLMCallRecord]) -> list[list]:
    return [[run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens,
             c.latency_ms, c.cache_hit, c.error, c.started_at] for c in calls]


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    if calls:
        cur.executemany(f"INSERT INTO llm_calls ({CALL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        call_rows(run_id, calls))


def save_calls(db: Database, calls: list[LLMCallRecord], run_id: int | None = None) -> None:
    with db.transaction() as cur:
        insert_calls(cur, run_id, calls)


def cache_get(db: Database, key: str) -> dict | None:
    with db.cursor() as cur:
        row = cur.execute("SELECT response FROM llm_cache WHERE key = ?", [key]).fetchone()
    return json.loads(row[0]) if row else None


def cache_put(db: Database, key: str, model: str, digest: str, response: dict) -> None:
    with db.cursor() as cur:
        cur.execute("INSERT OR REPLACE INTO llm_cache (key, model, digest, response) VALUES (?,?,?,?)",
                    [key, model, digest, json.dumps(response)])


def calls_for_run(db: Database, run_id: int) -> list[dict]:
    with db.cursor() as cur:
        rel = cur.execute(f"SELECT id, {CALL_COLUMNS} FROM llm_calls WHERE run_id = ? ORDER BY id", [run_id])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, row)) for row in rel.fetchall()]
