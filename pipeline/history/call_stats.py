"""Model-call analytics per stage (generate, extract_claims, verify, judge_*, embed_query, ...): calls, tokens,
p50/p95 latency, cache hits, model time, and a cost estimate when a price per 1k tokens is set. Every figure is
of original costs (a replayed call carries the costs of the call that filled the cache); `replayed` says how much of
it the cache answered."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings
from store import call_stats
from store.db import Database


@dataclass(frozen=True)
class StageStats:
    stage: str  # "all stages" on the total row
    calls: int
    cache_hits: int
    errors: int
    prompt_tokens: int  # of every call, replayed ones included (they carry the tokens of the reply they reuse)
    completion_tokens: int
    p50_ms: float | None  # over every call, a replayed one at its original latency
    p95_ms: float | None
    model_s: float  # the summed original latency of the calls
    cost: float | None  # None when no price is set

    @property
    def replayed(self) -> float | None:
        """The share of the calls replayed from the cache."""
        return self.cache_hits / self.calls if self.calls else None


@dataclass(frozen=True)
class CallStats:
    stages: list[StageStats]
    total: StageStats | None  # None when there were no calls
    priced: bool


def cost_of(settings: Settings, row: dict) -> float | None:
    """The estimated cost of computing the calls' replies: a replayed call at its original tokens."""
    prompt_price, completion_price = settings.price_per_1k_prompt_tokens, settings.price_per_1k_completion_tokens
    if not (prompt_price or completion_price):
        return None
    return (row["prompt_tokens"] * prompt_price + row["completion_tokens"] * completion_price) / 1000


def _stage(settings: Settings, row: dict) -> StageStats:
    return StageStats(
        "all stages" if row["is_total"] else row["stage"],
        row["calls"],
        row["cache_hits"],
        row["errors"],
        int(row["prompt_tokens"]),
        int(row["completion_tokens"]),
        row["p50_ms"],
        row["p95_ms"],
        float(row["model_s"]),
        cost_of(settings, row),
    )


def _stats(settings: Settings, rows: list[dict]) -> CallStats:
    stages = [_stage(settings, row) for row in rows]
    priced = bool(settings.price_per_1k_prompt_tokens or settings.price_per_1k_completion_tokens)
    return CallStats(stages[:-1], stages[-1] if stages else None, priced)


def run_call_stats(settings: Settings, db: Database, run_id: int) -> CallStats:
    return _stats(settings, call_stats.for_run(db, run_id))


def evaluation_call_stats(settings: Settings, db: Database, eval_run_id: int) -> CallStats:
    """Every call made for the evaluation: its items' question runs and the judge's and metrics' calls."""
    return _stats(settings, call_stats.for_evaluation(db, eval_run_id))
