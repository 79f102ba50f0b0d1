"""Verifying 8 claims concurrently vs the same 8 verifier calls one after another.

The fake Ollama's latency model: 20 ms per generated token, 4 parallel slots (as OLLAMA_NUM_PARALLEL=4).
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from bench.common import Figure, bench_environment
from pipeline.config import load_settings
from pipeline.models.llm import LLM
from pipeline.verification.faithfulness import FaithfulnessChecker, Passage
from store.db import get_database

PASSAGE = Passage(
    1,
    1,
    "transformer.md",
    "The Transformer base model has 6 layers, 8 heads and d_model 512. "
    "Each of the 8 claims below names one of these numbers: 0 1 2 3 4 5 6 7.",
    1.0,
)


def wall(checker: FaithfulnessChecker, round_no: int) -> float:
    claims = [f"The Transformer base model has 8 heads, claim {n} {round_no}." for n in range(8)]
    start = time.perf_counter()
    verdicts = checker.verify_claims(claims, [PASSAGE])
    elapsed = time.perf_counter() - start
    assert all(v.verdict == "supported" for v in verdicts), [v.verdict for v in verdicts]
    return elapsed


def run(rounds: int = 5) -> list[Figure]:
    with bench_environment(WORKBENCH_CACHE_ENABLED="false", WORKBENCH_PRECHECK_ENABLED="false") as (fake, _):
        fake.set_latency(0.02, slots=4)
        settings = load_settings()
        db = get_database(settings)
        parallel = FaithfulnessChecker(LLM(settings, db), settings)
        serial_settings = dataclasses.replace(settings, verify_concurrency=1)
        serial = FaithfulnessChecker(LLM(serial_settings, db), serial_settings)
        wall(parallel, -1)
        ratios, p_times, s_times = [], [], []
        for r in range(rounds):
            p_times.append(wall(parallel, r))
            s_times.append(wall(serial, r))
            ratios.append(p_times[-1] / s_times[-1])
        db.close()
    note = (
        f"concurrent {statistics.median(p_times) * 1000:.0f} ms vs one-by-one "
        f"{statistics.median(s_times) * 1000:.0f} ms, concurrency {settings.verify_concurrency}"
    )
    return [Figure("verify 8 claims: concurrent / serial wall time", statistics.median(ratios), "×", 0.4, note=note)]


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
