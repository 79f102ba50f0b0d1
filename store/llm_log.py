"""The LLM response cache and the log of LLM calls, with their texts stored once per distinct text."""

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


def marks(values: list) -> str:
    """(?, ?, ...) for values: an IN list of parameters is looked up in the index (ANY(list) took 10x longer)."""
    return "(" + ", ".join("?" * len(values)) + ")"


def insert_texts(cur, texts) -> dict[str, int]:
    """Each distinct text once: hash -> row id of every text, inserting those the store does not hold yet.
    Inside Database.transaction the store's index of texts answers which it holds (see store/key_index.py);
    elsewhere (the journal's replay while the store opens) the hashes are looked up in the table."""
    unique = {text_hash(t): t for t in texts if t is not None}
    if not unique:
        return {}
    indexes = key_index.ACTIVE.get()
    index = indexes.texts if indexes is not None else None
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
            [[key_index.text_key(h) for h in new], new, [unique[h] for h in new]],
        ).fetchall()
        ids.update(rows)
        if index is not None:
            index.stage(rows)
    return ids


def insert_calls(cur, run_id: int | None, calls: list[LLMCallRecord]) -> None:
    text_ids = insert_texts(cur, [t for c in calls for t in (c.prompt_text, c.completion_text)])
    insert_rows(cur, "llm_calls", CALL_COLUMNS, call_rows(run_id, calls, text_ids))


def insert_cache_entries(cur, entries: list[CacheEntry]) -> None:
    """New keys are inserted, a key already cached is replaced (rare: the entries come from cache misses).
    Inside Database.transaction the store's index of cache keys says which are known (store/key_index.py)."""
    unique = {e.key: e for e in entries}  # one statement may not name a key twice
    if not unique:
        return
    indexes = key_index.ACTIVE.get()
    known = _known_cache_rows(cur, indexes.cache if indexes is not None else None, list(unique))
    for key, row_id in known.items():
        e = unique[key]
        cur.execute(
            "UPDATE llm_cache SET model = ?, digest = ?, response = ? WHERE id = ?",
            [e.model, e.digest, json.dumps(e.response), row_id],
        )
    new = [e for key, e in unique.items() if key not in known]
    if not new:
        return
    rows = cur.execute(
        "INSERT INTO llm_cache (id, key64, key, model, digest, response) SELECT nextval('llm_cache_id_seq'), "
        "unnest($1), unnest($2), unnest($3), unnest($4), unnest($5) RETURNING key, id",
        [
            [key_index.cache_key64(e.key) for e in new],
            [e.key for e in new],
            [e.model for e in new],
            [e.digest for e in new],
            [json.dumps(e.response) for e in new],
        ],
    ).fetchall()
    if indexes is not None:
        indexes.cache.stage(rows)


def _known_cache_rows(cur, index, keys: list[str]) -> dict[str, int]:
    """key -> row id of the keys already cached: candidates from the index (or the table, outside a transaction
    of Database), confirmed by their full key."""
    if index is not None:
        index.sync(cur)
        candidates = index.find(keys)
        if not candidates:
            return {}
        ids = list(candidates.values())
    else:
        ids = [r[0] for r in cur.execute("SELECT id FROM llm_cache WHERE key = ANY(?)", [keys]).fetchall()]
    asked = set(keys)
    rows = cur.execute("SELECT key, max(id) FROM llm_cache WHERE id = ANY(?) GROUP BY key", [ids]).fetchall()
    return {key: row_id for key, row_id in rows if key in asked}


def save_calls(
    db: Database, calls: list[LLMCallRecord], cache_entries: list[CacheEntry] = (), run_id: int | None = None
) -> None:
    """Calls and cache entries made outside a question run."""
    with db.transaction() as cur:
        insert_calls(cur, run_id, calls)
        insert_cache_entries(cur, list(cache_entries))


def cache_get(db: Database, key: str) -> dict | None:
    """The cached response for key: its row found through the store's index of cache keys, read by id and
    checked against the full key."""
    with db.cursor() as cur:
        db.indexes.cache.sync(cur)
        row_id = db.indexes.cache.find([key]).get(key)
        if row_id is None:
            return None
        row = cur.execute("SELECT key, response FROM llm_cache WHERE id = ?", [row_id]).fetchone()
    return json.loads(row[1]) if row and row[0] == key else None


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
