"""Regression alerts, baseline pins, and the per-run metric series the Trends page draws.

An alert's kind says what it is: "drop" a regression (a tested drop against the baseline), "floor" a metric's
mean below its floor (shown as "below floor", counted apart, and no reason to skip a run as a baseline).
An alert belongs to an evaluation run (eval_run_id), or to one service's day of traced runs (service, service_day)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

from store.db import Database, fetch_dicts, insert_rows
from store.history import COST_SQL, TOKENS_SQL, priced

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
    """Alerts, newest first. An evaluation run's alert is named by its run and baseline; a traced day's by its
    service and day, its baseline the day before (a drop) or none (a floor)."""
    sql = f"""
        SELECT a.*, coalesce(e.name, a.service || ' · ' || strftime(a.service_day, '%Y-%m-%d')) AS run_name,
               coalesce(b.name, CASE WHEN a.service_day IS NOT NULL AND a.kind <> '{FLOOR}'
                   THEN a.service || ' · ' || strftime(a.service_day - 1, '%Y-%m-%d') END) AS baseline_name
        FROM alerts a LEFT JOIN eval_runs e ON e.id = a.eval_run_id LEFT JOIN eval_runs b ON b.id = a.baseline_run_id
        WHERE (e.id IS NOT NULL OR a.service_day IS NOT NULL)"""
    params = []
    if status:
        sql += " AND a.status = ?"
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


def below_floor_metrics(db: Database) -> tuple[int, int]:
    """(metrics, breaches): how many distinct metrics are below their floor in an open breach, and in how many
    breaches (one per evaluation, or traced service and day); faithfulness low in two runs is one metric, two
    breaches."""
    with db.cursor() as cur:
        return tuple(
            cur.execute(
                "SELECT count(DISTINCT metric), count(*) FROM alerts WHERE status = 'open' AND kind = ?", [FLOOR]
            ).fetchone()
        )


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
    """Every finished evaluation run's metric means, with its time, name, dataset (name, content hash, version of a
    dataset kept in the store, size), the pipeline that wrote its answers (None: this workbench), pin, configuration
    and its failed items (read from the items). Scores and items are grouped by run before the join: grouping the
    joined rows by every run column took 5x as long."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            """
            SELECT e.id AS eval_run_id, e.name, e.dataset, e.dataset_hash, e.dataset_version, e.n_items,
                   e.created_at, e.config, e.pipeline, e.judge_model, e.judge_digest, e.judge_prompt_version,
                   s.metric, s.mean, s.n, coalesce(f.failed, 0) AS failed
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


# A question's latency, tokens and cost, counted as the Runs page counts a run's (store.history: its own calls,
# cached ones too for tokens, cache hits free for cost), then per group: the mean, p50 and p95 latency, and the mean
# tokens and cost. A run without calls (an imported answer) has no tokens and no cost, and counts in neither mean.
def _per_question(prices: tuple[float, float]) -> str:
    return f"r.latency_ms, r.n_calls, r.n_replayed, {TOKENS_SQL} AS tokens, {priced(COST_SQL, prices)} AS cost"


PER_QUESTION_AGGREGATES = (
    "count(*) AS questions, avg(latency_ms) AS latency_ms, quantile_cont(latency_ms, 0.5) AS p50_latency_ms, "
    "quantile_cont(latency_ms, 0.95) AS p95_latency_ms, avg(tokens) AS tokens, avg(cost) AS cost, "
    "sum(n_replayed) / nullif(sum(n_calls), 0) AS replayed"  # the share of the questions' calls the cache answered
)


def eval_run_costs(db: Database, prices: tuple[float, float] = (0.0, 0.0)) -> list[dict]:
    """Every finished evaluation run's latency, tokens and cost per question (PER_QUESTION_AGGREGATES) over its
    items' runs, failed ones too (their calls were made); oldest run first. prices: per 1000 prompt and completion
    tokens, (0, 0): no cost."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"""
            WITH q AS (SELECT i.eval_run_id, {_per_question(prices)}
                       FROM eval_items i JOIN runs r ON r.id = i.run_id)
            SELECT e.id AS eval_run_id, e.name, e.dataset, e.created_at, {PER_QUESTION_AGGREGATES}
            FROM eval_runs e JOIN q ON q.eval_run_id = e.id
            WHERE e.status LIKE 'finished%' GROUP BY e.id, e.name, e.dataset, e.created_at
            ORDER BY e.created_at, e.id""",
            [],
        )


TRACED = "traced"  # the kind of a run made from a received trace (pipeline.evaluation.given.TRACED)
TRACED_ALERT_COLUMNS = ["service", "service_day", *ALERT_COLUMNS[2:]]


def traced_daily(db: Database, since: date | None = None) -> list[dict]:
    """Traced runs' faithfulness per service (the run's pipeline: its OpenTelemetry service name) and day (the day
    of started_at as stored): the mean over the runs with a faithfulness (verified, with claims), and n. Oldest
    day first."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT pipeline AS service, started_at::DATE AS day, avg(faithfulness) AS mean, count(*) AS n "
            "FROM runs WHERE kind = ? AND faithfulness IS NOT NULL AND pipeline IS NOT NULL "
            "AND started_at >= ? GROUP BY ALL ORDER BY day, service",
            [TRACED, since or date.min],
        )


def traced_daily_costs(db: Database, prices: tuple[float, float] = (0.0, 0.0), since: date | None = None) -> list[dict]:
    """Traced runs' latency, tokens and cost per question (PER_QUESTION_AGGREGATES) per service and day, every
    traced run counted (verified or not); oldest day first."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"""
            WITH q AS (SELECT r.pipeline AS service, r.started_at::DATE AS day, {_per_question(prices)}
                       FROM runs r WHERE r.kind = ? AND r.pipeline IS NOT NULL AND r.started_at >= ?)
            SELECT service, day, {PER_QUESTION_AGGREGATES} FROM q GROUP BY ALL ORDER BY day, service""",
            [TRACED, since or date.min],
        )


def traced_day_runs(db: Database, day: date) -> dict[str, list[tuple[int, float, str]]]:
    """The traced runs of one day with a faithfulness, per service: (run id, faithfulness, question), by id."""
    start = datetime.combine(day, datetime.min.time())
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT pipeline, id, faithfulness, question FROM runs WHERE kind = ? AND faithfulness IS NOT NULL "
            "AND pipeline IS NOT NULL AND started_at >= ? AND started_at < ? ORDER BY id",
            [TRACED, start, start + timedelta(days=1)],
        ).fetchall()
    out: dict[str, list] = {}
    for service, run_id, value, question in rows:
        out.setdefault(service, []).append((run_id, value, question))
    return out


def open_traced_alerts(db: Database, alerts: list[dict]) -> int:
    """Store the alerts of traced days (each with service and day) that are not stored yet: one alert of a kind
    per service, day and metric, open or acknowledged, so a check repeated over the same day opens nothing new.
    Returns how many were opened."""
    opened = 0
    with db.transaction() as cur:
        for a in alerts:
            found = cur.execute(
                "SELECT 1 FROM alerts WHERE service = ? AND service_day = ? AND kind = ? AND metric = ? LIMIT 1",
                [a["service"], a["service_day"], a["kind"], a["metric"]],
            ).fetchone()
            if found:
                continue
            values = [json.dumps(a[c]) if c in ("config_diff", "worst_items") else a[c] for c in TRACED_ALERT_COLUMNS]
            insert_rows(cur, "alerts", TRACED_ALERT_COLUMNS, [values])
            opened += 1
    return opened
