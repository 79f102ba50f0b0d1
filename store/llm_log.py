"""The LLM response cache and the log of LLM calls, with their texts stored once per distinct text."""

from __future__ import annotations

import hashlib
import json

from store.db import Database, fetch_dicts, insert_rows
from store.records import CacheEntry, LLMCallRecord

CALL_COLUMNS = [
    "run_id",
    "stage",
    "model",
    "digest",
    "prompt_hash",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "cache_hit",
    "error",
    "started_at",
    "eval_run_id",
    "origin",
    "backend",
    "prompt_text_hash",
    "completion_text_hash",
    "span_id",
]

# What calls_for_run and calls_for_eval_run return per call: the columns, texts joined back.
CALL_SELECT = (
    "c.id, c.run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens, "
    "c.latency_ms, c.cache_hit, c.error, c.started_at, c.eval_run_id, c.origin, c.backend, c.span_id, "
    "p.text AS prompt_text, o.text AS completion_text"
)
CALL_FROM = (
    "llm_calls c LEFT JOIN llm_texts p ON p.hash = c.prompt_text_hash "
    "LEFT JOIN llm_texts o ON o.hash = c.completion_text_hash"
)


def text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def call_rows(run_id: int | None, calls: list[LLMCallRecord]) -> list[list]:
    return [
        [
            run_id,
            c.stage,
            c.model,
            c.digest,
            c.prompt_hash,
            c.prompt_tokens,
            c.completion_tokens,
            c.latency_ms,
            c.cache_hit,
            c.error,
            c.started_at,
            c.eval_run_id,
            c.origin,
            c.backend,
            text_hash(c.prompt_text),
            text_hash(c.completion_text),
            c.span_id,
        ]
        for c in calls
    ]


def insert_texts(cur, texts) -> None:
    """Each distinct text once: a text already stored (by any earlier call) is not written again."""
    unique = {text_hash(t): t for t in texts if t is not None}  # one statement may not name a key twice
    insert_rows(cur, "llm_texts", ["hash", "text"], [[h, t] for h, t in unique.items()], verb="INSERT OR IGNORE")


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    insert_texts(cur, [t for c in calls for t in (c.prompt_text, c.completion_text)])
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls))


def insert_cache_entries(cur, entries: list[CacheEntry]) -> None:
    unique = {e.key: e for e in entries}.values()  # one statement may not name a key twice
    insert_rows(
        cur,
        "llm_cache",
        ["key", "model", "digest", "response"],
        [[e.key, e.model, e.digest, json.dumps(e.response)] for e in unique],
        verb="INSERT OR REPLACE",
    )


def save_calls(
    db: Database, calls: list[LLMCallRecord], cache_entries: list[CacheEntry] = (), run_id: int | None = None
) -> None:
    """Calls and cache entries made outside a question run."""
    with db.transaction() as cur:
        insert_calls(cur, run_id, calls)
        insert_cache_entries(cur, list(cache_entries))


def cache_get(db: Database, key: str) -> dict | None:
    with db.cursor() as cur:
        row = cur.execute("SELECT response FROM llm_cache WHERE key = ?", [key]).fetchone()
    return json.loads(row[0]) if row else None


def calls_for_run(db: Database, run_id: int) -> list[dict]:
    """A run's calls in order, each with its prompt and completion text (None when texts were off)."""
    with db.cursor() as cur:
        return fetch_dicts(cur, f"SELECT {CALL_SELECT} FROM {CALL_FROM} WHERE c.run_id = ? ORDER BY c.id", [run_id])


def calls_for_eval_run(db: Database, eval_run_id: int) -> list[dict]:
    """An evaluation's calls: those of its items' question runs and those tagged with its id."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"""
            SELECT {CALL_SELECT} FROM {CALL_FROM}
            WHERE c.eval_run_id = ? OR c.run_id IN (SELECT run_id FROM eval_items WHERE eval_run_id = ?)
            ORDER BY c.id""",
            [eval_run_id, eval_run_id],
        )
