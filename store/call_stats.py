"""Model-call analytics: per stage and in total, aggregated in SQL so a big store is not read into memory.

Every figure counts original costs: a replayed call (a cache hit) carries the latency and tokens of the call that
filled the cache, so percentiles, model time, tokens and cost say what the work cost to compute; cache_hits,
beside them, says how much of it was replayed. A hit stored before hits kept their cost has no latency (NULL), and
is left out of the latency figures."""

from __future__ import annotations

from store.db import Database, fetch_dicts

STATS = """
    SELECT stage, grouping(stage) AS is_total,
           count(*) AS calls,
           count(*) FILTER (WHERE cache_hit) AS cache_hits,
           count(*) FILTER (WHERE error IS NOT NULL) AS errors,
           coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
           coalesce(sum(completion_tokens), 0) AS completion_tokens,
           quantile_cont(latency_ms, 0.5) AS p50_ms,
           quantile_cont(latency_ms, 0.95) AS p95_ms,
           coalesce(sum(latency_ms), 0) / 1000 AS model_s
    FROM llm_calls c WHERE {scope}
    GROUP BY GROUPING SETS ((stage), ())
    ORDER BY is_total, calls DESC, stage"""

# An evaluation's calls: those of its items' question runs, and those tagged with its id (the judge's and
# the metrics' calls, and calls of an item's earlier attempt whose run was replaced).
EVALUATION_SCOPE = (
    "c.eval_run_id = ? OR c.run_id IN (SELECT run_id FROM eval_items WHERE eval_run_id = ? AND run_id IS NOT NULL)"
)


def for_run(db: Database, run_id: int) -> list[dict]:
    """One row per stage of the run's calls, then the total row (is_total = 1); no rows without calls."""
    return _stats(db, "c.run_id = ?", [run_id])


def for_evaluation(db: Database, eval_run_id: int) -> list[dict]:
    """As for_run, over every call made for the evaluation."""
    return _stats(db, EVALUATION_SCOPE, [eval_run_id, eval_run_id])


def _stats(db: Database, scope: str, params: list) -> list[dict]:
    with db.cursor() as cur:
        rows = fetch_dicts(cur, STATS.format(scope=scope), params)
    return rows if rows and rows[-1]["calls"] else []
