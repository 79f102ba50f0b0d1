"""Datasets kept in the store: named, each save a new immutable version (items in order, a content hash).

Items are stored as JSON objects (pipeline.evaluation.dataset.GoldenItem.model_dump); this module knows nothing
of their fields but `id`. pipeline/evaluation/datasets.py is the domain layer over it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from store.db import Database, fetch_dicts, insert_rows


@dataclass(frozen=True)
class VersionInfo:
    name: str
    version: int
    content_hash: str
    n_items: int
    origin: str  # file, synthesised, edited, from a run, ...
    note: str | None
    created_at: datetime


def _info(row: dict) -> VersionInfo:
    return VersionInfo(**row)


INFO_COLUMNS = "name, version, content_hash, n_items, origin, note, created_at"


def save_version(
    db: Database, name: str, items: list[dict], content_hash: str, origin: str, note: str | None = None
) -> int:
    """Store `items` as the next version of `name` (1 for a new name); return its number."""
    with db.transaction() as cur:
        version = cur.execute(
            "SELECT coalesce(max(version), 0) + 1 FROM dataset_versions WHERE name = ?", [name]
        ).fetchone()[0]
        cur.execute(
            "INSERT INTO dataset_versions (name, version, content_hash, n_items, origin, note) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [name, version, content_hash, len(items), origin, note],
        )
        insert_rows(
            cur,
            "dataset_items",
            ["position", "name", "version", "item_id", "item"],
            [[n, name, version, item["id"], json.dumps(item)] for n, item in enumerate(items)],
        )
    return version


def version_info(db: Database, name: str, version: int | None = None) -> VersionInfo | None:
    """One version of `name` (None: its latest); None when there is no such dataset or version."""
    order = "ORDER BY version DESC LIMIT 1" if version is None else "AND version = ?"
    params = [name] if version is None else [name, version]
    with db.cursor() as cur:
        rows = fetch_dicts(cur, f"SELECT {INFO_COLUMNS} FROM dataset_versions WHERE name = ? {order}", params)
    return _info(rows[0]) if rows else None


def version_with_hash(db: Database, name: str, content_hash: str) -> int | None:
    """The newest version of `name` whose content hash is `content_hash`, if any."""
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT max(version) FROM dataset_versions WHERE name = ? AND content_hash = ?", [name, content_hash]
        ).fetchone()
    return row[0] if row else None


def version_items(db: Database, name: str, version: int) -> list[dict]:
    """The items of one version, in their order."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT item FROM dataset_items WHERE name = ? AND version = ? ORDER BY position", [name, version]
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


def versions(db: Database, name: str) -> list[VersionInfo]:
    """Every version of `name`, newest first."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur, f"SELECT {INFO_COLUMNS} FROM dataset_versions WHERE name = ? ORDER BY version DESC", [name]
        )
    return [_info(r) for r in rows]


def latest_versions(db: Database) -> list[VersionInfo]:
    """The latest version of every dataset, by name."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            f"SELECT {INFO_COLUMNS} FROM dataset_versions "
            "QUALIFY row_number() OVER (PARTITION BY name ORDER BY version DESC) = 1 ORDER BY name",
            [],
        )
    return [_info(r) for r in rows]


def version_counts(db: Database) -> dict[str, int]:
    """name -> how many versions it has."""
    with db.cursor() as cur:
        return dict(cur.execute("SELECT name, count(*) FROM dataset_versions GROUP BY name").fetchall())
