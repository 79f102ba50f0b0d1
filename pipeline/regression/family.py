"""The statistics of a regression check: one paired test per metric × slice, the family controlled together.

- Each test is one-sided (did the metric drop?) over the items both runs scored: a paired t-test on the
  per-item differences. For faithfulness, each item's difference is weighted by its claim counts,
  w = m_base × m_new / (m_base + m_new) (the inverse of the binomial variance of a difference of two ratios
  over m_base and m_new claims), so an item judged on eight claims counts more than one judged on one.
  The standard error comes from the observed differences (a sandwich estimate), so claims that are not
  independent within an answer make the interval wider, not wrong.
- Slices (tags) enter the family only with at least MIN_SLICE shared items; smaller ones are not tested.
- The family (every metric × the overall slice and the tested tag slices) is controlled by Holm's
  step-down procedure with weights: the family-wise error rate (the chance of any alert on equal runs) is
  at most alpha under any dependence between the tests — slices overlap and metrics move together, which
  rules out procedures that assume independence. Benjamini-Hochberg would control the false discovery rate
  instead, which allows an alert on equal runs more often than alpha whenever several hypotheses are true
  but not all, and a gate that fails a CI job needs the stronger guarantee.
  80% of alpha goes to the overall slices (split equally over the metrics), 20% to the tag slices (split
  equally over them): a drop of the whole run is what the gate guards first, and adding tags must not cost
  the overall tests their power; a slice alone needs stronger evidence.
- A drop is an alert when the family rejects its test AND its estimated change is at least min_effect × the
  width of the metric's scale: a significant but negligible change is not worth an alert. (Before, the whole
  interval had to lie below -min_effect, a non-inferiority test that needed a true drop of about twice
  min_effect to be seen.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import t as student_t

ALPHA = 0.05
MIN_SLICE = 10
OVERALL_SHARE = 0.8
OVERALL = "all"


@dataclass
class Test:
    """One paired test of a metric on a slice; filled in by paired_test and then by holm."""

    metric: str
    slice: str
    n: int
    delta: float | None = None  # the (weighted) mean change, new - baseline
    se: float | None = None
    p_raw: float | None = None
    weight: float = 0.0  # its share of alpha
    p_adjusted: float | None = None
    rejected: bool = False
    ci_low: float | None = None  # raw two-sided 95% interval
    ci_high: float | None = None
    adjusted_high: float | None = None  # one-sided upper bound at the test's Bonferroni level
    weighted: bool = False
    family_size: int = 0
    items: list[str] = field(default_factory=list)


def claim_weights(base_claims, new_claims) -> np.ndarray | None:
    """w = m_a m_b / (m_a + m_b) per item; None unless every item has both claim counts."""
    if any(c is None or c <= 0 for c in list(base_claims) + list(new_claims)):
        return None
    a, b = np.asarray(base_claims, dtype=float), np.asarray(new_claims, dtype=float)
    return a * b / (a + b)


def paired_test(metric: str, slice_name: str, diffs, weights=None) -> Test:
    """One-sided paired t-test of a drop (mean difference < 0), weighted when weights are given."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    test = Test(metric, slice_name, n, weighted=weights is not None)
    if n < 2:
        return test
    delta = float(np.sum(w * d) / np.sum(w))
    se = float(np.sqrt(np.sum(w**2 * (d - delta) ** 2) / np.sum(w) ** 2 * n / (n - 1)))
    test.delta, test.se = delta, se
    if se == 0:  # every item changed by the same amount: no noise to test against
        test.p_raw = 0.0 if delta < 0 else 1.0
        test.ci_low = test.ci_high = delta
        return test
    test.p_raw = float(student_t.cdf(delta / se, n - 1))
    half = float(student_t.ppf(0.975, n - 1)) * se
    test.ci_low, test.ci_high = delta - half, delta + half
    return test


def assign_weights(tests: list[Test], overall_share: float = OVERALL_SHARE) -> None:
    """Split alpha: overall_share over the overall slices, the rest over the tag slices (all of it to one
    group when the other is empty)."""
    overall = [t for t in tests if t.slice == OVERALL]
    tags = [t for t in tests if t.slice != OVERALL]
    share = overall_share if overall and tags else (1.0 if overall else 0.0)
    for t in overall:
        t.weight = share / len(overall)
    for t in tags:
        t.weight = (1 - share) / len(tags)


def holm(tests: list[Test], alpha: float = ALPHA) -> list[Test]:
    """Weighted Holm step-down over the tests that have a p-value (weights from assign_weights, summing to 1):
    sets p_adjusted, rejected and the one-sided adjusted upper bound of each. Controls the family-wise error
    rate at alpha under any dependence."""
    tested = [t for t in tests if t.p_raw is not None and t.weight > 0]
    order = sorted(tested, key=lambda t: t.p_raw / t.weight)
    remaining = sum(t.weight for t in tested)
    running = 0.0
    for t in tested:
        t.family_size = len(tested)
    for t in order:
        running = max(running, min(1.0, t.p_raw * remaining / t.weight))
        t.p_adjusted = running
        t.rejected = running <= alpha
        remaining -= t.weight
    for t in tested:
        level = alpha * t.weight
        if t.se:
            t.adjusted_high = t.delta + float(student_t.ppf(1 - level, t.n - 1)) * t.se
        else:
            t.adjusted_high = t.delta
    return tests


def family_tests(
    base: dict[str, dict],
    new: dict[str, dict],
    weighted_metrics=("faithfulness",),
    min_slice: int = MIN_SLICE,
    min_overall: int = 5,
) -> list[Test]:
    """Every metric × slice test of a comparison, Holm-controlled.

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
            diffs = [n[i][0] - b[i][0] for i in items]
            weights = None
            if metric in weighted_metrics:
                weights = claim_weights([_claims(b[i]) for i in items], [_claims(n[i]) for i in items])
            test = paired_test(metric, slice_name, diffs, weights)
            test.items = items
            tests.append(test)
    assign_weights(tests)
    return holm(tests)


def _claims(value: tuple):
    return value[3] if len(value) > 3 else None
