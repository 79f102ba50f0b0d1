"""Evaluation runs, their items and scores; the aggregates the Evaluate page and the CLI show."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from store.db import Database, fetch_dicts, insert_rows
from store.records import RunLog
from store.runs import insert_run

SCORE_COLUMNS = [
    "eval_run_id",
    "item_id",
    "run_id",
    "metric",
    "value",
    "status",
    "explanation",
    "details",
    "scorer_model",
    "scorer_digest",
    "prompt_version",
]


@dataclass
class EvalRun:
    id: int
    name: str
    dataset: str
    status: str
    config: dict
    judge_model: str
    judge_digest: str
    judge_prompt_version: str
    n_items: int
    wall_s: float
    pipeline: str | None = None  # who wrote the answers of a dataset that carries them; None: this workbench
    dataset_version: int | None = None  # the version of a dataset kept in the store (store.datasets); None: a file

    @property
    def dataset_label(self) -> str:
        """How screens name its dataset: NAME@VERSION for a version kept in the store, else the file's name."""
        return dataset_label(self.dataset, self.dataset_version)


def dataset_label(dataset: str, version: int | None) -> str:
    """NAME@VERSION for a dataset version kept in the store (version not None), else `dataset` as it is."""
    return dataset if version is None else f"{dataset}@{version}"


def get_eval_run(db: Database, name: str) -> EvalRun | None:
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT id, name, dataset, status, config, judge_model, judge_digest, "
            "judge_prompt_version, n_items, wall_s, pipeline, dataset_version FROM eval_runs WHERE name = ?",
            [name],
        ).fetchone()
    if not row:
        return None
    return EvalRun(row[0], row[1], row[2], row[3], json.loads(row[4]), *row[5:])


def create_eval_run(
    db: Database,
    name: str,
    dataset: str,
    dataset_hash: str,
    config: dict,
    judge_model: str,
    judge_digest: str,
    prompt_version: str,
    n_items: int,
    concurrency: int,
    pipeline: str | None = None,
    dataset_version: int | None = None,
) -> int:
    """A new evaluation run; `dataset_version`: the version of a dataset kept in the store (None: a file)."""
    with db.cursor() as cur:
        return cur.execute(
            "INSERT INTO eval_runs (name, dataset, dataset_hash, status, config, judge_model, judge_digest, "
            "judge_prompt_version, n_items, concurrency, pipeline, dataset_version) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [
                name,
                dataset,
                dataset_hash,
                json.dumps(config),
                judge_model,
                judge_digest,
                prompt_version,
                n_items,
                concurrency,
                pipeline,
                dataset_version,
            ],
        ).fetchone()[0]


def mark_eval_run(
    db: Database, eval_run_id: int, status: str, add_wall_s: float = 0.0, n_items: int | None = None
) -> None:
    finished = datetime.now(timezone.utc) if status != "running" else None
    with db.cursor() as cur:
        set_eval_status(cur, eval_run_id, status, add_wall_s, finished, n_items)


def set_eval_status(
    cur, eval_run_id: int, status: str, add_wall_s: float, finished_at: datetime | None, n_items: int | None = None
) -> None:
    """mark_eval_run with an open cursor (the journal replays an evaluation's final status through it)."""
    cur.execute(
        "UPDATE eval_runs SET status = ?, wall_s = wall_s + ?, finished_at = ?, n_items = coalesce(?, n_items) "
        "WHERE id = ?",
        [status, add_wall_s, finished_at, n_items, eval_run_id],
    )


def extraction_errors(db: Database, eval_run_id: int) -> tuple[int, int]:
    """(extraction errors, claims extracted) over the final answers of an evaluation's runs."""
    with db.cursor() as cur:
        return cur.execute(
            "SELECT count(*) FILTER (WHERE c.verdict = 'extraction_error'), count(*) FROM eval_items i "
            "JOIN runs r ON r.id = i.run_id JOIN claims c ON c.run_id = r.id AND c.attempt_no = r.final_attempt "
            "WHERE i.eval_run_id = ?",
            [eval_run_id],
        ).fetchone()


