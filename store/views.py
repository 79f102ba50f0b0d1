"""Saved views of the Runs page: a filter (store.history.RunFilter.to_dict) and a grouping under a name."""

from __future__ import annotations

import json

from store.db import Database


def save_view(db: Database, name: str, run_filter: dict, group_by: str | None = None) -> None:
    """Save the view under name; a view of that name is replaced."""
    with db.transaction() as cur:
        cur.execute(
            "INSERT OR REPLACE INTO run_views (name, filter, group_by, saved_at) VALUES (?, ?, ?, current_timestamp)",
            [name, json.dumps(run_filter), group_by],
        )


def list_views(db: Database) -> list[dict]:
    """Every saved view by name: name, filter (a dict), group_by, saved_at; none in a store browsed read-only that
    was written before saved views (m024: it is not migrated)."""
    with db.cursor() as cur:
        present = cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'run_views'")
        if not present.fetchone()[0]:
            return []
        rows = cur.execute("SELECT name, filter, group_by, saved_at FROM run_views ORDER BY name").fetchall()
    return [{"name": n, "filter": json.loads(f), "group_by": g, "saved_at": at} for n, f, g, at in rows]


def delete_view(db: Database, name: str) -> bool:
    """Delete the view; False when there was none of that name."""
    with db.transaction() as cur:
        return bool(cur.execute("DELETE FROM run_views WHERE name = ? RETURNING name", [name]).fetchall())
