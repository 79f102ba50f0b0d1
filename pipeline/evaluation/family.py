"""The statistics of a regression check: one one-sided test per metric × slice, tested as one family in a
pre-declared order (primary endpoints first), the family-wise error rate controlled at alpha.

- Each test is one-sided (did the metric drop?) over the items both runs scored. A judge criterion or a component
  metric: a paired t-test on the per-item differences. Faithfulness, where every shared item records its claim
  count: a claim-level test — the change in the share of supported claims, R = Σ supported / Σ claims over the
  shared items in each run, with a cluster-robust standard error: the delete-one-item jackknife (items are the
  clusters and each item is left out of both runs at once, so the pairing is kept: Δ_(-i) the change without
  item i, SE² = (n - 1) / n × Σ (Δ_(-i) - mean Δ_(-)) ², t with n - 1 degrees of freedom). An item with eight
  claims counts eight times as much as an item with one, and claims that are not independent within an answer
  (all right or all wrong together) widen the interval, not bias it. The jackknife rather than the ratio's
  linearisation (delta method): on 20,000 simulated equal runs of 68 items (the bench's claims model) the
  linearised SE rejected 4.2% at 4%, the jackknife 4.1%, at the same power (0.82 for a 0.1 drop). Without
  claim counts (older scores) faithfulness falls back to the paired t-test on item scores.
- Slices (tags) enter the family only with at least MIN_SLICE shared items; smaller ones are not tested.
- The testing strategy (declared before any data: setting `primary_metrics`, default faithfulness) is a
  gatekeeping procedure with a fallback that spends SPENT (90%) of alpha and holds the rest back:
  1. the primary endpoints — the whole-run tests of the primary metrics — are tested first, with
     PRIMARY_SHARE (80%) of alpha, by Holm's step-down procedure among themselves (equal weights);
  2. every other test (the other metrics' whole-run tests, with SECONDARY_OVERALL_SHARE of their share, and
     every metric's tag slices with the remainder; weighted Holm among them) is tested at FALLBACK_SHARE (10%)
     of alpha, and at SPENT (90%) once every primary is rejected. Without primaries the others get SPENT, and
     primaries without others get SPENT too.
  It controls the family-wise error rate (the chance of any false alert) at 0.9 alpha under any dependence: if
  a primary hypothesis is true, a false rejection needs a false rejection among the primaries (at most 0.8
  alpha) or one among the others at 0.1 alpha (0.9 alpha needs every primary rejected, the true one among
  them): at most 0.9 alpha together; if every primary hypothesis is false, only the others can err, and they
  are tested at 0.9 alpha at most. Why a tenth of alpha is held back: no test is liberal (the claim-level
  jackknife t rejected 3.8-4.1% at 4% on 10,000 or more equal runs of 10-68 items, the others at or below
  their levels), but the tests of
  a family are nearly independent, so the union bound is nearly tight and a procedure that spends all of alpha
  makes a false alarm on about alpha of equal runs — at alpha = 0.05 it measured 4.92% [4.51, 5.36] on 10,000
  equal pairs of the bench's missing-items model (the primary 4.1% at its 4%, the others 0.8% at their 1%), a
  rate that a promise of "at most 5%" cannot be checked against. Held back, the same pairs gave 4.53% [4.14,
  4.96]: the promise has a margin, the primary's level, and so its power, is unchanged, and the others' fallback
  level is half what it was. Holm rather than Benjamini-Hochberg because a gate that fails a CI job needs the
  family-wise guarantee, not a bound on the share of false discoveries. The others keep a fallback share of
  their own so that a drop in a metric that is not primary (context recall after a retriever change) is still
  seen when the primaries hold; that share is small, so the primary question keeps its power.
- Adjusted p: the smallest alpha at which the procedure rejects the test. Primary: min(1, h / 0.8), h its Holm
  adjusted p among the primaries; other: min(1, h' / 0.1, max(g, h' / 0.9)), h' its Holm adjusted p among the
  others, g the largest adjusted p of the primaries.
- A drop is an alert when the family rejects its test AND its estimated change is at least min_effect × the
  width of the metric's scale: a significant but negligible change is not worth an alert.
- The minimum detectable effect (mde) of a test: the true drop it would alert on with POWER (80%) probability,
  at the level the test is first tested at (alpha × its share) and its observed standard error:
  mde = max(t_(1-level) × SE, min_effect × span) + t_(POWER) × SE (t with n - 1 degrees of freedom; the first
  term is the larger of the estimate the test needs to reject and the practical-size bar).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtr, stdtrit

ALPHA = 0.05
MIN_SLICE = 10
PRIMARY_SHARE = 0.8  # of alpha to the primary endpoints, tested first
FALLBACK_SHARE = 0.1  # of alpha to every other test until every primary is rejected
SPENT = PRIMARY_SHARE + FALLBACK_SHARE  # of alpha spent in all; the rest is a margin (module docstring)
SECONDARY_OVERALL_SHARE = 0.8  # of the others' share to the other metrics' whole-run tests; the rest to tag slices
POWER = 0.8
OVERALL = "all"
CLAIM_METRICS = ("faithfulness",)


@dataclass
class Test:
    """One test of a metric on a slice; filled in by paired_test or claim_test and then by gatekeeping (or holm)."""

    metric: str
    slice: str
    n: int
    delta: float | None = None  # the mean change (claim level: the change in the share of supported claims)
    se: float | None = None
    p_raw: float | None = None
    weight: float = 0.0  # its share of alpha when it is first tested
    p_adjusted: float | None = None
    rejected: bool = False
    ci_low: float | None = None  # raw two-sided 95% interval
    ci_high: float | None = None
    adjusted_high: float | None = None  # one-sided upper bound at its first level (alpha × weight)
    level: float | None = None  # the level it is first tested at: alpha × weight
    claim_level: bool = False
    primary: bool = False
    family_size: int = 0
    items: list[str] = field(default_factory=list)


def _t_test(test: Test, delta: float, se: float) -> Test:
    test.delta, test.se = delta, se
    if se == 0:  # every item changed by the same amount: no noise to test against
        test.p_raw = 0.0 if delta < 0 else 1.0
        test.ci_low = test.ci_high = delta
        return test
    test.p_raw = float(stdtr(test.n - 1, delta / se))
    half = float(stdtrit(test.n - 1, 0.975)) * se
    test.ci_low, test.ci_high = delta - half, delta + half
    return test


def paired_test(metric: str, slice_name: str, diffs) -> Test:
    """One-sided paired t-test of a drop (mean difference < 0) on per-item differences."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    test = Test(metric, slice_name, n)
    if n < 2:
        return test
    return _t_test(test, float(d.mean()), float(d.std(ddof=1) / np.sqrt(n)))