def item_questions(db: Database, eval_run_id: int) -> dict[str, str]:
    with db.cursor() as cur:
        return dict(
            cur.execute("SELECT item_id, question FROM eval_items WHERE eval_run_id = ?", [eval_run_id]).fetchall()
        )


def item_statuses(db: Database, eval_run_id: int) -> dict[str, str]:
    with db.cursor() as cur:
        return dict(
            cur.execute("SELECT item_id, status FROM eval_items WHERE eval_run_id = ?", [eval_run_id]).fetchall()
        )


def item_turn(db: Database, eval_run_id: int, item_id: str) -> dict | None:
    """Of an item stored done: its run's question, answer and standalone question (what a conversation's next turn
    reads as history); None when it has no done run."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            "SELECT r.question, r.answer, r.standalone_question FROM eval_items i JOIN runs r ON r.id = i.run_id "
            "WHERE i.eval_run_id = ? AND i.item_id = ? AND i.status = 'done'",
            [eval_run_id, item_id],
        )
    return rows[0] if rows else None


def save_item(
    db: Database,
    eval_run_id: int,
    item,
    status: str,
    log: RunLog | None,
    scores: list,
    error: str | None,
    wall_ms: float,
    replace: bool = True,
) -> int | None:
    """The item's question run, its row and its scores, in one transaction; replace=False skips removing
    an earlier attempt of the item (the runner knows there is none)."""
    with db.transaction() as cur:
        return insert_item(cur, eval_run_id, item, status, log, scores, error, wall_ms, replace)


def insert_item(cur, eval_run_id, item, status, log, scores, error, wall_ms, replace=True) -> int | None:
    """save_item with an open cursor (the journal replays items through it). Replacing an earlier attempt
    removes its question run too, so a retried item leaves no superseded run behind."""
    if replace:
        _delete_item_runs(cur, eval_run_id, item.id)
    run_id = insert_run(cur, log) if log is not None else None
    if replace:
        cur.execute("DELETE FROM eval_items WHERE eval_run_id = ? AND item_id = ?", [eval_run_id, item.id])
        cur.execute("DELETE FROM scores WHERE eval_run_id = ? AND item_id = ?", [eval_run_id, item.id])
        cur.execute("DELETE FROM judge_repeats WHERE eval_run_id = ? AND item_id = ?", [eval_run_id, item.id])
    cur.execute(
        "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, reference, tags, "
        "error, wall_ms) VALUES (?,?,?,?,?,?,?,?,?)",
        [eval_run_id, item.id, run_id, status, item.question, item.reference, item.tags, error, wall_ms],
    )
    insert_scores(cur, eval_run_id, item.id, run_id, scores)
    return run_id


def insert_scores(cur, eval_run_id: int | None, item_id: str | None, run_id: int | None, scores) -> None:
    """Metric scores of one run (an evaluation item's, or a traced run's with no evaluation)."""
    insert_rows(
        cur,
        "scores",
        SCORE_COLUMNS,
        [
            [
                eval_run_id,
                item_id,
                run_id,
                s.metric,
                s.value,
                s.status,
                s.explanation,
                json.dumps(s.details),
                s.scorer_model,
                s.scorer_digest,
                s.prompt_version,
            ]
            for s in scores
        ],
    )
    if eval_run_id is not None and item_id is not None:
        insert_repeats(cur, eval_run_id, item_id, scores)


REPEAT_COLUMNS = ["eval_run_id", "item_id", "metric", "repeat", "seed", "value", "status", "explanation"]


def insert_repeats(cur, eval_run_id: int, item_id: str, scores) -> None:
    """Each repeat of the scores judged more than once (`repeats`: dicts {repeat, seed, value, status,
    explanation}; a score, or a journal entry, from before repeats has none)."""
    rows = [
        [eval_run_id, item_id, s.metric, r["repeat"], r.get("seed"), r["value"], r["status"], r.get("explanation")]
        for s in scores
        for r in (getattr(s, "repeats", None) or [])
    ]
    if rows:
        insert_rows(cur, "judge_repeats", REPEAT_COLUMNS, rows)


def judge_repeats(db: Database, eval_run_id: int) -> list[dict]:
    """Every judge repeat of an evaluation: metric, item_id, repeat, seed, value, status, explanation."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT metric, item_id, repeat, seed, value, status, explanation FROM judge_repeats "
            "WHERE eval_run_id = ? ORDER BY metric, item_id, repeat",
            [eval_run_id],
        )


