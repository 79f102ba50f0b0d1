"""Which rows of llm_texts, keyed by a random string (a call text by its sha256, a response-cache entry by its
key), the store holds, kept in memory: each key's first 64 bits with the row's sequential id.

llm_texts has no index on its random keys. At a million runs (19 million texts, 13 million cache entries) every
probe of such an index cost about a millisecond, whether to look a key up or to insert one under a primary key,
so saving a run's ~20 texts and 4 cache entries took 20-30 ms. Its rows get sequential ids (a run's rows lie
together, so reading them by id touches one row group) and the lookup happens here, at 16 bytes per row (about
300 MB for 19 million texts). A save looks up its texts; cache entries are written without a lookup (they come
from cache misses; a newer entry of a key supersedes an older one), so the cache keys load at the first lookup.

The map holds committed rows only, so a row whose transaction rolled back is never taken for stored: it is
loaded at a connection's first use, topped up with the rows of higher id at each later connection, and a
transaction's new rows join it when the transaction commits. A text another process stored in between is
not known here and is stored once more under a new id: a copy, never a wrong text. Two different texts whose
sha256 agree in the first 64 bits (odds about 1 in 100,000 over 19 million texts) would share a row; a cache
entry is read back with its full key and compared, so a cache lookup is exact.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

COMPACT_AT = 100_000  # recent additions kept in a dict until they are merged into the sorted arrays


def text_key(text_hash: str) -> int:
    """A text's key: its sha256 (hex) already is a random string, so its first 64 bits."""
    return int(text_hash[:16], 16)


def cache_key64(key: str) -> int:
    """A cache entry's key, whatever its form: the first 64 bits of its sha256."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)


class KeyIndex:
    def __init__(self, table: str, column: str, key_of: Callable[[str], int]) -> None:
        """table's `column` holds key_of(the row's key) for each row, next to its sequential `id`."""
        self.keys_sql = f"SELECT {column}, id FROM {table} WHERE id > ? AND {column} IS NOT NULL"
        self.key_of = key_of
        self._keys = np.empty(0, np.uint64)  # sorted, ties by id
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
            found = cur.execute(self.keys_sql + (" ORDER BY 1, id" if first else ""), [self._max_id]).fetchnumpy()
            keys, ids = np.asarray(next(iter(found.values())), np.uint64), np.asarray(found["id"], np.int64)
            if len(ids):
                self._max_id = max(self._max_id, int(ids.max()))
                if first:
                    self._keys, self._ids = keys, ids
                elif len(ids) > COMPACT_AT:
                    self._merge(keys, ids)
                else:
                    self._recent.update(zip(keys.tolist(), ids.tolist(), strict=True))
            self._stale = False

    def find(self, names) -> dict[str, int]:
        """name -> row id of each of the keys (texts' hashes, cache keys) the store holds."""
        found = {}
        with self._guard:
            for h in names:
                key = self.key_of(h)
                row_id = self._recent.get(key)
                if row_id is None and len(self._keys):  # the newest row of a key stored more than once
                    at = int(np.searchsorted(self._keys, np.uint64(key), side="right")) - 1
                    if at >= 0 and int(self._keys[at]) == key:
                        row_id = int(self._ids[at])
                if row_id is not None:
                    found[h] = row_id
        return found

    def stage(self, rows) -> None:
        """(name, id) of rows inserted by the open transaction; they join the map when it commits."""
        with self._guard:
            self._staged.update((self.key_of(h), row_id) for h, row_id in rows)

    def commit(self) -> None:
        with self._guard:
            if self._stale:  # not loaded since the connection opened: the next sync reads these rows with the rest
                self._staged = {}
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
        order = np.argsort(keys, kind="stable")  # the new rows (higher ids) stay after older rows of a key
        self._keys, self._ids = keys[order], ids[order]


@dataclass
class StoreIndexes:
    """The in-memory indexes of one store."""

    texts: KeyIndex = field(default_factory=lambda: KeyIndex("llm_texts", "key", text_key))
    cache: KeyIndex = field(default_factory=lambda: KeyIndex("llm_texts", "cache_key64", cache_key64))

    def each(self) -> tuple[KeyIndex, KeyIndex]:
        return self.texts, self.cache


# The indexes of the store whose transaction this thread is in (set by Database.transaction).
ACTIVE: contextvars.ContextVar[StoreIndexes | None] = contextvars.ContextVar("active_store_indexes", default=None)
