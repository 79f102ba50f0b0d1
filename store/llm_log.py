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

# What calls_for_run and calls_for_eval_run read per call; with_texts swaps the hashes for the texts.
CALL_SELECT = (
    "c.id, c.run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens, "
    "c.latency_ms, c.cache_hit, c.error, c.started_at, c.eval_run_id, c.origin, c.backend, c.span_id, "
    "c.prompt_text_hash, c.completion_text_hash"
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


def stored_keys(cur, table: str, column: str, keys) -> set:
    """Which of keys the table already holds (a lookup in its primary key's index)."""
    keys = list(keys)
    if not keys:
        return set()
    return {r[0] for r in cur.execute(f"SELECT {column} FROM {table} WHERE {column} IN {marks(keys)}", keys).fetchall()}


def marks(values: list) -> str:
    """(?, ?, ...) for values: an IN list of parameters is looked up in the index (ANY(list) took 10x longer)."""
    return "(" + ", ".join("?" * len(values)) + ")"


def insert_texts(cur, texts) -> None:
    """Each distinct text once: a text already stored (by any earlier call) is not written again. Looking the
    hashes up and inserting only new texts is several times faster than INSERT OR IGNORE on a large table."""
    unique = {text_hash(t): t for t in texts if t is not None}  # one statement may not name a key twice
    known = stored_keys(cur, "llm_texts", "hash", unique)
    insert_rows(cur, "llm_texts", ["hash", "text"], [[h, t] for h, t in unique.items() if h not in known])


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    insert_texts(cur, [t for c in calls for t in (c.prompt_text, c.completion_text)])
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls))


def insert_cache_entries(cur, entries: list[CacheEntry]) -> None:
    """New keys are inserted, a key already cached is replaced (rare: the entries come from cache misses)."""
    unique = {e.key: e for e in entries}  # one statement may not name a key twice
    known = stored_keys(cur, "llm_cache", "key", unique)
    for verb, keep in (("INSERT", lambda k: k not in known), ("INSERT OR REPLACE", lambda k: k in known)):
        insert_rows(
            cur,
            "llm_cache",
            ["key", "model", "digest", "response"],
            [[e.key, e.model, e.digest, json.dumps(e.response)] for e in unique.values() if keep(e.key)],
            verb=verb,
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


def with_texts(cur, calls: list[dict]) -> list[dict]:
    """The calls with their prompt and completion texts, looked up by hash in llm_texts' index (a join would
    scan every stored text: 27 ms instead of 1 at 100,000 runs)."""
    hashes = list({h for c in calls for h in (c["prompt_text_hash"], c["completion_text_hash"]) if h is not None})
    found = cur.execute(f"SELECT hash, text FROM llm_texts WHERE hash IN {marks(hashes)}", hashes) if hashes else None
    texts = dict(found.fetchall()) if found else {}
    for call in calls:
        call["prompt_text"] = texts.get(call.pop("prompt_text_hash"))
        call["completion_text"] = texts.get(call.pop("completion_text_hash"))
    return calls


def calls_for_run(db: Database, run_id: int) -> list[dict]:
    """A run's calls in order, each with its prompt and completion text (None when texts were off)."""
    with db.cursor() as cur:
        calls = fetch_dicts(cur, f"SELECT {CALL_SELECT} FROM llm_calls c WHERE c.run_id = ? ORDER BY c.id", [run_id])
        return with_texts(cur, calls) if calls else []


def calls_for_eval_run(db: Database, eval_run_id: int) -> list[dict]:
    """An evaluation's calls: those of its items' question runs and those tagged with its id."""
    with db.cursor() as cur:
        calls = fetch_dicts(
            cur,
            f"""
            SELECT {CALL_SELECT} FROM llm_calls c
            WHERE c.eval_run_id = ? OR c.run_id IN (SELECT run_id FROM eval_items WHERE eval_run_id = ?)
            ORDER BY c.id""",
            [eval_run_id, eval_run_id],
        )
        return with_texts(cur, calls) if calls else []