def judge_repeats_of_runs(db: Database, run_ids: list[int], metric: str) -> list[dict]:
    """The judge repeats of one metric for the evaluation items these question runs answered; item_id is the
    question run's id (unique across evaluations)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT j.metric, i.run_id::VARCHAR AS item_id, j.repeat, j.seed, j.value, j.status
            FROM judge_repeats j JOIN eval_items i USING (eval_run_id, item_id)
            WHERE j.metric = ? AND list_contains(?::BIGINT[], i.run_id)
            ORDER BY i.run_id, j.repeat""",
            [metric, run_ids],
        )


RUN_CHILD_TABLES = ("retrievals", "attempts", "claims", "spans")


def _delete_item_runs(cur, eval_run_id: int, item_id: str) -> None:
    ids = [
        row[0]
        for row in cur.execute(
            "SELECT run_id FROM eval_items WHERE eval_run_id = ? AND item_id = ? AND run_id IS NOT NULL",
            [eval_run_id, item_id],
        ).fetchall()
    ]
    if not ids:
        return
    marks = ", ".join("?" * len(ids))
    for table in RUN_CHILD_TABLES:
        cur.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids)
    cur.execute(f"UPDATE llm_calls SET run_id = NULL WHERE run_id IN ({marks})", ids)
    cur.execute(f"DELETE FROM runs WHERE id IN ({marks})", ids)


def list_eval_runs(db: Database) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT e.id, e.name, e.dataset, e.status, e.n_items, e.created_at, e.finished_at, e.wall_s,
                   e.judge_model, e.judge_digest, e.judge_prompt_version, e.pipeline,
                   count(i.item_id) FILTER (WHERE i.status = 'done') AS done,
                   count(i.item_id) FILTER (WHERE i.status <> 'done') AS failed
            FROM eval_runs e LEFT JOIN eval_items i ON i.eval_run_id = e.id
            GROUP BY ALL ORDER BY e.id DESC""",
            [],
        )


def metric_summary(db: Database, eval_run_id: int) -> list[dict]:
    """Per metric: mean over valid scores, and counts of ok, invalid and not-applicable scores, and of the
    not-applicable ones, those of items whose answer abstained (left out of the mean)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT s.metric, avg(s.value) FILTER (WHERE s.status = 'ok') AS mean,
                   count(*) FILTER (WHERE s.status = 'ok') AS n,
                   count(*) FILTER (WHERE s.status = 'invalid') AS invalid,
                   count(*) FILTER (WHERE s.status = 'not_applicable') AS not_applicable,
                   count(*) FILTER (WHERE s.status = 'not_applicable' AND r.status = 'abstained') AS abstained
            FROM scores s
            LEFT JOIN eval_items i ON i.eval_run_id = s.eval_run_id AND i.item_id = s.item_id
            LEFT JOIN runs r ON r.id = i.run_id
            WHERE s.eval_run_id = ? GROUP BY s.metric ORDER BY s.metric""",
            [eval_run_id],
        )


def latency_summary(db: Database, eval_run_id: int) -> dict:
    """p50 and p95 of its questions' latency (original costs: a replayed question's is the one first measured) and
    the share of their model calls replayed from the response cache."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT quantile_cont(r.latency_ms, 0.5) AS p50_ms, quantile_cont(r.latency_ms, 0.95) AS p95_ms, "
            "sum(r.n_replayed) / nullif(sum(r.n_calls), 0) AS replayed "
            "FROM eval_items i JOIN runs r ON r.id = i.run_id WHERE i.eval_run_id = ?",
            [eval_run_id],
        )[0]


def abstained_items(db: Database, eval_run_id: int) -> tuple[int, int]:
    """(items whose answer abstained, items answered) of an evaluation."""
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT count(*) FILTER (WHERE r.status = 'abstained'), count(*) FROM eval_items i "
            "JOIN runs r ON r.id = i.run_id WHERE i.eval_run_id = ?",
            [eval_run_id],
        ).fetchone()
    return int(row[0]), int(row[1])


