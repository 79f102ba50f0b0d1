"""Regression alerts, baseline pins, and the per-run metric series the Trends page draws.

An alert's kind says what it is: "drop" a regression (a tested drop against the baseline), "floor" a metric's
mean below its floor (shown as "below floor", counted apart, and no reason to skip a run as a baseline)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from store.db import Database, fetch_dicts, insert_rows

FLOOR = "floor"  # the kind of a floor breach; every other kind is a regression

ALERT_COLUMNS = [
    "eval_run_id",
    "baseline_run_id",
    "kind",
    "metric",
    "slice",
    "baseline_value",
    "new_value",
    "delta",
    "ci_low",
    "ci_high",
    "n",
    "component",
    "message",
    "config_diff",
    "worst_items",
]


def item_scores(db: Database, eval_run_id: int, metric: str) -> dict[str, tuple[float, int, list[str], int | None]]:
    """item id -> (value, run id, tags, claims) of the item's valid score for the metric; claims is the
    number of claims the score was computed over, where its details record it (faithfulness), else None."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT s.item_id, s.value, s.run_id, i.tags, TRY_CAST(json_extract(s.details, '$.claims') AS INTEGER) "
            "FROM scores s JOIN eval_items i USING (eval_run_id, item_id) "
            "WHERE s.eval_run_id = ? AND s.metric = ? AND s.status = 'ok'",
            [eval_run_id, metric],
        ).fetchall()
    return {item: (value, run_id, list(tags or []), claims) for item, value, run_id, tags, claims in rows}


def replace_open_alerts(db: Database, eval_run_id: int, baseline_run_id: int | None, alerts: list[dict]) -> None:
    """Store a comparison's alerts; earlier open alerts of the same run are replaced, acknowledged ones kept."""
    with db.transaction() as cur:
        cur.execute("DELETE FROM alerts WHERE eval_run_id = ? AND status = 'open'", [eval_run_id])
        insert_rows(
            cur,
            "alerts",
            ALERT_COLUMNS,
            [
                [eval_run_id, baseline_run_id]
                + [json.dumps(a[c]) if c in ("config_diff", "worst_items") else a[c] for c in ALERT_COLUMNS[2:]]
                for a in alerts
            ],
        )


def list_alerts(db: Database, status: str | None = None) -> list[dict]:
    sql = (
        "SELECT a.*, e.name AS run_name, b.name AS baseline_name FROM alerts a "
        "JOIN eval_runs e ON e.id = a.eval_run_id LEFT JOIN eval_runs b ON b.id = a.baseline_run_id"
    )
    params = []
    if status:
        sql += " WHERE a.status = ?"
        params.append(status)
    with db.cursor() as cur:
        rows = fetch_dicts(cur, sql + " ORDER BY a.id DESC", params)
    for row in rows:
        row["config_diff"] = json.loads(row["config_diff"] or "{}")
        row["worst_items"] = json.loads(row["worst_items"] or "[]")
    return rows


def count_open_alerts(db: Database) -> int:
    """Open regression alerts (floor breaches not counted: see count_below_floor)."""
    with db.cursor() as cur:
        return cur.execute("SELECT count(*) FROM alerts WHERE status = 'open' AND kind <> ?", [FLOOR]).fetchone()[0]


def count_below_floor(db: Database) -> int:
    """Open floor breaches: a run's metric below its floor, not acknowledged."""
    with db.cursor() as cur:
        return cur.execute("SELECT count(*) FROM alerts WHERE status = 'open' AND kind = ?", [FLOOR]).fetchone()[0]


def acknowledge(db: Database, alert_id: int, comment: str) -> bool:
    with db.cursor() as cur:
        done = cur.execute(
            "UPDATE alerts SET status = 'acknowledged', comment = ?, acknowledged_at = ? "
            "WHERE id = ? AND status = 'open' RETURNING id",
            [comment, datetime.now(timezone.utc), alert_id],
        ).fetchall()
    return bool(done)


def pin_baseline(db: Database, dataset: str, eval_run_id: int) -> None:
    with db.cursor() as cur:
        cur.execute("INSERT OR REPLACE INTO baseline_pins (dataset, eval_run_id) VALUES (?, ?)", [dataset, eval_run_id])


def metric_series(db: Database) -> list[dict]:
    """Every finished evaluation run's metric means, with its time, name, dataset (name, content hash, size),
    the pipeline that wrote its answers (None: this workbench), pin, configuration and its failed items (read
    from the items). Scores and items are grouped by run before the join: grouping the joined rows by every run
    column took 5x as long."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            """
            SELECT e.id AS eval_run_id, e.name, e.dataset, e.dataset_hash, e.n_items, e.created_at, e.config,
                   e.pipeline, e.judge_model, e.judge_digest, e.judge_prompt_version, s.metric, s.mean, s.n,
                   coalesce(f.failed, 0) AS failed
            FROM eval_runs e
            JOIN (SELECT eval_run_id, metric, avg(value) AS mean, count(*) AS n FROM scores
                  WHERE status = 'ok' GROUP BY ALL) s ON s.eval_run_id = e.id
            LEFT JOIN (SELECT eval_run_id, count(*) AS failed FROM eval_items WHERE status <> 'done' GROUP BY ALL) f
                   ON f.eval_run_id = e.id
            WHERE e.status LIKE 'finished%' ORDER BY e.created_at, s.metric""",
            [],
        )
    for row in rows:
        row["config"] = json.loads(row["config"])
    return rows
