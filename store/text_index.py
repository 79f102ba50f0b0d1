"""Which call texts the store already holds, kept in memory: each text's key (the first 64 bits of its sha256)
with its row id in llm_texts.

llm_texts has no index on the hash. At a million runs (19 million texts) every probe of an index on a random
key cost about a millisecond, whether to look a text up or to insert one under a primary key, so saving a
run's ~20 texts took 20-30 ms; texts now get sequential ids (a run's texts lie together, so reading them by id
touches one block) and the lookup happens here, at 16 bytes per distinct text (about 300 MB at 19 million).

The map holds committed rows only, so a text whose transaction rolled back is never taken for stored: it is
loaded at a connection's first write, topped up with the rows of higher id at each later connection, and a
transaction's new texts join it when the transaction commits. A text another process stored in between is
not known here and is stored once more under a new id: a copy, never a wrong text. Two different texts whose
sha256 agree in the first 64 bits (odds about 1 in 100,000 over 19 million texts) would share a row.
"""

from __future__ import annotations

import contextvars
import threading

import numpy as np

# The index of the store whose transaction this thread is in (set by Database.transaction).
ACTIVE: contextvars.ContextVar[TextIndex | None] = contextvars.ContextVar("active_text_index", default=None)

KEYS_SQL = "SELECT key, id FROM llm_texts WHERE id > ?"
COMPACT_AT = 100_000  # recent additions kept in a dict until they are merged into the sorted arrays


def text_key(text_hash: str) -> int:
    return int(text_hash[:16], 16)


class TextIndex:
    def __init__(self) -> None:
        self._keys = np.empty(0, np.uint64)  # sorted
        self._ids = np.empty(0, np.int64)
        self._recent: dict[int, int] = {}
        self._staged: dict[int, int] = {}
        self._max_id = 0
        self._stale = True
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    @property
    def nbytes(self) -> int:
        """Memory held by the sorted arrays (the recent additions' dict aside)."""
        return self._keys.nbytes + self._ids.nbytes

    def mark_stale(self) -> None:
        """A connection was (re)opened: rows another process wrote meanwhile are read at the next sync."""
        self._stale = True

    def sync(self, cur) -> None:
        """Read the committed rows this map has not seen (all of them the first time)."""
        with self._guard:
            if not self._stale:
                return
            first = len(self) == 0  # DuckDB sorts the first load faster than numpy would (2.4 s vs 4.6 s at 19M)
            found = cur.execute(KEYS_SQL + (" ORDER BY key" if first else ""), [self._max_id]).fetchnumpy()
            keys, ids = np.asarray(found["key"], np.uint64), np.asarray(found["id"], np.int64)
            if len(ids):
                self._max_id = max(self._max_id, int(ids.max()))
                if first:
                    self._keys, self._ids = keys, ids
                elif len(ids) > COMPACT_AT:
                    self._merge(keys, ids)
                else:
                    self._recent.update(zip(keys.tolist(), ids.tolist(), strict=True))
            self._stale = False

    def find(self, hashes) -> dict[str, int]:
        """hash -> row id of each of the texts (by hash) the store holds."""
        found = {}
        with self._guard:
            for h in hashes:
                key = text_key(h)
                row_id = self._recent.get(key)
                if row_id is None and len(self._keys):
                    at = int(np.searchsorted(self._keys, np.uint64(key)))
                    if at < len(self._keys) and int(self._keys[at]) == key:
                        row_id = int(self._ids[at])
                if row_id is not None:
                    found[h] = row_id
        return found

    def stage(self, rows) -> None:
        """(hash, id) of texts inserted by the open transaction; they join the map when it commits."""
        with self._guard:
            self._staged.update((text_key(h), row_id) for h, row_id in rows)

    def commit(self) -> None:
        with self._guard:
            if self._staged:
                self._max_id = max(self._max_id, max(self._staged.values()))
                self._recent.update(self._staged)
                self._staged = {}
            if len(self._recent) > COMPACT_AT:
                keys = np.fromiter(self._recent.keys(), np.uint64, len(self._recent))
                ids = np.fromiter(self._recent.values(), np.int64, len(self._recent))
                self._recent = {}
                self._merge(keys, ids)

    def rollback(self) -> None:
        with self._guard:
            self._staged = {}

    def _merge(self, keys: np.ndarray, ids: np.ndarray) -> None:
        keys = np.concatenate([self._keys, keys])
        ids = np.concatenate([self._ids, ids])
        order = np.argsort(keys, kind="stable")
        self._keys, self._ids = keys[order], ids[order]
