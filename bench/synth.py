"""What `synth` costs: model calls and prompt tokens per kept question, and wall time for 50 candidates.

    python -m bench synth
    python -m bench.synth --n 20 --profile laptop

The sample knowledge base (data/kb, 10 documents, 30 chunks) is ingested into a scratch store, then `synth` writes
`--n` candidates (default 50) in the default kinds and shares against the fake Ollama (tests/fake_ollama/) under a
latency profile: "GPU-like" (4 slots, 25 ms per output token, 0.5 ms per prompt token; default) or "laptop" (1 slot,
60 ms and 5 ms). The workbench is told the server's slots, and writes `eval_concurrency` (4) candidates at a time.
Calls and prompt tokens are counted from the fake's own request log (chat and generate requests; prompt tokens are
its whitespace words), so they include every retry and gate. The response cache is off for the first run (honest
cost); a second run of the same job under another name, with the cache on, shows what the cache saves.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter

from bench.common import ROOT, Figure, bench_environment, print_table
from pipeline.config import load_settings
from pipeline.evaluation.synth import parse_shares, run_synth
from pipeline.knowledge.ingest import ingest
from pipeline.models.llm import LLM
from store.db import get_database

GENERATION_PATHS = ("/api/chat", "/api/generate")
PROFILES = {"GPU-like": (4, 0.025, 0.0005), "laptop": (1, 0.060, 0.005)}


def served(fake) -> tuple[int, int, Counter]:
    """(chat/generate requests, their prompt tokens, requests by model) since the fake's log was cleared."""
    done = [r for r in fake.requests if r["path"] in GENERATION_PATHS]
    return len(done), sum(r.get("prompt_tokens", 0) for r in done), Counter(r["model"].split(":")[0] for r in done)


def measure(n: int = 50, profile: str = "GPU-like") -> list[Figure]:
    slots, per_token, per_prompt_token = PROFILES[profile]
    with bench_environment(WORKBENCH_CACHE_ENABLED="false", WORKBENCH_OLLAMA_SLOTS_PER_HOST=str(slots)) as (fake, _):
        settings = load_settings()
        db = get_database(settings)
        ingest([str(ROOT / "data" / "kb")], settings, db, LLM(settings, db))
        fake.clear()
        fake.set_latency(per_token, slots, per_prompt_token)
        start = time.perf_counter()
        result = run_synth(settings, db, "bench", n, parse_shares(None), seed=0)
        wall = time.perf_counter() - start
        calls, tokens, by_model = served(fake)
        fake.clear()
        cached = dataclasses.replace(settings, cache_enabled=True)
        run_synth(cached, db, "bench-warm", n, parse_shares(None), seed=0)  # fills the cache
        fake.clear()
        start = time.perf_counter()
        again = run_synth(cached, db, "bench-again", n, parse_shares(None), seed=0)
        warm_wall = time.perf_counter() - start
        warm_calls, _, _ = served(fake)
        db.close()
    kept = max(result.kept, 1)
    drops = ", ".join(f"{gate} {count}" for gate, count in result.dropped_per_gate.items())
    models = ", ".join(f"{m} {c / kept:.2f}" for m, c in sorted(by_model.items()))
    where = f"{profile}: {slots} slots, {per_token * 1000:g} ms/token, {per_prompt_token * 1000:g} ms/prompt token"
    return [
        Figure(
            f"synth: model calls per kept question ({profile})",
            calls / kept,
            "calls",
            note=f"{calls} calls for {result.kept} kept of {result.written} written ({models}); dropped: {drops}",
        ),
        Figure(
            f"synth: prompt tokens per kept question ({profile})",
            tokens / kept,
            "tokens",
            note=f"{tokens:,} prompt tokens in all; {tokens / max(result.written, 1):,.0f} per candidate written",
        ),
        Figure(
            f"synth: wall time for {n} candidates ({profile})",
            wall,
            "s",
            note=f"{where}; {result.kept} kept ({', '.join(f'{k} {v}' for k, v in result.kept_per_kind.items())})",
        ),
        Figure(
            f"synth: wall time for {n} candidates, all from the response cache",
            warm_wall,
            "s",
            note=f"{warm_calls} model calls; {again.cache_hits} replies from the cache; {again.kept} kept",
        ),
    ]


def run() -> list[Figure]:
    return measure()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.synth", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="candidates to write (default 50)")
    parser.add_argument("--profile", choices=list(PROFILES), default="GPU-like", help="the fake's latency profile")
    args = parser.parse_args(argv)
    print_table(measure(args.n, args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
