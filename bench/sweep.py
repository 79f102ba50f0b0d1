"""A 2x2 sweep (chunk_size 256,512 × top_k 3,5) against the same four evaluations run separately, one after another.

The user's knowledge base is data/kb chunked at the default 512, ingested once before anything is timed. Separately:
each combination runs in a scratch store of its own (a copy of that knowledge base, re-ingested at chunk_size 256
where the combination asks for it), so nothing is shared, as four separate `eval` runs over four knowledge bases.
The sweep: one command in one copy of the store; the chunk_size=256 index is built once for both of its
combinations, the 512 ones read the knowledge base itself, and calls equal to an earlier combination's (the
questions' embeddings, the context-precision verdicts on chunks that both top_k retrieve, judgements of the same
answer) come from the shared response cache. A later sweep over the same chunking (another top_k) then reuses the
index. The fake Ollama's latency model: 2 ms per generated token, 4 slots; the cache on (the default).
"""

from __future__ import annotations

import dataclasses
import shutil
import time

from bench.common import ROOT, Figure, bench_environment, recording
from pipeline.config import load_settings
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.runner import run_evaluation
from pipeline.experiments import leaderboard
from pipeline.experiments import sweep as sweep_module
from pipeline.experiments.grid import combinations, parse_grid
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database

GRID = ["chunk_size=256,512", "top_k=3,5"]
LATER = ["chunk_size=256,512", "top_k=8"]


def run(n_items: int = 8, concurrency: int = 4) -> list[Figure]:
    with bench_environment(WORKBENCH_STORE_IDLE_RELEASE_S="30") as (fake, folder):
        settings = load_settings()
        template = folder / "kb.duckdb"
        kb_settings = dataclasses.replace(settings, store_path=str(template))
        db = get_database(kb_settings)
        ingest([str(ROOT / "data" / "kb")], kb_settings, db, LLM(kb_settings, db))
        db.close()
        dataset = load_dataset(ROOT / "data" / "eval" / "golden.jsonl").select(n_items)
        fake.set_latency(0.002, slots=4)

        start = time.perf_counter()
        for combo in combinations(parse_grid(GRID), settings):
            path = folder / f"separate-{combo.position}.duckdb"
            shutil.copy(template, path)
            own = dataclasses.replace(combo.apply(settings), store_path=str(path))
            db = get_database(own)
            if own.chunk_size != settings.chunk_size:  # the knowledge base chunked for this evaluation
                ingest([str(ROOT / "data" / "kb")], own, db, LLM(own, db))
            outcome = run_evaluation(own, db, dataset, combo.label, concurrency)
            assert outcome.progress.done == n_items, outcome.progress
            db.close()
        separate_s = time.perf_counter() - start

        path = folder / "sweep.duckdb"
        shutil.copy(template, path)
        own = dataclasses.replace(settings, store_path=str(path))
        db = get_database(own)
        builds: list = []
        real_open = sweep_module.open_index
        sweep_module.open_index = recording(real_open, builds)
        try:
            start = time.perf_counter()
            outcome = sweep_module.run_sweep(own, db, dataset, "bench", GRID, concurrency=concurrency)
            sweep_s = time.perf_counter() - start
            assert outcome.status == "finished", outcome.status
            built_s = sum(end - begin for begin, end in builds)
            chunks = sum(len(index.ids) for index in outcome.indexes.values())
            board = leaderboard(own, db, "bench")
            calls, hits = sum(r.calls for r in board.rows), sum(r.cache_hits for r in board.rows)
            builds.clear()
            later = sweep_module.run_sweep(own, db, dataset, "bench-later", LATER, concurrency=concurrency)
            assert later.status == "finished" and all(i.built == 0 for i in later.indexes.values())
            reused_s = sum(end - begin for begin, end in builds)
        finally:
            sweep_module.open_index = real_open
        db.close()
    return [
        Figure(
            f"2x2 sweep of {n_items} items / the four evaluations run separately",
            sweep_s / separate_s,
            "×",
            note=f"{sweep_s:.1f} s vs {separate_s:.1f} s; {hits:,} of {calls:,} calls from the shared cache",
        ),
        Figure(
            "a later sweep's index over the same chunking: reused",
            reused_s,
            "s",
            note=f"built in {built_s:.1f} s the first time ({chunks} chunks at chunk_size 256; the fake embeds "
            "at no cost)",
        ),
    ]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
