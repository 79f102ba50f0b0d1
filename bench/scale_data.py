"""Fill a store with synthetic runs of realistic shape: 1,000,000 runs (questions of ~100 characters,
answers of ~600), 8,000,000 claims (~100 characters), 5,000,000 retrievals, and 200 evaluation runs of
1,000 items each with one score per registered metric. Text is drawn from the sample knowledge base's vocabulary."""

from __future__ import annotations

import re
import time

from bench.common import ROOT
from pipeline.evaluation.registry import ordered_metrics
from store.db import Database

N_RUNS = 1_000_000
CLAIMS_PER_RUN = 8
RETRIEVALS_PER_RUN = 5
EVAL_RUNS, ITEMS_PER_EVAL = 200, 1_000


def metric_columns() -> list[list]:
    """[names, scale lows, scale highs] of the registered metrics."""
    metrics = ordered_metrics()
    return [[m.name for m in metrics], [m.scale[0] for m in metrics], [m.scale[1] for m in metrics]]


def vocabulary() -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z\-]{2,}", " ".join(p.read_text() for p in (ROOT / "data" / "kb").glob("*.md")))
    return sorted(set(words))[:3000]


def text_expr(seed: str, n_words: int) -> str:
    pick = f"words[1 + (hash({seed}, k) % nwords)::INTEGER]"
    return f"array_to_string(list_transform(range({n_words}), lambda k: {pick}), ' ')"


def fill(db: Database, n_runs: int = N_RUNS, log=print) -> None:
    words = vocabulary()
    with db.cursor() as cur:
        cur.execute("CREATE TEMP TABLE vocab AS SELECT ?::VARCHAR[] AS words, ? AS nwords", [words, len(words)])
        steps = [
            (
                "runs",
                f"""
                INSERT INTO runs (id, kind, question, status, answer, faithfulness, n_claims, n_supported,
                                  n_attempts, final_attempt, generator_model, config, started_at, finished_at,
                                  latency_ms, search_text)
                SELECT *, lower(question || ' ' || answer) FROM (
                SELECT i, CASE WHEN i <= {EVAL_RUNS * ITEMS_PER_EVAL} THEN 'eval' ELSE 'chat' END AS kind,
                       {text_expr("i", 12)} || '?' AS question,
                       ['accepted', 'accepted', 'accepted', 'flagged', 'abstained', 'failed']
                           [1 + (hash(i, 1) % 6)::INTEGER],
                       {text_expr("i * 7", 72)} || '.' AS answer,
                       (hash(i, 2) % 1001) / 1000.0, 8, (hash(i, 3) % 9)::INTEGER, 1 + (hash(i, 4) % 3)::INTEGER,
                       1, ['llama3.2', 'qwen2.5', 'mistral'][1 + (hash(i, 5) % 3)::INTEGER], '{{}}',
                       TIMESTAMP '2025-01-01' + to_seconds(i * 30), TIMESTAMP '2025-01-01' + to_seconds(i * 30 + 5),
                       500 + (hash(i, 6) % 20000)
                FROM range(1, {n_runs} + 1) t(i), vocab)""",
            ),
            (
                "claims",
                f"""
                INSERT INTO claims (run_id, attempt_no, claim_no, text, verdict, verifier, evidence_chunk_id,
                                    span_start, span_end, evidence, reason)
                SELECT r, 1, c, {text_expr("r * 13 + c", 12)} || '.',
                       ['supported', 'supported', 'supported', 'unsupported', 'contradicted']
                           [1 + (hash(r, c) % 5)::INTEGER],
                       'bespoke-minicheck', 1 + (hash(r, c, 1) % 100000), 10, 110, NULL, 'synthetic'
                FROM range(1, {n_runs} + 1) a(r), range(1, {CLAIMS_PER_RUN} + 1) b(c), vocab""",
            ),
            (
                "retrievals",
                f"""
                INSERT INTO retrievals (run_id, round, query, rank, chunk_id, score, cited)
                SELECT r, 1, 'q', k, 1 + (hash(r, k) % 100000), 0.9 - k * 0.1, k = 1
                FROM range(1, {n_runs} + 1) a(r), range(1, {RETRIEVALS_PER_RUN} + 1) b(k)""",
            ),
            (
                "eval_runs",
                f"""
                INSERT INTO eval_runs (id, name, dataset, dataset_hash, status, config, judge_model, judge_digest,
                                       judge_prompt_version, n_items, wall_s)
                SELECT e, 'eval-' || e, 'golden.jsonl', 'h', 'finished', '{{}}', 'llama3.2', 'd', 'judge-v1',
                       {ITEMS_PER_EVAL}, 60 FROM range(1, {EVAL_RUNS} + 1) t(e)""",
            ),
            (
                "eval_items",
                f"""
                INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags)
                SELECT 1 + (i - 1) // {ITEMS_PER_EVAL}, 'item-' || ((i - 1) % {ITEMS_PER_EVAL}), i, 'done', 'q',
                       [['numeric', 'rag', 'multi-hop', 'unanswerable'][1 + (hash(i) % 4)::INTEGER]]
                FROM range(1, {EVAL_RUNS * ITEMS_PER_EVAL} + 1) t(i)""",
            ),
            (
                "scores",
                f"""
                INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status, explanation)
                SELECT 1 + (i - 1) // {ITEMS_PER_EVAL}, 'item-' || ((i - 1) % {ITEMS_PER_EVAL}), i, m,
                       CASE WHEN hi - lo > 1 THEN round(lo + (hash(i, m) % 1001) / 1000.0 * (hi - lo))
                            ELSE lo + (hash(i, m) % 1001) / 1000.0 * (hi - lo) END, 'ok', 'synthetic'
                FROM range(1, {EVAL_RUNS * ITEMS_PER_EVAL} + 1) t(i),
                     (SELECT unnest(?::VARCHAR[]) AS m, unnest(?::DOUBLE[]) AS lo, unnest(?::DOUBLE[]) AS hi)""",
            ),
        ]
        for name, sql in steps:
            start = time.perf_counter()
            cur.execute(sql, metric_columns() if name == "scores" else [])
            log(f"filled {name} in {time.perf_counter() - start:.1f} s")
        for sequence, table in (("runs_id_seq", "runs"), ("eval_runs_id_seq", "eval_runs")):
            cur.execute(f"SELECT max(nextval('{sequence}')) FROM range((SELECT max(id) FROM {table}))")
        cur.execute("CHECKPOINT")
