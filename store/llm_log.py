"""The LLM response cache and the log of LLM calls made outside a run."""
from __future__ import annotations

import json

from store.db import Database, fetch_dicts, insert_rows
from store.records import CacheEntry, LLMCallRecord

CALL_COLUMNS = ["run_id", "stage", "model", "digest", "prompt_hash", "prompt_tokens", "completion_tokens",
                "latency_ms", "cache_hit", "error", "started_at"]


def call_rows(run_id: int | None, calls: list[LLMCallRecord]) -> list[list]:
    return [[run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens,
             c.latency_ms, c.cache_hit, c.error, c.started_at] for c in calls]


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls))


def insert_cache_entries(cur, entries: list[CacheEntry]) -> None:
    unique = {e.key: e for e in entries}.values()  # one statement may not name a key twice
    insert_rows(cur, "llm_cache", ["key", "model", "digest", "response"],
                [[e.key, e.model, e.digest, json.dumps(e.response)] for e in unique], verb="INSERT OR REPLACE")


def save_calls(db: Database, calls: list[LLMCallRecord], cache_entries: list[CacheEntry] = (),
               run_id: int | None = None) -> None:
    """Calls and cache entries made outside a question run."""
    with db.transaction() as cur:
        insert_calls(cur, run_id, calls)
        insert_cache_entries(cur, list(cache_entries))


def cache_get(db: Database, key: str) -> dict | None:
    with db.cursor() as cur:
        row = cur.execute("SELECT response FROM llm_cache WHERE key = ?", [key]).fetchone()
    return json.loads(row[0]) if row else None




def calls_for_run(db: Database, run_id: int) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(cur, f"SELECT id, {', '.join(CALL_COLUMNS)} FROM llm_calls WHERE run_id = ? ORDER BY id",
                           [run_id])
