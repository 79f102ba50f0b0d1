"""Sweeps (`sweep`): one row per sweep name, one per combination of its grid.

A sweep records what it runs over (the dataset identity and a hash of the chosen items), its grid (each setting
with its values, in the order given) and the combination its leaderboard tests the others against; each combination
records its settings, the evaluation it runs as (an ordinary evaluation run: eval_runs, eval_items, scores) and its
status. pipeline/experiments/ is the domain layer over this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from store.db import Database, fetch_dicts

PENDING, RUNNING, FINISHED = "pending", "running", "finished"


@dataclass
class CombinationRow:
    position: int
    label: str
    settings: dict  # setting name -> value, in grid order
    eval_name: str
    status: str = PENDING  # pending | running | finished | finished with N failures | cancelled | failed
    eval_run_id: int | None = None
    index_fingerprint: str | None = None  # the separate index it retrieves from; None: the knowledge base
    wall_s: float | None = None


@dataclass
class SweepRow:
    id: int
    name: str
    dataset: str
    dataset_version: int | None
    dataset_hash: str
    items_hash: str
    n_items: int
    grid: list[list]  # [[setting, [values...]], ...]
    metrics: list[str] | None
    reference: str  # the label of the reference combination
    status: str
    combinations: list[CombinationRow] = field(default_factory=list)


def _sweep(row: dict, combinations: list[CombinationRow]) -> SweepRow:
    return SweepRow(
        row["id"],
        row["name"],
        row["dataset"],
        row["dataset_version"],
        row["dataset_hash"],
        row["items_hash"],
        row["n_items"],
        json.loads(row["grid"]),
        json.loads(row["metrics"]) if row["metrics"] else None,
        row["reference"],
        row["status"],
        combinations,
    )


def _combination(row: dict) -> CombinationRow:
    return CombinationRow(
        row["position"],
        row["label"],
        json.loads(row["settings"]),
        row["eval_name"],
        row["status"],
        row["eval_run_id"],
        row["index_fingerprint"],
        row["wall_s"],
    )


def create_sweep(
    db: Database,
    name: str,
    dataset: str,
    dataset_version: int | None,
    dataset_hash: str,
    items_hash: str,
    n_items: int,
    grid: list[list],
    metrics: list[str] | None,
    reference: str,
    combinations: list[CombinationRow],
) -> SweepRow:
    """A new sweep with every combination pending, in one transaction."""
    with db.transaction() as cur:
        sweep_id = cur.execute(
            "INSERT INTO sweeps (name, dataset, dataset_version, dataset_hash, items_hash, n_items, grid, metrics, "
            "reference, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [
                name,
                dataset,
                dataset_version,
                dataset_hash,
                items_hash,
                n_items,
                json.dumps(grid),
                json.dumps(metrics) if metrics is not None else None,
                reference,
                RUNNING,
            ],
        ).fetchone()[0]
        cur.executemany(
            "INSERT INTO sweep_combinations (sweep_id, position, label, settings, eval_name, index_fingerprint, "
            "status) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                [sweep_id, c.position, c.label, json.dumps(c.settings), c.eval_name, c.index_fingerprint, c.status]
                for c in combinations
            ],
        )
    return get_sweep(db, name)


def get_sweep(db: Database, name: str) -> SweepRow | None:
    """The sweep of that name with its combinations in grid order; None when there is none."""
    with db.cursor() as cur:
        rows = fetch_dicts(cur, "SELECT * FROM sweeps WHERE name = ?", [name])
        if not rows:
            return None
        combos = fetch_dicts(
            cur, "SELECT * FROM sweep_combinations WHERE sweep_id = ? ORDER BY position", [rows[0]["id"]]
        )
    return _sweep(rows[0], [_combination(c) for c in combos])


def list_sweeps(db: Database) -> list[dict]:
    """Every sweep, newest first: name, dataset, status, combinations and how many finished, created_at."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT s.id, s.name, s.dataset, s.dataset_version, s.n_items, s.status, s.reference, s.created_at,
                   s.finished_at, count(c.position) AS combinations,
                   count(c.position) FILTER (WHERE c.status = 'finished') AS finished
            FROM sweeps s LEFT JOIN sweep_combinations c ON c.sweep_id = s.id
            GROUP BY ALL ORDER BY s.created_at DESC, s.id DESC""",
            [],
        )


def set_reference(db: Database, sweep_id: int, reference: str) -> None:
    with db.transaction() as cur:
        cur.execute("UPDATE sweeps SET reference = ? WHERE id = ?", [reference, sweep_id])


def set_sweep_status(db: Database, sweep_id: int, status: str) -> None:
    """The sweep's status; finished_at is set when it is no longer running."""
    with db.transaction() as cur:
        cur.execute(
            "UPDATE sweeps SET status = ?, finished_at = CASE WHEN ? THEN NULL ELSE current_timestamp END WHERE id = ?",
            [status, status == RUNNING, sweep_id],
        )


