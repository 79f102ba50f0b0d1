"""The embedding model's measured similarity scale (pipeline/knowledge/similarity_scale.py measures it), one row
per embedding model, digest and knowledge-base fingerprint."""

from __future__ import annotations

from dataclasses import dataclass
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


COLUMNS = "embed_model, digest, kb_fingerprint, n_pairs, n_probes, n_chunks, median, sample, measured_at"


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
            "INSERT OR REPLACE INTO similarity_scales (embed_model, digest, kb_fingerprint, n_pairs, n_probes, "
            "n_chunks, median, sample, measured_at) VALUES (?,?,?,?,?,?,?,?,current_timestamp)",
            [
                scale.embed_model,
                scale.digest,
                scale.kb_fingerprint,
                scale.n_pairs,
                scale.n_probes,
                scale.n_chunks,
                scale.median,
                list(scale.sample),
            ],
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
