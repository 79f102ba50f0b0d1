"""What two evaluation runs cost, run by run and item by item: latency, tokens and the cost estimate (at today's
prices per 1000 tokens, pipeline/history/call_stats.py), each with B − A. Items are paired as compare_runs matches
them (by golden id, else by normalised question); every figure is of original costs, so a run replayed from the
response cache costs what it first cost."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings
from pipeline.history.call_stats import cost_of
from store import evals
from store.db import Database


def difference(a: float | None, b: float | None) -> float | None:
    """B − A; None when either side has no figure."""
    return None if a is None or b is None else b - a


@dataclass(frozen=True)
class Usage:
    """What answering cost: one item's question run, or a whole run's items together."""

    latency_ms: float | None  # one item: its run's latency; a run: the median over its items (p50)
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # None when no price is set

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class UsageDelta:
    """A's and B's usage side by side, with B − A of each figure."""

    a: Usage | None  # None: the side has no run for the item (it failed, or is gone)
    b: Usage | None

    def _delta(self, figure: str) -> float | None:
        if self.a is None or self.b is None:
            return None
        return difference(getattr(self.a, figure), getattr(self.b, figure))

    @property
    def latency_ms(self) -> float | None:
        return self._delta("latency_ms")

    @property
    def tokens(self) -> float | None:
        return self._delta("tokens")

    @property
    def cost(self) -> float | None:
        return self._delta("cost")


@dataclass(frozen=True)
class RunCosts:
    """A whole run: latency p50 and p95 per question, and the tokens and cost of all its items' model calls."""

    usage: Usage
    p95_ms: float | None
    items: int


@dataclass(frozen=True)
class ItemPair:
    """One item both runs answered: its question, each side's run and status, and what each answer cost."""

    item_id: str  # A's id
    question: str
    a_run_id: int | None
    b_run_id: int | None
    a_status: str | None  # the answer's status (accepted, abstained, ...); None without a run
    b_status: str | None
    usage: UsageDelta


def _usage(settings: Settings, row: dict | None) -> Usage | None:
    if row is None or row["run_id"] is None:
        return None
    return Usage(row["latency_ms"], int(row["prompt_tokens"]), int(row["completion_tokens"]), cost_of(settings, row))


def run_costs(settings: Settings, rows: list[dict], latency: dict) -> RunCosts:
    """The run's costs from its items' usage (`rows`: evals.item_usage); `latency` is its evals.latency_summary."""
    totals = {
        "prompt_tokens": sum(int(r["prompt_tokens"]) for r in rows),
        "completion_tokens": sum(int(r["completion_tokens"]) for r in rows),
    }
    usage = Usage(
        latency.get("p50_ms"), totals["prompt_tokens"], totals["completion_tokens"], cost_of(settings, totals)
    )
    return RunCosts(usage, latency.get("p95_ms"), len(rows))


def item_pairs(
    settings: Settings,
    db: Database,
    usage_a: list[dict],
    usage_b: list[dict],
    b_eval_run_id: int,
    matched: dict[str, str],
) -> list[ItemPair]:
    """Every item both runs hold, in A's item order, from each run's items' usage (evals.item_usage); `matched` is
    B's item id -> A's (matching.matched_items). The question is as B asked it."""
    questions = {matched[i]: q for i, q in evals.item_questions(db, b_eval_run_id).items() if i in matched}
    rows_a = {r["item_id"]: r for r in usage_a}
    rows_b = {matched[r["item_id"]]: r for r in usage_b if r["item_id"] in matched}
    pairs = []
    for item in sorted(set(rows_a) & set(rows_b)):
        a, b = rows_a[item], rows_b[item]
        pairs.append(
            ItemPair(
                item,
                questions.get(item, ""),
                a["run_id"],
                b["run_id"],
                a["run_status"],
                b["run_status"],
                UsageDelta(_usage(settings, a), _usage(settings, b)),
            )
        )
    return pairs
