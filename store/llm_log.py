"""The LLM response cache and the log of LLM calls, with their texts stored once per distinct text."""

from __future__ import annotations

import hashlib
import json

from store import text_index
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
    "prompt_text_id",
    "completion_text_id",
]

# What calls_for_run and calls_for_eval_run read per call; with_texts swaps the text ids for the texts.
CALL_SELECT = (
    "c.id, c.run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens, "
    "c.latency_ms, c.cache_hit, c.error, c.started_at, c.eval_run_id, c.origin, c.backend, c.span_id, "
    "c.prompt_text_id, c.completion_text_id"
)


def text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def call_rows(run_id: int | None, calls: list[LLMCallRecord], text_ids: dict[str, int] | None = None) -> list[list]:
    text_ids = text_ids or {}
    rows = []
    for c in calls:
        prompt, completion = text_hash(c.prompt_text), text_hash(c.completion_text)
        rows.append(
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
                prompt,
                completion,
                c.span_id,
                text_ids.get(prompt),
                text_ids.get(completion),
            ]
        )
    return rows


def stored_keys(cur, table: str, column: str, keys) -> set:
    """Which of keys the table already holds (a lookup in its primary key's index)."""
    keys = list(keys)
    if not keys:
        return set()
    return {r[0] for r in cur.execute(f"SELECT {column} FROM {table} WHERE {column} IN {marks(keys)}", keys).fetchall()}


def marks(values: list) -> str:
    """(?, ?, ...) for values: an IN list of parameters is looked up in the index (ANY(list) took 10x longer)."""
    return "(" + ", ".join("?" * len(values)) + ")"


def insert_texts(cur, texts) -> dict[str, int]:
    """Each distinct text once: hash -> row id of every text, inserting those the store does not hold yet.
    Inside Database.transaction the store's TextIndex answers which it holds (see store/text_index.py);
    elsewhere (the journal's replay while the store opens) the hashes are looked up in the table."""
    unique = {text_hash(t): t for t in texts if t is not None}
    if not unique:
        return {}
    index = text_index.ACTIVE.get()
    if index is not None:
        index.sync(cur)
        ids = index.find(unique)
    else:
        hashes = list(unique)
        ids = dict(
            cur.execute(
                f"SELECT hash, min(id) FROM llm_texts WHERE hash IN {marks(hashes)} GROUP BY hash", hashes
            ).fetchall()
        )
    new = [h for h in unique if h not in ids]
    if new:
        rows = cur.execute(
            "INSERT INTO llm_texts (id, key, hash, text) "
            "SELECT nextval('llm_texts_id_seq'), unnest($1), unnest($2), unnest($3) RETURNING hash, id",
            [[text_index.text_key(h) for h in new], new, [unique[h] for h in new]],
        ).fetchall()
        ids.update(rows)
        if index is not None:
            index.stage(rows)
    return ids


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    text_ids = insert_texts(cur, [t for c in calls for t in (c.prompt_text, c.completion_text)])
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls, text_ids))


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
    """The calls with their prompt and completion texts, read by id: a run's texts were stored together, so the
    scan reads only the row groups whose id range holds them (`= ANY(list)` filters inside the scan: 2 ms at
    19 million texts, where `IN (?, ...)` read every text of those row groups and then joined: 23 ms)."""
    ids = list({i for c in calls for i in (c["prompt_text_id"], c["completion_text_id"]) if i is not None})
    found = cur.execute("SELECT id, text FROM llm_texts WHERE id = ANY(?)", [ids]) if ids else None
    texts = dict(found.fetchall()) if found else {}
    for call in calls:
        call["prompt_text"] = texts.get(call.pop("prompt_text_id"))
        call["completion_text"] = texts.get(call.pop("completion_text_id"))
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
