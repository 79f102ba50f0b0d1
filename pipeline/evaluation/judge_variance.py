"""How far the judge agrees with itself: each item judged K times (`judge_repeats`), per criterion.

Definitions (an item counts when at least two of its repeats are valid; an invalid repeat is left out, never
scored):

- spread of an item: the sample standard deviation (ddof 1) of its valid repeat scores, and their range
  (highest minus lowest). `mean_sd` is the mean of the items' SDs; `pooled_sd` is the square root of the mean of
  the items' variances, an unbiased estimate (in variance) of the judge's noise on one score: a judge that picks
  3 or 4 at random has variance 0.25 (SD 0.5).
- changed share: the share of items whose valid repeat scores are not all the same.
- self-agreement: the quadratic-weighted kappa of every ordered pair of distinct repeats of the same item,
  pooled over the items: each item's pairs form a 5 x 5 table of counts, normalised to weight 1 so that an item
  with more valid repeats does not count more, and the tables are summed. The pooled table is symmetric (both
  orders of each pair), so both "raters" have the same marginals and kappa compares the pairs' agreement with
  that of two scores drawn at random from all the repeats (chance). A judge that picks at random among two
  scores has kappa near 0; one that never changes its score, 1. Kappa is 1 by definition when every pair
  agrees, even where the statistic is 0/0 (every item got the same single score).
- its 95% interval: a jackknife over items (each item left out in turn, with all its repeats, since the pairs of
  one item are not independent of each other): the bias-corrected kappa plus or minus t(n-1) jackknife standard
  errors, clipped to [-1, 1]. In simulation (`python -m bench judge_variance`) it covered the true kappa 85-95%
  of the time with 20-40 items (89-94% with 40), short of its nominal 95%; a percentile bootstrap over items
  covered only 67-89% with 15-20 items (kappa's small-sample bias under skewed, judge-like scores, which
  resampling repeats instead of correcting). It is withheld, with the reason, when every pair agrees (nothing
  varies: a zero-width interval says nothing) and with fewer than MIN_INTERVAL_ITEMS items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import t as t_dist

from pipeline.evaluation import registry
from pipeline.evaluation.kappa import table_kappa_se
from store import evals
from store.db import Database

# Fewer items than this get no interval: at 10-15 items the jackknife interval covered the true kappa 80-94% of the
# time, at 20 items 85-93% (judges keeping an item's score with probability 0.9, 0.8, 0.7 or 0.5, else moving it one
# step, and one picking 3 or 4 at random; 3 and 5 repeats; `python -m bench judge_variance`, docs/benchmarks.md).
MIN_INTERVAL_ITEMS = 20
SCALE = (1, 5)


@dataclass
class ItemSpread:
    item_id: str
    values: list[float]  # its valid repeat scores, by repeat
    invalid: int  # its invalid repeats
    sd: float | None  # None with fewer than two valid repeats
    range: float | None


@dataclass
class CriterionVariance:
    """The judge's variance on one criterion over an evaluation's (or a scope's) items."""

    metric: str
    repeats: int  # the most repeats an item has
    items: int  # items with at least two valid repeats (the figures below are over these)
    fewer_than_two: int  # items with fewer than two valid repeats (left out)
    invalid_repeats: int
    mean_sd: float | None = None
    pooled_sd: float | None = None
    mean_range: float | None = None
    max_range: float | None = None
    changed_share: float | None = None
    kappa: float | None = None
    kappa_low: float | None = None
    kappa_high: float | None = None
    exact: float | None = None  # share of the pooled pairs that agree exactly (each item weighted 1)
    within_one: float | None = None
    mean_abs_diff: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # statistic -> why it is n/a
    per_item: list[ItemSpread] = field(default_factory=list)

    def why_not(self, statistic: str) -> str | None:
        return self.reasons.get(statistic) if getattr(self, statistic, None) is None else None

    def summary(self) -> dict:
        """Everything but the per-item rows (for a table row or JSON)."""
        return {k: v for k, v in self.__dict__.items() if k != "per_item"}


def item_spread(item_id: str, values: list[float], invalid: int = 0) -> ItemSpread:
    if len(values) < 2:
        return ItemSpread(item_id, list(values), invalid, None, None)
    array = np.asarray(values, dtype=float)
    return ItemSpread(item_id, list(values), invalid, float(array.std(ddof=1)), float(array.max() - array.min()))


def pair_table(values: Iterable[float]) -> np.ndarray:
    """The 5 x 5 table of the ordered pairs of distinct repeats of one item, normalised to sum 1 (zeros with fewer
    than two repeats)."""
    scores = np.clip(np.rint(np.asarray(list(values), dtype=float)).astype(int), *SCALE) - SCALE[0]
    counts = np.bincount(scores, minlength=5)[:5].astype(float)
    table = np.outer(counts, counts) - np.diag(counts)
    pairs = table.sum()
    return table / pairs if pairs > 0 else table


def pooled_kappa(tables: np.ndarray) -> np.ndarray:
    """Self-agreement of each stack of item tables (shape ... x items x 5 x 5): the quadratic-weighted kappa of the
    summed table, 1 where every pair agrees (kappa 0/0 when all scores are one value)."""
    summed = tables.sum(-3)
    kappa, _ = table_kappa_se(summed)
    agree = np.trace(summed, axis1=-2, axis2=-1) >= summed.sum((-2, -1)) - 1e-9
    return np.where(agree, 1.0, kappa)


def jackknife_interval(tables: np.ndarray) -> tuple[float, float]:
    """95% jackknife interval over items of the pooled kappa of these item tables (items x 5 x 5): the
    bias-corrected kappa plus or minus t(n-1) jackknife standard errors, clipped to [-1, 1]."""
    n = len(tables)
    left_out = pooled_kappa((tables.sum(0)[None] - tables)[:, None])  # each item left out in turn
    kappa = float(pooled_kappa(tables))
    mean = float(left_out.mean())
    se = float(np.sqrt((n - 1) / n * ((left_out - mean) ** 2).sum()))
    centre, half = n * kappa - (n - 1) * mean, float(t_dist.ppf(0.975, n - 1)) * se
    return max(-1.0, centre - half), min(1.0, centre + half)


def self_agreement(groups: list[list[float]]) -> tuple:
    """(kappa, low, high, why the interval is withheld or None) of the items' repeat scores (each a list of at
    least two valid scores); see the module's docstring."""
    tables = np.stack([pair_table(g) for g in groups])
    kappa = float(pooled_kappa(tables))
    if np.all(np.trace(tables, axis1=1, axis2=2) >= 1 - 1e-9):
        return kappa, None, None, "every repeat gave the same score: nothing varies, so no interval"
    if len(groups) < MIN_INTERVAL_ITEMS:
        return (
            kappa,
            None,
            None,
            f"only {len(groups)} item{'s' if len(groups) != 1 else ''} with repeats (fewer than "
            f"{MIN_INTERVAL_ITEMS}): intervals from so few items covered the true kappa 80-94% of the time in "
            "simulation, not 95% (python -m bench judge_variance); judge more items",
        )
    low, high = jackknife_interval(tables)
    return kappa, low, high, None


def criterion_variance(metric: str, rows: list[dict]) -> CriterionVariance:
    """The variance of one criterion from its repeat rows ({item_id, repeat, value, status}) over some items."""
    by_item: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (str(r["item_id"]), r["repeat"])):
        by_item.setdefault(str(row["item_id"]), []).append(row)
    per_item = [
        item_spread(
            item,
            [float(r["value"]) for r in repeats if r["status"] == "ok" and r["value"] is not None],
            sum(r["status"] != "ok" for r in repeats),
        )
        for item, repeats in by_item.items()
    ]
    counted = [s for s in per_item if s.sd is not None]
    result = CriterionVariance(
        metric,
        max((len(r) for r in by_item.values()), default=0),
        len(counted),
        len(per_item) - len(counted),
        sum(s.invalid for s in per_item),
        per_item=per_item,
    )
    if not counted:
        reason = "no item has two valid repeats"
        result.reasons = {k: reason for k in ("mean_sd", "pooled_sd", "changed_share", "kappa", "kappa_low")}
        return result
    sds = np.array([s.sd for s in counted])
    ranges = np.array([s.range for s in counted])
    result.mean_sd, result.pooled_sd = float(sds.mean()), float(np.sqrt((sds**2).mean()))
    result.mean_range, result.max_range = float(ranges.mean()), float(ranges.max())
    result.changed_share = float((ranges > 0).mean())
    groups = [s.values for s in counted]
    result.kappa, result.kappa_low, result.kappa_high, withheld = self_agreement(groups)
    if withheld:
        result.reasons["kappa_low"] = result.reasons["kappa_high"] = withheld
    summed = np.stack([pair_table(g) for g in groups]).sum(0) / len(groups)
    distance = np.abs(np.subtract.outer(np.arange(5), np.arange(5)))
    result.exact = float(np.trace(summed))
    result.within_one = float(summed[distance <= 1].sum())
    result.mean_abs_diff = float((summed * distance).sum())
    return result