def slice_summary(db: Database, eval_run_id: int) -> list[dict]:
    """Per tag and metric: mean and n over valid scores."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT tag, s.metric, avg(s.value) AS mean, count(*) AS n
            FROM scores s JOIN (SELECT eval_run_id, item_id, unnest(tags) AS tag FROM eval_items
                                WHERE eval_run_id = ?) t USING (eval_run_id, item_id)
            WHERE s.status = 'ok' GROUP BY ALL ORDER BY tag, s.metric""",
            [eval_run_id],
        )


ITEM_COLUMNS = ("item_id", "run_id", "item_status", "run_status", "question", "tags", "error", "wall_ms", "answer")
METRIC_COLUMN = re.compile(r"[a-z][a-z0-9_]*")


def item_results(db: Database, eval_run_id: int, metrics: Sequence[str]) -> list[dict]:
    """One row per item with its run's status and each named metric's value as a column."""
    for name in metrics:
        if not METRIC_COLUMN.fullmatch(name) or name in ITEM_COLUMNS:
            raise ValueError(
                f"{name!r} cannot be a result column: metric names are lower-case words "
                f"other than {', '.join(ITEM_COLUMNS)}"
            )
    values = "".join(f',\n max(s.value) FILTER (WHERE s.metric = ?) AS "{name}"' for name in metrics)
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"""
            SELECT i.item_id, i.run_id, i.status AS item_status, r.status AS run_status, i.question, i.tags,
                   i.error, i.wall_ms, r.answer{values}
            FROM eval_items i LEFT JOIN runs r ON r.id = i.run_id
            LEFT JOIN scores s ON s.eval_run_id = i.eval_run_id AND s.item_id = i.item_id
            WHERE i.eval_run_id = ? GROUP BY ALL ORDER BY i.item_id""",
            [*metrics, eval_run_id],
        )


def turn_scores(db: Database, eval_run_id: int) -> list[dict]:
    """Of an evaluation's items whose runs are turns of a conversation: one row per item and metric (item_id,
    item_status, conversation_id, turn_no, metric, value, status; metric None for an item without scores)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT i.item_id, i.status AS item_status, r.conversation_id, r.turn_no, s.metric, s.value, s.status
            FROM eval_items i JOIN runs r ON r.id = i.run_id
            LEFT JOIN scores s ON s.eval_run_id = i.eval_run_id AND s.item_id = i.item_id
            WHERE i.eval_run_id = ? AND r.conversation_id IS NOT NULL
            ORDER BY r.conversation_id, r.turn_no, i.item_id, s.metric""",
            [eval_run_id],
        )


def item_scores(db: Database, eval_run_id: int, item_id: str) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT metric, value, status, explanation, scorer_model, prompt_version FROM scores "
            "WHERE eval_run_id = ? AND item_id = ? ORDER BY metric",
            [eval_run_id, item_id],
        )


def usage(db: Database, eval_run_id: int) -> dict:
    """Tokens, model time (original latencies: a replayed call's is the call that filled the cache) and cache hits
    of every LLM call made for this evaluation's items."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT count(*) AS calls, coalesce(sum(c.prompt_tokens), 0) AS prompt_tokens,
                   coalesce(sum(c.completion_tokens), 0) AS completion_tokens,
                   coalesce(sum(c.latency_ms), 0) / 1000 AS model_s,
                   count(*) FILTER (WHERE c.cache_hit) AS cache_hits
            FROM llm_calls c JOIN eval_items i ON i.run_id = c.run_id WHERE i.eval_run_id = ?""",
            [eval_run_id],
        )[0]


