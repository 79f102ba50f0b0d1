"""The embedding model's measured similarity scale (pipeline/knowledge/similarity_scale.py measures it), one row
per embedding model, digest and knowledge-base fingerprint."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from store.db import Database, fetch_dicts


@dataclass
class StoredScale:
    embed_model: str
    digest: str
    kb_fingerprint: str
    n_pairs: int
    n_probes: int
    n_chunks: int
    median: float
    sample: list[float]  # sorted
    measured_at: datetime | None = None


FIELDS = [f.name for f in fields(StoredScale)]  # the table's columns, one per field
COLUMNS = ", ".join(FIELDS)
MEASURED = FIELDS[:-1]  # what a measurement gives, `sample` last; measured_at is the store's clock


def _present(cur) -> bool:
    """A store opened read-only is not migrated: one older than m021 has no such table (nothing stored)."""
    return bool(
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'similarity_scales'").fetchone()[
            0
        ]
    )


def get(db: Database, embed_model: str, digest: str, kb_fingerprint: str) -> StoredScale | None:
    """The stored scale; a read the caller can do without (it measures anew): StoreLocked after a short wait for a
    store another process holds (Database.optional_cursor)."""
    with db.optional_cursor() as cur:
        if not _present(cur):
            return None
        rows = fetch_dicts(
            cur,
            f"SELECT {COLUMNS} FROM similarity_scales WHERE embed_model = ? AND digest = ? AND kb_fingerprint = ?",
            [embed_model, digest, kb_fingerprint],
        )
    return StoredScale(**rows[0]) if rows else None


def put(db: Database, scale: StoredScale, lock_timeout_s: float | None = None) -> None:
    """Store a measured scale (replacing one measured for the same model, digest and knowledge base)."""
    with db.transaction(lock_timeout_s) as cur:
        cur.execute(
            f"INSERT OR REPLACE INTO similarity_scales ({', '.join(MEASURED)}, measured_at) "
            f"VALUES ({', '.join('?' * len(MEASURED))}, current_timestamp)",
            [*(getattr(scale, name) for name in MEASURED[:-1]), list(scale.sample)],
        )


def latest(db: Database) -> list[StoredScale]:
    """The newest scale of each embedding model and digest, newest first."""
    with db.cursor() as cur:
        if not _present(cur):
            return []
        rows = fetch_dicts(
            cur,
            f"SELECT {COLUMNS} FROM similarity_scales "
            "QUALIFY row_number() OVER (PARTITION BY embed_model, digest ORDER BY measured_at DESC) = 1 "
            "ORDER BY measured_at DESC",
            [],
        )
    return [StoredScale(**row) for row in rows]
