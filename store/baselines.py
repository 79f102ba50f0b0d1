"""Which evaluation run another is compared with: the dataset a run was over, and the one baseline rule.

The rule, the same for every page and command: the run pinned for the dataset (when its answers were written by
the same pipeline, over the same dataset identity: for a golden set kept in the store, the same version); else the
newest earlier run of the same pipeline over the same dataset (same content hash, or for a stored golden set the
same version) and size, under the same judge pin and claim granularity, with every item done (failures are read
from the items, not from the run's status) and no open regression alert (a metric below its floor is no reason to
skip a run). A run's pipeline is who wrote its answers (None: this workbench)."""

from __future__ import annotations

from store.alerts import FLOOR
from store.db import Database

# The claims a run's faithfulness counts depend on its claim granularity (sentences, or atomic claims): runs at two
# granularities are never each other's baseline. A run recorded before the setting existed was atomic.
GRANULARITY = "coalesce(json_extract_string({run}.config, '$.claim_granularity'), 'atomic')"
SAME_GRANULARITY = f"{GRANULARITY.format(run='p')} = {GRANULARITY.format(run='e')}"

# every item done, and no open regression alert: a floor breach (kind FLOOR) does not count
CLEAN = f"""
    (SELECT count(*) FROM eval_items i WHERE i.eval_run_id = p.id AND i.status = 'done') = p.n_items
    AND NOT EXISTS (SELECT 1 FROM eval_items i WHERE i.eval_run_id = p.id AND i.status <> 'done')
    AND NOT EXISTS (SELECT 1 FROM alerts a WHERE a.eval_run_id = p.id AND a.status = 'open' AND a.kind <> '{FLOOR}')"""


def dataset_identity(db: Database, eval_run_id: int) -> tuple[str | None, int] | None:
    """(dataset content hash, number of items) of an evaluation run; None when there is no such run."""
    with db.cursor() as cur:
        row = cur.execute("SELECT dataset_hash, n_items FROM eval_runs WHERE id = ?", [eval_run_id]).fetchone()
    return (row[0], row[1]) if row else None


ANY_PIPELINE = object()
ANY_HASH = object()


def pinned(db: Database, dataset: str, pipeline=ANY_PIPELINE, dataset_hash=ANY_HASH) -> int | None:
    """The run pinned for the dataset; with `pipeline` (None: this workbench), only if that pipeline wrote its
    answers; with `dataset_hash`, only if it ran over that dataset identity (two versions of a dataset kept in the
    store are two datasets: a run pinned over version 2 is no baseline for one over version 3)."""
    any_hash = dataset_hash is ANY_HASH
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT b.eval_run_id FROM baseline_pins b JOIN eval_runs e ON e.id = b.eval_run_id "
            "WHERE b.dataset = ? AND (? OR e.pipeline IS NOT DISTINCT FROM ?) "
            "AND (? OR e.dataset_hash IS NOT DISTINCT FROM ?)",
            [
                dataset,
                pipeline is ANY_PIPELINE,
                None if pipeline is ANY_PIPELINE else pipeline,
                any_hash,
                None if any_hash else dataset_hash,
            ],
        ).fetchone()
    return row[0] if row else None


def same_granularity(db: Database, eval_run_id: int, other_id: int) -> bool:
    """Whether two evaluation runs counted claims at the same granularity (a pinned run at another is no baseline)."""
    with db.cursor() as cur:
        row = cur.execute(
            f"SELECT {SAME_GRANULARITY} FROM eval_runs p JOIN eval_runs e ON e.id = ? WHERE p.id = ?",
            [eval_run_id, other_id],
        ).fetchone()
    return bool(row and row[0])


def previous_comparable(db: Database, eval_run_id: int) -> int | None:
    """The newest run before this one of the same pipeline with the same dataset hash and size, judge pin and claim
    granularity, every item done and no open regression alert (floor breaches do not count); never a sweep's
    combination (it changed settings on purpose: it can be pinned, not found)."""
    with db.cursor() as cur:
        row = cur.execute(
            f"""
            SELECT p.id FROM eval_runs p JOIN eval_runs e ON e.id = ?
            WHERE p.id <> e.id AND p.created_at < e.created_at
              AND p.dataset_hash IS NOT DISTINCT FROM e.dataset_hash AND p.n_items = e.n_items
              AND p.pipeline IS NOT DISTINCT FROM e.pipeline
              AND p.judge_model = e.judge_model AND p.judge_digest = e.judge_digest
              AND p.judge_prompt_version = e.judge_prompt_version
              AND {SAME_GRANULARITY}
              AND p.name NOT IN (SELECT eval_name FROM sweep_combinations)
              AND {CLEAN}
            ORDER BY p.created_at DESC, p.id DESC LIMIT 1""",
            [eval_run_id],
        ).fetchone()
    return row[0] if row else None


def clean_runs(db: Database, eval_run_ids: list[int]) -> set[int]:
    """The runs among eval_run_ids with every item done and no open regression alert (those that may be a
    baseline; floor breaches do not count)."""
    with db.cursor() as cur:
        rows = cur.execute(
            f"SELECT p.id FROM eval_runs p WHERE list_contains(?::BIGINT[], p.id) AND {CLEAN}", [eval_run_ids]
        ).fetchall()
    return {r[0] for r in rows}
