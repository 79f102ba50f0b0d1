"""The log of LLM calls, with their texts stored once per distinct text, and the LLM response cache, whose
entries are rows of the same table."""

from __future__ import annotations

import hashlib
import json

from store import key_index
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
    "first_computed_at",
]

# What calls_for_run and calls_for_eval_run read per call; with_texts swaps the text ids for the texts.
CALL_SELECT = (
    "c.id, c.run_id, c.stage, c.model, c.digest, c.prompt_hash, c.prompt_tokens, c.completion_tokens, "
    "c.latency_ms, c.cache_hit, c.error, c.started_at, c.eval_run_id, c.origin, c.backend, c.span_id, "
    "c.prompt_text_id, c.completion_text_id, c.first_computed_at"
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
                c.first_computed_at,
            ]
        )
    return rows


def marks(values: list) -> str:
    """(?, ?, ...) for values: an IN list of parameters is looked up in the index (ANY(list) took 10x longer)."""
    return "(" + ", ".join("?" * len(values)) + ")"


def insert_texts(cur, texts, cache_entries: list[CacheEntry] = ()) -> dict[str, int]:
    """Each distinct text once: hash -> row id of every text, inserting those the store does not hold yet, in the
    same statement as the cache entries (one table fewer per saved run: each table an insert touches costs
    about 0.7 ms). Inside Database.transaction the store's indexes answer which texts it holds (see
    store/key_index.py); elsewhere (a bare cursor) the hashes are looked up in the
    table."""
    unique = {text_hash(t): t for t in texts if t is not None}
    indexes = key_index.ACTIVE.get()
    ids = _known_texts(cur, indexes.texts if indexes is not None else None, list(unique)) if unique else {}
    new = [h for h in unique if h not in ids]
    entries = list({e.key: e for e in cache_entries}.values())  # the last reply of a key replaces the others
    if not new and not entries:
        return ids
    rows = cur.execute(
        "INSERT INTO llm_texts (id, key, hash, text, cache_key64) "
        "SELECT nextval('llm_texts_id_seq'), unnest($1), unnest($2), unnest($3), unnest($4) "
        "RETURNING hash, id, cache_key64 IS NOT NULL",
        [
            [key_index.text_key(h) for h in new] + [None] * len(entries),
            new + [e.key for e in entries],
            [unique[h] for h in new] + [cache_text(e) for e in entries],
            [None] * len(new) + [key_index.cache_key64(e.key) for e in entries],
        ],
    ).fetchall()
    stored_texts = [(h, row_id) for h, row_id, cached in rows if not cached]
    ids.update(stored_texts)
    if indexes is not None:
        indexes.texts.stage(stored_texts)
        indexes.cache.stage([(key, row_id) for key, row_id, cached in rows if cached])
    return ids


def _known_texts(cur, index, hashes: list[str]) -> dict[str, int]:
    if index is not None:
        index.sync(cur)
        return index.find(hashes)
    found = cur.execute(
        f"SELECT hash, min(id) FROM llm_texts WHERE hash IN {marks(hashes)} AND key IS NOT NULL GROUP BY hash", hashes
    )
    return dict(found.fetchall())


def cache_text(entry: CacheEntry) -> str:
    """A cache entry as the text stored under its key (its row's `hash` holds the full key)."""
    return json.dumps({"model": entry.model, "digest": entry.digest, "response": entry.response})


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord], cache_entries: list[CacheEntry] = ()) -> None:
    """The calls with their texts, and the response-cache entries of the calls that missed it."""
    text_ids = insert_texts(cur, [t for c in calls for t in (c.prompt_text, c.completion_text)], cache_entries)
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls, text_ids))


def save_calls(
    db: Database,
    calls: list[LLMCallRecord],
    cache_entries: list[CacheEntry] = (),
    run_id: int | None = None,
    lock_timeout_s: float | None = None,
) -> None:
    """Calls and cache entries made outside a question run."""
    with db.transaction(lock_timeout_s) as cur:
        insert_calls(cur, run_id, calls, list(cache_entries))


def cache_get(db: Database, key: str) -> dict | None:
    """The cached response for key: the newest entry of the key found through the store's index of cache keys,
    read by id and checked against the full key. Cache entries are rows of llm_texts (see insert_texts). A cache
    read can be done without: it waits only briefly for a store another process holds (Database.optional_cursor)
    and raises StoreLocked after that, which the caller takes as a miss."""
    with db.optional_cursor() as cur:
        db.indexes.cache.sync(cur)
        row_id = db.indexes.cache.find([key]).get(key)
        if row_id is None:
            return None
        row = cur.execute("SELECT hash, text FROM llm_texts WHERE id = ?", [row_id]).fetchone()
    return json.loads(row[1])["response"] if row and row[0] == key else None


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
