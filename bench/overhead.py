"""The workbench's own time per question against the fake Ollama at zero latency, 1,000-chunk KB.

Overhead = wall time of a question minus the time during which at least one Ollama HTTP call
was in flight (calls overlap during verification, so their union is subtracted, not their sum).
"""

from __future__ import annotations

import random
import time

from bench.common import ROOT, Figure, bench_environment, median_ms, recording
from pipeline.answering.engine import VerifiedQueryEngine, final_result  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.knowledge.ingest import ingest  # noqa: E402
from pipeline.models.llm import LLM  # noqa: E402
from store.db import get_database  # noqa: E402
from store.kb import count_chunks  # noqa: E402

TOPICS = [
    "retrieval",
    "embedding",
    "attention",
    "tokenizer",
    "quantization",
    "chunking",
    "evaluation",
    "calibration",
    "hallucination",
    "fine-tuning",
    "ranking",
    "latency",
    "vectors",
    "context",
]


def synthetic_docs(folder, n_docs: int, rng: random.Random) -> None:
    for d in range(n_docs):
        lines = [f"# Synthetic note {d}"]
        for s in range(60):
            a, b = rng.sample(TOPICS, 2)
            lines.append(
                f"Note {d}.{s} says that {a} affects {b} by {rng.randint(1, 99)} percent in "
                f"setting {rng.randint(1000, 9999)} measured in {rng.randint(1990, 2025)}."
            )
        (folder / f"note-{d:03d}.md").write_text("\n".join(lines), encoding="utf-8")


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def run(questions: int = 30) -> list[Figure]:
    with bench_environment(WORKBENCH_CHUNK_SIZE="128", WORKBENCH_CHUNK_OVERLAP="16") as (fake, folder):
        settings = load_settings()
        db = get_database(settings)
        docs = folder / "docs"
        docs.mkdir()
        synthetic_docs(docs, 65, random.Random(7))
        ingest([str(ROOT / "data" / "kb"), str(docs)], settings, db, LLM(settings, db))
        chunks = count_chunks(db, settings.embed_model)

        intervals: list[tuple[float, float]] = []
        real = LLM._with_retries
        LLM._with_retries = recording(real, intervals)
        try:
            engine = VerifiedQueryEngine(settings=settings, db=db)
            samples, statuses = [], []
            rng = random.Random(11)
            for i in range(questions + 3):
                a, b = rng.sample(TOPICS, 2)
                question = f"How much does {a} affect {b} in note {rng.randint(0, 64)}.{rng.randint(0, 59)}?"
                intervals.clear()
                start = time.perf_counter()
                result = final_result(engine.stream(question))
                wall = time.perf_counter() - start
                if i >= 3:  # the first questions load the index and warm the caches
                    samples.append(wall - union_seconds(intervals))
                    statuses.append(result.status)
        finally:
            LLM._with_retries = real
        db.close()
    note = f"{chunks} chunks, {questions} questions, statuses: " + ", ".join(
        f"{s} {statuses.count(s)}" for s in sorted(set(statuses))
    )
    return [Figure("overhead per question (median)", median_ms(samples), "ms", 50, note=note)]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
