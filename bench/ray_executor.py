"""The shipped golden set (68 items) on the local executor and on the Ray executor, on this machine.

`python -m bench.ray_executor`. The fake Ollama's latency model: 2 ms per generated token, 4 parallel slots
(as bench/evaluation.py); the cache is off, so every run does the same model calls (Ray's workers never use
it). Ray is timed twice: started for the evaluation (what `eval --executor ray` costs: Ray's start, its
workers' imports, shutdown), and on a Ray already running whose workers have run an item before.
"""

from __future__ import annotations

import time

from bench.common import ROOT, Figure, bench_environment, print_table
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.runner import run_evaluation
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database

CONCURRENCY = 4


def run() -> list[Figure]:
    from pipeline.evaluation import ray_executor

    with bench_environment(WORKBENCH_CACHE_ENABLED="false") as (fake, _):
        fake.set_latency(0.002, slots=4)
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        golden = load_dataset(ROOT / "data" / "eval" / "golden.jsonl")
        n = len(golden.items)

        def timed(name: str, executor: str) -> float:
            start = time.perf_counter()
            outcome = run_evaluation(settings, db, golden, name, CONCURRENCY, executor=executor)
            assert outcome.status == "finished", outcome.status
            return time.perf_counter() - start

        local = timed("local", "local")
        cold = timed("ray-cold", "ray")
        ray_executor.start(num_cpus=CONCURRENCY)
        try:
            timed("ray-warm-up", "ray")
            warm = timed("ray-warm", "ray")
        finally:
            ray_executor.stop()
    note = f"{n} items, concurrency {CONCURRENCY}, fake Ollama 2 ms/token, 4 slots, cache off"
    return [
        Figure("golden set, local executor", local, "s", note=note),
        Figure("golden set, Ray executor, Ray started for it", cold, "s", note="local Ray, 4 logical CPUs"),
        Figure("golden set, Ray executor, Ray running, workers warm", warm, "s", note="local Ray, 4 logical CPUs"),
    ]


if __name__ == "__main__":
    print_table(run())