def variance_from_rows(rows: list[dict]) -> list[CriterionVariance]:
    """Per criterion (registry order), from repeat rows ({metric, item_id, repeat, value, status})."""
    by_metric: dict[str, list[dict]] = {}
    for row in rows:
        by_metric.setdefault(row["metric"], []).append(row)
    ordered = registry.in_registry_order([{"metric": m} for m in by_metric])
    return [criterion_variance(r["metric"], by_metric[r["metric"]]) for r in ordered]


def evaluation_variance(db: Database, eval_run_id: int) -> list[CriterionVariance]:
    """The judge's variance per criterion over an evaluation judged with repeats; [] for one judged once."""
    return variance_from_rows(evals.judge_repeats(db, eval_run_id))


def scope_variance(db: Database, run_ids: list[int], criterion: str) -> CriterionVariance | None:
    """The judge's self-agreement on one criterion over the evaluation items among these question runs that were
    judged with repeats; None when none was."""
    rows = evals.judge_repeats_of_runs(db, run_ids, f"judge_{criterion}")
    return criterion_variance(f"judge_{criterion}", rows) if rows else None


def self_vs_people(people, itself: CriterionVariance) -> str | None:
    """One sentence that says whether the judge agrees more with people (`people`: an Agreement of the judge's
    scores, the mean of its repeats rounded to a whole score, with people's ratings) or with itself (its
    self-agreement over its repeats), with both kappas and their intervals; None when either kappa is n/a."""
    if people.kappa is None or itself.kappa is None:
        return None

    def shown(k, low, high) -> str:
        return f"κ {k:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None else ", no interval")

    with_people = shown(people.kappa, people.kappa_low, people.kappa_high)
    with_itself = shown(itself.kappa, itself.kappa_low, itself.kappa_high)
    if people.kappa > itself.kappa:
        sentence = (
            f"The judge agrees with people ({with_people}) more than with itself ({with_itself}): it disagrees with "
            "people less than with its own repeats, so much of its disagreement with people is its inconsistency "
            "from one judging to the next; a mean over more repeats steadies it, before any correction can help."
        )
    elif people.kappa < itself.kappa:
        sentence = (
            f"The judge agrees with itself ({with_itself}) more than with people ({with_people}): its disagreement "
            "with people is consistent, not noise from one judging to the next; corrections (people's scores as "
            "examples in its prompt) address that, more repeats do not."
        )
    else:
        sentence = f"The judge agrees with people ({with_people}) as much as with itself ({with_itself})."
    intervals = (people.kappa_low, people.kappa_high, itself.kappa_low, itself.kappa_high)
    if None in intervals:
        return sentence + " Without both intervals, the order may be chance."
    if people.kappa_low <= itself.kappa_high and itself.kappa_low <= people.kappa_high:
        return sentence + " The intervals overlap: the order may be chance."
    return sentence
