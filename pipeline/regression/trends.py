"""Latency, tokens and cost per question over time (issue 29), beside the metric means the Trends page draws.

Per finished evaluation run, over its items' runs, and per service and day of traced runs: the mean, p50 and p95
latency of a question (its run's latency_ms), and the mean tokens (prompt + completion) and estimated cost of a
question, all from original costs (a question answered from the response cache reports what computing it cost),
with `replayed`, the share of the questions' model calls that the cache answered, beside them. A question's tokens
and cost are its run's as the Runs page and `runs` count them (store.history: TOKENS_SQL, COST_SQL): every call of
the run, at the prices per 1000 tokens (settings price_per_1k_prompt_tokens, price_per_1k_completion_tokens) for
cost, no cost without prices. A
question whose run made no calls (an imported answer) has neither, and counts in neither mean (None where no
question has one)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from pipeline.config import Settings
from pipeline.history.views import priced, prices
from store import alerts as alert_store
from store.db import Database


@dataclass(frozen=True)
class Measure:
    """A per-question figure of the series, declared once for the page's panels, its table and the CLI."""

    key: str  # the series row's key
    label: str
    unit: str  # "ms", "tokens" or "cost": how a value is formatted


MEASURES = (
    Measure("latency_ms", "mean latency", "ms"),
    Measure("p50_latency_ms", "p50 latency", "ms"),
    Measure("p95_latency_ms", "p95 latency", "ms"),
    Measure("tokens", "tokens per question", "tokens"),
    Measure("cost", "cost per question", "cost"),
)


def measures(settings: Settings) -> list[Measure]:
    """The measures there are: cost only when priced."""
    return [m for m in MEASURES if m.unit != "cost" or priced(settings)]


def run_costs(settings: Settings, db: Database, dataset: str | None = None) -> list[dict]:
    """Per finished evaluation run (of the dataset, or every one), oldest first: eval_run_id, name, dataset,
    created_at, questions (items with a run) and each of MEASURES."""
    rows = alert_store.eval_run_costs(db, prices(settings))
    return [r for r in rows if dataset is None or r["dataset"] == dataset]


def daily_costs(settings: Settings, db: Database, since: date | None = None) -> list[dict]:
    """Per service and day of traced runs, oldest day first: service, day, questions (traced runs) and each of
    MEASURES."""
    return alert_store.traced_daily_costs(db, prices(settings), since)