def item_usage(db: Database, eval_run_id: int) -> list[dict]:
    """Per item: its question run, that run's status and latency, and the tokens and count of the run's model calls
    (original costs, as `usage` counts them: the items' rows add up to it)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT i.item_id, i.run_id, r.status AS run_status, r.latency_ms,
                   coalesce(sum(c.prompt_tokens), 0) AS prompt_tokens,
                   coalesce(sum(c.completion_tokens), 0) AS completion_tokens, count(c.run_id) AS calls
            FROM eval_items i LEFT JOIN runs r ON r.id = i.run_id LEFT JOIN llm_calls c ON c.run_id = i.run_id
            WHERE i.eval_run_id = ? GROUP BY i.item_id, i.run_id, r.status, r.latency_ms ORDER BY i.item_id""",
            [eval_run_id],
        )


def judge_invalid_rate(db: Database, eval_run_id: int) -> tuple[int, int]:
    """(invalid judge scores, judge scores that were asked: all but the not-applicable ones) of the run."""
    with db.cursor() as cur:
        return cur.execute(
            "SELECT count(*) FILTER (WHERE status = 'invalid'), count(*) FILTER (WHERE status <> 'not_applicable') "
            "FROM scores "
            "WHERE eval_run_id = ? AND metric LIKE 'judge_%'",
            [eval_run_id],
        ).fetchone()


def scores_for_run(db: Database, run_id: int) -> list[dict]:
    """The run's scores, each with whether it was replayed from the response cache: `replayed` when every model
    call that produced it was a cache hit, and then `first_computed_at`, when the earliest of those replies was
    first computed. A score's calls are the run's calls of its stage: a judge criterion's calls are staged as its
    metric (judge_correctness), another metric's as metric_<name>; a score made without a model call is never
    replayed."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            WITH calls AS (
                SELECT stage, count(*) AS n, count(*) FILTER (WHERE cache_hit) AS hits,
                       min(first_computed_at) FILTER (WHERE cache_hit) AS first_at
                FROM llm_calls WHERE run_id = ? GROUP BY stage)
            SELECT e.name AS evaluation, s.metric, s.value, s.status, s.explanation, s.scorer_model,
                   s.prompt_version, coalesce(c.hits = c.n, false) AS replayed,
                   CASE WHEN c.hits = c.n THEN c.first_at END AS first_computed_at
            FROM scores s LEFT JOIN eval_runs e ON e.id = s.eval_run_id
            LEFT JOIN calls c ON c.stage IN (s.metric, 'metric_' || s.metric)
            WHERE s.run_id = ? ORDER BY s.metric""",
            [run_id, run_id],
        )


def get_eval_run_by_id(db: Database, eval_run_id: int) -> EvalRun | None:
    with db.cursor() as cur:
        row = cur.execute("SELECT name FROM eval_runs WHERE id = ?", [eval_run_id]).fetchone()
    return get_eval_run(db, row[0]) if row else None


def run_ids_of(db: Database, eval_run_id: int) -> list[int]:
    with db.cursor() as cur:
        return [
            r[0]
            for r in cur.execute(
                "SELECT run_id FROM eval_items WHERE eval_run_id = ? AND run_id IS NOT NULL "
                "AND status = 'done' ORDER BY item_id",
                [eval_run_id],
            ).fetchall()
        ]


def run_ids_under_pin(db: Database, judge_model: str, judge_digest: str, prompt_version: str) -> list[int]:
    with db.cursor() as cur:
        return [
            r[0]
            for r in cur.execute(
                "SELECT i.run_id FROM eval_items i JOIN eval_runs e ON e.id = i.eval_run_id WHERE e.judge_model = ? "
                "AND e.judge_digest = ? AND e.judge_prompt_version = ? AND i.status = 'done' ORDER BY i.run_id",
                [judge_model, judge_digest, prompt_version],
            ).fetchall()
        ]


def recent_chat_run_ids(db: Database, limit: int = 50) -> list[int]:
    with db.cursor() as cur:
        return [
            r[0]
            for r in cur.execute(
                "SELECT id FROM runs WHERE kind = 'chat' AND status <> 'failed' ORDER BY id DESC LIMIT ?", [limit]
            ).fetchall()
        ]


def reference_of(db: Database, run_id: int) -> str | None:
    """The golden reference of the item a run answered, if it was an evaluation item with one."""
    with db.cursor() as cur:
        row = cur.execute("SELECT reference FROM eval_items WHERE run_id = ?", [run_id]).fetchone()
    return row[0] if row else None