def claim_test(metric: str, slice_name: str, base_values, base_claims, new_values, new_claims) -> Test:
    """One-sided test of a drop in the share of supported claims (Σ supported / Σ claims, supported = score ×
    claims), paired by item, with the delete-one-item jackknife standard error of the ratios' difference."""
    mb, mn = np.asarray(base_claims, dtype=float), np.asarray(new_claims, dtype=float)
    sb, sn = np.asarray(base_values, dtype=float) * mb, np.asarray(new_values, dtype=float) * mn
    n = len(mb)
    test = Test(metric, slice_name, n, claim_level=True)
    if n < 2:
        return test
    left_out = (sn.sum() - sn) / (mn.sum() - mn) - (sb.sum() - sb) / (mb.sum() - mb)
    se = float(np.sqrt((n - 1) / n * np.sum((left_out - left_out.mean()) ** 2)))
    return _t_test(test, float(sn.sum() / mn.sum() - sb.sum() / mb.sum()), se)


def holm_adjusted(p_values, weights) -> np.ndarray:
    """Weighted Holm adjusted p-values (weights relative; they are normalised over the tests given): in the
    order of p / w, each p times the weight left over its own weight, with the running maximum."""
    p, w = np.asarray(p_values, dtype=float), np.asarray(weights, dtype=float)
    adjusted = np.empty(len(p))
    remaining, running = w.sum(), 0.0
    for k in sorted(range(len(p)), key=lambda k: p[k] / w[k]):
        running = max(running, min(1.0, p[k] * remaining / w[k]))
        adjusted[k] = running
        remaining -= w[k]
    return adjusted


def _finish(tests: list[Test], alpha: float) -> None:
    for t in tests:
        t.family_size = len(tests)
        t.rejected = t.p_adjusted <= alpha
        t.level = alpha * t.weight
        if t.se:
            t.adjusted_high = t.delta + float(stdtrit(t.n - 1, 1 - t.level)) * t.se
        else:
            t.adjusted_high = t.delta


