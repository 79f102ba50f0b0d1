"""A 100-item evaluation at concurrency 4 vs concurrency 1, and the runner's bookkeeping per item.

The fake Ollama's latency model: 2 ms per generated token, 4 parallel slots. The cache is off so both
runs do the same work. Bookkeeping = the runner's time per item outside the item's own pipeline
(writing the item's run, row and scores in one transaction, scheduling, progress).
"""

from __future__ import annotations

import statistics
import time

from bench.common import ROOT, Figure, bench_environment, recording
from pipeline.config import load_settings
from pipeline.evaluation import runner as evaluation
from pipeline.evaluation.dataset import Dataset, GoldenItem, load_dataset
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database


def items(n: int, tag: str) -> list[GoldenItem]:
    golden = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items
    return [
        GoldenItem(
            id=f"{tag}-{i}",
            question=f"{golden[i % len(golden)].question} ({tag} {i})",
            reference=golden[i % len(golden)].reference,
            tags=golden[i % len(golden)].tags,
        )
        for i in range(n)
    ]


def run(n_items: int = 100) -> list[Figure]:
    concurrency_figure, released, _ = measure(n_items, idle_release_s="0.5")
    _, held, save_held = measure(n_items // 4, idle_release_s="30", concurrencies=(1,))
    return [
        concurrency_figure,
        Figure(
            "evaluation runner bookkeeping per item, store kept open",
            held * 1000,
            "ms",
            20,
            note=f"saving the item: {save_held * 1000:.1f} ms median",
        ),
        Figure(
            "evaluation runner bookkeeping per item, store released when idle",
            released * 1000,
            "ms",
            note="default store_idle_release_s=0.5: the file is reopened (~20 ms) after each idle item",
        ),
    ]


def measure(n_items: int, idle_release_s: str, concurrencies=(1, 4)):
    with bench_environment(WORKBENCH_CACHE_ENABLED="false", WORKBENCH_STORE_IDLE_RELEASE_S=idle_release_s) as (fake, _):
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        fake.set_latency(0.002, slots=4)
        inner, saves = [], []
        real_item, real_save = evaluation.evaluate_item, evaluation.evals.save_item
        evaluation.evaluate_item = recording(real_item, inner)
        evaluation.evals.save_item = recording(real_save, saves)
        try:
            walls = {}
            for concurrency in concurrencies:
                inner.clear()
                saves.clear()
                start = time.perf_counter()
                outcome = evaluation.run_evaluation(
                    settings,
                    db,
                    Dataset("bench", items(n_items, f"c{concurrency}")),
                    f"bench-c{concurrency}",
                    concurrency=concurrency,
                )
                walls[concurrency] = time.perf_counter() - start
                assert outcome.progress.done == n_items, outcome.progress
                if concurrency == 1:
                    serial_bookkeeping = (walls[1] - sum(end - start for start, end in inner)) / n_items
                    save_median = statistics.median(end - start for start, end in saves)
        finally:
            evaluation.evaluate_item, evaluation.evals.save_item = real_item, real_save
        db.close()
    figure = None
    if 4 in walls:
        figure = Figure(
            f"evaluation of {n_items} items: concurrency 4 / concurrency 1 wall time",
            walls[4] / walls[1],
            "×",
            0.3,
            note=f"{walls[4]:.1f} s vs {walls[1]:.1f} s",
        )
    return figure, serial_bookkeeping, save_median


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