def start_combination(db: Database, sweep_id: int, position: int, index_fingerprint: str | None) -> None:
    """A combination is running (again): its status, its start and the index it retrieves from."""
    with db.transaction() as cur:
        cur.execute(
            "UPDATE sweep_combinations SET status = ?, index_fingerprint = ?, "
            "started_at = coalesce(started_at, current_timestamp), finished_at = NULL "
            "WHERE sweep_id = ? AND position = ?",
            [RUNNING, index_fingerprint, sweep_id, position],
        )


def end_combination(
    db: Database, sweep_id: int, position: int, status: str, eval_run_id: int | None, wall_s: float
) -> None:
    """A combination's evaluation ended: its status, its evaluation run and its wall time (added to any earlier
    part's)."""
    with db.transaction() as cur:
        cur.execute(
            "UPDATE sweep_combinations SET status = ?, eval_run_id = ?, wall_s = coalesce(wall_s, 0) + ?, "
            "finished_at = current_timestamp WHERE sweep_id = ? AND position = ?",
            [status, eval_run_id, wall_s, sweep_id, position],
        )


def evaluation_usage(db: Database, eval_run_id: int) -> dict:
    """The model calls of an evaluation's items: calls, cache hits (replayed), and the tokens and model time of
    every call at its original cost (a replayed call carries the costs of the call that filled the cache)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT count(c.id) AS calls, count(c.id) FILTER (WHERE c.cache_hit) AS cache_hits,
                   coalesce(sum(c.prompt_tokens), 0) AS prompt_tokens,
                   coalesce(sum(c.completion_tokens), 0) AS completion_tokens,
                   coalesce(sum(c.latency_ms), 0) / 1000 AS model_s
            FROM eval_items i JOIN llm_calls c ON c.run_id = i.run_id WHERE i.eval_run_id = ?""",
            [eval_run_id],
        )[0]


def question_latencies(db: Database, eval_run_id: int) -> list[float]:
    """The answering time (ms) of each question an evaluation answered (its items' runs, original costs), in item
    order. A run stored before runs counted their replayed calls (n_calls NULL) that was answered from the cache has
    no original latency (its latency was the replay's) and is left out."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT r.latency_ms FROM eval_items i JOIN runs r ON r.id = i.run_id "
            "WHERE i.eval_run_id = ? AND i.status = 'done' AND r.latency_ms IS NOT NULL AND (r.n_calls IS NOT NULL "
            "OR NOT EXISTS (SELECT 1 FROM llm_calls c WHERE c.run_id = r.id AND c.cache_hit)) ORDER BY i.item_id",
            [eval_run_id],
        ).fetchall()
    return [float(r[0]) for r in rows]


def item_counts(db: Database, eval_run_id: int) -> dict:
    """An evaluation's items by status: done, failed (any other status) and total."""
    with db.cursor() as cur:
        done, total = cur.execute(
            "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FROM eval_items WHERE eval_run_id = ?",
            [eval_run_id],
        ).fetchone()
    return {"done": done, "failed": total - done, "total": total}
