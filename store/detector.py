"""Detector-benchmark runs and their per-record results."""

from __future__ import annotations

import json

from store.db import Database, fetch_dicts, insert_rows

RESULT_COLUMNS = [
    "detector_run_id",
    "record_id",
    "label",
    "predicted",
    "faithfulness",
    "n_claims",
    "decided_by_precheck",
    "llm_calls",
    "prompt_tokens",
    "latency_ms",
    "error",
    "verdicts",
]


def save_detector_run(
    db: Database,
    dataset: str,
    verifier: str,
    claims_from: str,
    scope: str,
    precheck: bool,
    settings: dict,
    metrics: dict,
    results: list[dict],
) -> int:
    with db.transaction() as cur:
        run_id = cur.execute(
            "INSERT INTO detector_runs (dataset, verifier, claims_from, scope, precheck, settings, n, metrics) "
            "VALUES (?,?,?,?,?,?,?,?) RETURNING id",
            [dataset, verifier, claims_from, scope, precheck, json.dumps(settings), len(results), json.dumps(metrics)],
        ).fetchone()[0]
        insert_rows(
            cur,
            "detector_results",
            RESULT_COLUMNS,
            [[run_id] + [json.dumps(r[c]) if c == "verdicts" else r[c] for c in RESULT_COLUMNS[1:]] for r in results],
        )
    return run_id


def list_detector_runs(db: Database) -> list[dict]:
    with db.cursor() as cur:
        rows = fetch_dicts(cur, "SELECT * FROM detector_runs ORDER BY id DESC", [])
    for row in rows:
        row["metrics"] = json.loads(row["metrics"])
        row["settings"] = json.loads(row["settings"])
    return rows


def detector_results(db: Database, detector_run_id: int) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT * EXCLUDE (detector_run_id) FROM detector_results WHERE detector_run_id = ? ORDER BY record_id",
            [detector_run_id],
        )