def holm(tests: list[Test], alpha: float = ALPHA) -> list[Test]:
    """Weighted Holm step-down over the tests that have a p-value (their weights summing to 1): sets
    p_adjusted, rejected and the one-sided adjusted upper bound of each. Controls the family-wise error rate at
    alpha under any dependence."""
    tested = [t for t in tests if t.p_raw is not None and t.weight > 0]
    for t, p in zip(tested, holm_adjusted([t.p_raw for t in tested], [t.weight for t in tested]), strict=True):
        t.p_adjusted = float(p)
    _finish(tested, alpha)
    return tests


def gatekeeping(
    tests: list[Test],
    primary=("faithfulness",),
    alpha: float = ALPHA,
    primary_share: float = PRIMARY_SHARE,
    overall_share: float = SECONDARY_OVERALL_SHARE,
    fallback_share: float = FALLBACK_SHARE,
) -> list[Test]:
    """The pre-declared testing strategy (module docstring): the whole-run tests of the primary metrics first,
    at primary_share of alpha (Holm among them); the others at fallback_share, and at primary_share +
    fallback_share (all that is spent) once every primary is rejected. Sets weight (the share of alpha each is
    first tested at), primary, p_adjusted, rejected and adjusted_high."""
    spent = primary_share + fallback_share
    tested = [t for t in tests if t.p_raw is not None]
    first = [t for t in tested if t.slice == OVERALL and t.metric in primary]
    others = [t for t in tested if not (t.slice == OVERALL and t.metric in primary)]
    share = primary_share if first and others else (spent if first else 0.0)
    rest = fallback_share if first else spent  # the others' share until every primary is rejected
    overall = [t for t in others if t.slice == OVERALL]
    tags = [t for t in others if t.slice != OVERALL]
    split = overall_share if overall and tags else (1.0 if overall else 0.0)
    for t in first:
        t.primary, t.weight = True, share / len(first)
    for t in overall:
        t.weight = rest * split / len(overall)
    for t in tags:
        t.weight = rest * (1 - split) / len(tags)
    gate = 0.0  # the smallest alpha at which every primary is rejected
    if first:
        for t, h in zip(first, holm_adjusted([t.p_raw for t in first], [1.0] * len(first)), strict=True):
            t.p_adjusted = min(1.0, float(h) / share)
        gate = max(t.p_adjusted for t in first)
    if others:
        held = holm_adjusted([t.p_raw for t in others], [t.weight for t in others])
        for t, h in zip(others, held, strict=True):
            t.p_adjusted = min(1.0, float(h) / rest, max(gate, float(h) / spent))
    _finish(tested, alpha)
    return tests


def detectable(test: Test, effect: float, power: float = POWER) -> float | None:
    """The minimum detectable drop: the true drop this test alerts on with the given power, at the level it
    is first tested at and its observed standard error, an alert needing both the rejection and an estimate
    at least `effect` (min_effect × span) below zero."""
    if test.se is None or not test.level:
        return None
    if test.se == 0:
        return effect
    df = test.n - 1
    return max(float(stdtrit(df, 1 - test.level)) * test.se, effect) + float(stdtrit(df, power)) * test.se


def family_tests(
    base: dict[str, dict],
    new: dict[str, dict],
    primary=("faithfulness",),
    claim_metrics=CLAIM_METRICS,
    min_slice: int = MIN_SLICE,
    min_overall: int = 5,
) -> list[Test]:
    """Every metric × slice test of a comparison, under the gatekeeping strategy.

    base/new: metric -> item id -> (value, run id, tags, claims or None). Tag slices come from the new
    run's tags and are tested with at least min_slice shared items; the overall slice with at least min_overall."""
    tests = []
    for metric in new:
        b, n = base.get(metric, {}), new[metric]
        shared = sorted(set(b) & set(n))
        if not shared:
            continue
        tags = sorted({tag for i in shared for tag in n[i][2]})
        for slice_name in [OVERALL, *tags]:
            items = shared if slice_name == OVERALL else [i for i in shared if slice_name in n[i][2]]
            if len(items) < (min_overall if slice_name == OVERALL else min_slice):
                continue
            claims = [(_claims(b[i]), _claims(n[i])) for i in items] if metric in claim_metrics else []
            if claims and all(cb and cn and cb > 0 and cn > 0 for cb, cn in claims):
                test = claim_test(
                    metric,
                    slice_name,
                    [b[i][0] for i in items],
                    [c[0] for c in claims],
                    [n[i][0] for i in items],
                    [c[1] for c in claims],
                )
            else:
                test = paired_test(metric, slice_name, [n[i][0] - b[i][0] for i in items])
            test.items = items
            tests.append(test)
    return gatekeeping(tests, primary)


def _claims(value: tuple):
    return value[3] if len(value) > 3 else None
