"""The store at scale: Runs queries, drilldowns, per-evaluation aggregates and logging on 1,000,000 runs,
8,000,000 claims and 5,000,000 retrievals (bench/scale_data.py). The filled store is kept in .bench/
and reused while its counts match."""

from __future__ import annotations

import os
import random
import statistics
import time
from datetime import datetime, timedelta, timezone

from bench.common import ROOT, Figure
from bench.scale_data import N_RUNS, fill
from pipeline.evaluation.registry import metric_names
from store.db import Database
from store.evals import scores_for_run
from store.history import RunFilter, find_runs
from store.llm_log import calls_for_run
from store.records import AttemptRecord, ClaimRecord, LLMCallRecord, RetrievalRecord, RunLog, RunRecord
from store.runs import get_run, save_run

PATH = ROOT / ".bench" / "scale.duckdb"
T0 = datetime(2025, 1, 1)

FILTERS = {
    "no filter, page 1": (RunFilter(), 1),
    "no filter, page 2,000": (RunFilter(), 2000),
    "status flagged": (RunFilter(statuses=["flagged"]), 1),
    "kind chat + model qwen2.5 + faithfulness 0.2-0.4": (
        RunFilter(kinds=["chat"], models=["qwen2.5"], faithfulness_min=0.2, faithfulness_max=0.4),
        3,
    ),
    "date range of one week": (RunFilter(since=T0 + timedelta(days=100), until=T0 + timedelta(days=107)), 1),
    "tag multi-hop": (RunFilter(tags=["multi-hop"]), 1),
}
TEXT_FILTERS = {
    "text 'retrieval'": (RunFilter(text="retrieval"), 1),
    "text 'hallucination' + status accepted": (RunFilter(text="hallucination", statuses=["accepted"]), 1),
    "text that matches nothing": (RunFilter(text="zzzyzzx"), 1),
}


def median_ms(fn, repeat: int = 9) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def ready_store() -> Database:
    PATH.parent.mkdir(exist_ok=True)
    db = Database(str(PATH), 10, 3600)
    with db.cursor() as cur:
        n = cur.execute("SELECT count(*) FROM runs").fetchone()[0]
    if n < N_RUNS:
        db.close()
        for suffix in ("", ".wal"):
            if os.path.exists(f"{PATH}{suffix}"):
                os.remove(f"{PATH}{suffix}")
        db = Database(str(PATH), 10, 3600)
        fill(db, log=lambda line: print(line, flush=True))
    return db


def page_query(db, run_filter, page):
    return lambda: find_runs(db, run_filter, page, 50)


def sample_log(i: int) -> RunLog:
    now = datetime.now(timezone.utc)
    run = RunRecord(
        kind="chat",
        question=f"Synthetic question number {i} about retrieval?" * 2,
        status="accepted",
        started_at=now,
        answer="A synthetic answer. " * 30,
        faithfulness=1.0,
        n_claims=8,
        n_supported=8,
        n_attempts=1,
        final_attempt=1,
        generator_model="llama3.2",
        config={"top_k": 5},
    )
    claims = [
        ClaimRecord(
            1,
            c,
            f"Synthetic claim {c} of run {i} that is about one hundred characters long.",
            "supported",
            "bespoke-minicheck",
            1,
            0,
            90,
            "evidence sentence",
            "ok",
        )
        for c in range(1, 9)
    ]
    retrievals = [RetrievalRecord(1, "q", k, k, 0.9, k == 1) for k in range(1, 6)]
    calls = [
        LLMCallRecord("verify", "bespoke-minicheck", "d" * 64, "p" * 16, 300, 1, 80.0, False, None, now)
        for _ in range(12)
    ]
    return RunLog(
        run,
        retrievals=retrievals,
        attempts=[AttemptRecord(1, False, run.answer, "verified", 1.0, 8, 8)],
        claims=claims,
        calls=calls,
    )


def run() -> list[Figure]:
    db = ready_store()
    figures = []
    plain = {name: median_ms(page_query(db, f, p)) for name, (f, p) in FILTERS.items()}
    worst = max(plain, key=plain.get)
    figures.append(
        Figure(
            "Runs page query without text search (worst filter, median)",
            plain[worst],
            "ms",
            100,
            note=f"worst: {worst}; all: " + ", ".join(f"{v:.0f}" for v in plain.values()),
        )
    )
    text = {name: median_ms(page_query(db, f, p), repeat=5) for name, (f, p) in TEXT_FILTERS.items()}
    worst = max(text, key=text.get)
    figures.append(
        Figure(
            "Runs page query with text search (worst, median)",
            text[worst],
            "ms",
            500,
            note=f"worst: {worst}; all: " + ", ".join(f"{v:.0f}" for v in text.values()),
        )
    )
    rng = random.Random(5)
    ids = [rng.randint(1, N_RUNS) for _ in range(15)]
    it = iter(ids * 2)
    figures.append(
        Figure(
            "drilldown of one run (median)",
            median_ms(
                lambda: (lambda i: (get_run(db, i), calls_for_run(db, i), scores_for_run(db, i)))(next(it)), repeat=14
            ),
            "ms",
            20,
            note="run, grades, retrievals with chunks, attempts, claims, LLM calls, scores",
        )
    )
    figures.append(
        Figure(
            "per-evaluation-run metric means, all runs (median)",
            median_ms(lambda: _metric_means(db)),
            "ms",
            100,
            note=f"200 evaluation runs x {len(metric_names())} metrics over {200_000 * len(metric_names()):,} scores",
        )
    )
    figures.append(
        Figure(
            "per-evaluation-run claim verdict counts (median)",
            median_ms(lambda: _claim_counts(db)),
            "ms",
            100,
            note="8,000,000 claims grouped by evaluation run",
        )
    )
    counter = iter(range(10**9))
    figures.append(
        Figure(
            "logging one run with 8 claims (median)",
            median_ms(lambda: save_run(db, sample_log(next(counter))), repeat=15),
            "ms",
            10,
            note="run, 5 retrievals, attempt, 8 claims, 12 LLM calls in one transaction",
        )
    )
    db.close()
    size = sum(os.path.getsize(f"{PATH}{s}") for s in ("", ".wal") if os.path.exists(f"{PATH}{s}"))
    figures.append(Figure("store size on disk at 1M runs", size / 2**30, "GiB"))
    return figures


def _metric_means(db):
    with db.cursor() as cur:
        return cur.execute(
            "SELECT eval_run_id, metric, avg(value), count(*) FROM scores WHERE status = 'ok' GROUP BY ALL"
        ).fetchall()


def _claim_counts(db):
    with db.cursor() as cur:
        return cur.execute(
            "SELECT i.eval_run_id, c.verdict, count(*) FROM claims c JOIN eval_items i "
            "ON i.run_id = c.run_id GROUP BY ALL"
        ).fetchall()


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
