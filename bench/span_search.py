"""The span search (pipeline/history/span_search.py) on a store of synthetic runs (bench/scale_data.py: 16-30
spans a run): how long each of the Spans page's usual questions takes. `python -m bench.span_search [RUNS]`
(default 10,000 runs).

Measured 2026-12-06 on the 2-core development machine, shared (load 9-14), 10,000 runs, 229,559 spans (the
synthetic spans carry no span_kind: their kind is read from their names), median of 5: kind retriever >= 1 s
337 ms (13,424 spans in 7,463 runs), kind llm failed 144 ms (none), name contains 'generate' 120 ms (20,078 in
8,701 runs), no condition 136 ms, one run's 'retrieve' 28 ms."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.scale_data import fill
from pipeline.history.span_search import SpanQuery, search_spans
from store.db import Database

QUESTIONS = {
    "kind retriever, >= 1000 ms": lambda n: SpanQuery(kind="retriever", min_ms=1000),
    "kind llm, failed": lambda n: SpanQuery(kind="llm", errors=True),
    "name contains 'generate'": lambda n: SpanQuery(name="generate"),
    "no condition": lambda n: SpanQuery(),
    "one run, name 'retrieve'": lambda n: SpanQuery(name="retrieve", run_id=n // 2),
}
REPEATS = 5


def run(n_runs: int = 10_000) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Database(str(Path(folder) / "spans.duckdb"), 2, 0)
        fill(db, n_runs, log=lambda *_: None)
        with db.cursor() as cur:
            n_spans = cur.execute("SELECT count(*) FROM spans").fetchone()[0]
        print(f"{n_runs:,} runs, {n_spans:,} spans")
        for label, question in QUESTIONS.items():
            query = question(n_runs)
            search_spans(db, query)  # warm
            times = []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                hits = search_spans(db, query)
                times.append((time.perf_counter() - t0) * 1000)
            print(
                f"{label}: {hits.total:,} spans in {hits.runs:,} runs; median {statistics.median(times):.0f} ms "
                f"(min {min(times):.0f}, max {max(times):.0f})"
            )
        db.close()


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
