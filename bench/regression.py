"""Regression alerts simulated on the golden set's shape: false alarms on equal runs and power on a true drop.

The golden set's 68 items with their real tags; every registered metric a single question gets
(nine; judge criteria on 1-5; judge rewrite scores only a conversation's follow-ups)
compared over the overall slice and every tag slice with at least 10 items, exactly as
`pipeline.evaluation.regression` does (compare_family: the same tests, the same gatekeeping with faithfulness
as the primary endpoint, the same min_effect). Floors are a separate check and are not simulated.

Six noise models. Each item has a latent quality p per metric, the same in both runs (the question's
difficulty); a run scores the item from it:
- claims: p ~ Beta(4, 1.2); every 0-1 metric is supported / total over 1-8 claims drawn anew in each run
  (faithfulness records its claim count, so its test is claim-level); judge criteria 1 + Binomial(4, p);
- ties: as claims, but each judge criterion gives the same score in both runs to 70% of the items (a
  judge at temperature 0 reading a near-identical answer): mostly zero differences;
- ceiling: p ~ Beta(8, 0.7) (mean 0.92): most faithfulness scores are 1.0 and most judge scores 5;
- missing: as claims, but each run fails 10% of its items (no score at all) and leaves another 5% of
  each metric's scores unscored (an invalid judge reply, an abstention): the runs share fewer items, and
  not the same ones per metric;
- correlated: as claims, with the latent p of an item's metrics correlated (a Gaussian copula, rho 0.7)
  and, in each run, one shock per item ~ N(0, 0.1) added to every metric's p (clipped to 0-1): all the
  item's metrics move together from run to run, and faithfulness varies between runs beyond its claims;
- mixed: all of them at once (half the items at the ceiling, half Beta(4, 1.2); copula and shocks; judge
  ties; failed and unscored items).
A drop: faithfulness's latent p falls by DROP in the new run (p' = max(0, p - DROP)); the other metrics
stay equal. Power counts the pairs with a faithfulness drop alert on the whole run (the primary endpoint),
and, apart, with any faithfulness alert (a slice's included).

False alarms: the share of equal pairs with any drop alert (a rejection whose estimate clears min_effect),
and the share with any rejection at all (the procedure's family-wise error, min_effect aside), each with
its 95% Wilson interval.

`python -m bench regression [--json] [--null N] [--power N]` (defaults 2,000 equal pairs per model and 1,000
pairs per drop of 0.1 and 0.05).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from bench.common import ROOT, Figure
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.registry import get_metric, metric_names, span_of
from pipeline.evaluation.regression import compare_family

NULL_PAIRS = 2000
POWER_PAIRS = 1000
MIN_EFFECT = 0.05
DROPS = (0.1, 0.05)
MODELS = ("claims", "ties", "ceiling", "missing", "correlated", "mixed")
JUDGE_TIE = 0.7
FAILED, UNSCORED = 0.10, 0.05
SHOCK_SD, COPULA_RHO = 0.1, 0.7


def golden_shape() -> list[tuple[str, list[str]]]:
    return [(item.id, list(item.tags or [])) for item in load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items]


def _latent(rng, model: str, n: int, k: int) -> np.ndarray:
    """n items × k metrics of latent quality in [0, 1]."""
    if model in ("correlated", "mixed"):
        shared = rng.normal(size=(n, 1))
        u = norm.cdf(math.sqrt(COPULA_RHO) * shared + math.sqrt(1 - COPULA_RHO) * rng.normal(size=(n, k)))
    else:
        u = rng.uniform(size=(n, k))
    if model == "ceiling":
        return beta_dist.ppf(u, 8, 0.7)
    if model == "mixed":
        at_top = rng.uniform(size=(n, 1)) < 0.5
        return np.where(at_top, beta_dist.ppf(u, 8, 0.7), beta_dist.ppf(u, 4, 1.2))
    return beta_dist.ppf(u, 4, 1.2)


def _scored(rng, model: str, p: np.ndarray, spans: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """One run's scores (n × k; NaN where not scored) and claim counts from latent p."""
    n, k = p.shape
    if model in ("correlated", "mixed"):
        p = np.clip(p + rng.normal(0, SHOCK_SD, size=(n, 1)), 0, 1)
    claims = rng.integers(1, 9, size=(n, k))
    ratio = rng.binomial(claims, p) / claims
    judge = 1 + rng.binomial(4, p)
    scores = np.where(np.asarray(spans) > 1, judge, ratio).astype(float)
    if model in ("missing", "mixed"):
        failed = rng.uniform(size=(n, 1)) < FAILED
        scores[failed[:, 0]] = np.nan
        scores[rng.uniform(size=(n, k)) < UNSCORED] = np.nan
    return scores, claims


def simulate_run_pair(rng, model: str, items, drop: float = 0.0) -> tuple[dict, dict]:
    """(base, new): metric -> item id -> (value, run id, tags, claims or None), items without a score left out."""
    # the metrics a single question gets (the golden set has no conversations): judge rewrite is never scored
    names = [m for m in metric_names() if not get_metric(m).turns_only]
    spans = [span_of(m) for m in names]
    p = _latent(rng, model, len(items), len(names))
    p_new = p.copy()
    p_new[:, names.index("faithfulness")] = np.maximum(0, p[:, names.index("faithfulness")] - drop)
    b, mb = _scored(rng, model, p, spans)
    nv, mn = _scored(rng, model, p_new, spans)
    if model in ("ties", "mixed"):
        judges = np.asarray(spans) > 1
        tie = (rng.uniform(size=nv.shape) < JUDGE_TIE) & judges & ~np.isnan(b)
        nv = np.where(tie & ~np.isnan(nv), b, nv)
    base, new = {}, {}
    for j, metric in enumerate(names):
        counted = metric == "faithfulness"
        for values, counts, out in ((b, mb, base), (nv, mn, new)):
            out[metric] = {
                i: (float(values[r, j]), r, tags, int(counts[r, j]) if counted else None)
                for r, (i, tags) in enumerate(items)
                if not np.isnan(values[r, j])
            }
    return base, new


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _rate(hits: int, n: int) -> dict:
    low, high = wilson(hits, n)
    return {"rate": hits / n, "wilson_95": [round(low, 4), round(high, 4)], "hits": hits, "pairs": n}


def simulate(model: str, drop: float, pairs: int, min_effect: float = MIN_EFFECT, start: int = 0) -> dict:
    items = golden_shape()
    alert = reject = faith = primary = 0
    by_slice: Counter = Counter()
    family_sizes, mdes = [], []
    for seed in range(start, start + pairs):
        rng = np.random.default_rng([seed, MODELS.index(model), int(round(drop * 1000))])
        comparisons = compare_family(*simulate_run_pair(rng, model, items, drop), min_effect)
        tested = [c for c in comparisons if c.kind in ("drop", "ok")]
        family_sizes.append(len(tested))
        alerts = [c for c in comparisons if c.regression]
        alert += bool(alerts)
        reject += any(c.p_adjusted is not None and c.p_adjusted <= 0.05 for c in tested)
        faith += any(c.metric == "faithfulness" for c in alerts)
        primary += any(c.metric == "faithfulness" and c.slice == "all" for c in alerts)
        by_slice.update(f"{c.metric}/{c.slice}" for c in alerts)
        mdes += [c.mde for c in tested if c.metric == "faithfulness" and c.slice == "all" and c.mde is not None]
    return {
        "pairs": pairs,
        "any_alert": _rate(alert, pairs),
        "any_rejection": _rate(reject, pairs),
        "faithfulness_overall_alert": _rate(primary, pairs),
        "faithfulness_any_alert": _rate(faith, pairs),
        "tests_per_comparison": float(np.mean(family_sizes)),
        "faithfulness_mde_median": float(np.median(mdes)) if mdes else None,
        "alerts_by_slice": dict(by_slice.most_common(8)),
    }


def results(null_pairs: int = NULL_PAIRS, power_pairs: int = POWER_PAIRS, models=MODELS) -> dict:
    null = {m: simulate(m, 0.0, null_pairs) for m in models}
    drops = {f"faithfulness_drop_{d}": {m: simulate(m, d, power_pairs) for m in models} for d in DROPS}
    return {
        "false_alarm": {m: null[m]["any_alert"] for m in models},
        "family_wise_rejection": {m: null[m]["any_rejection"] for m in models},
        "power": {
            name: {m: by_model[m]["faithfulness_overall_alert"] for m in models} for name, by_model in drops.items()
        },
        "detail": {"equal_runs": null, **drops},
        "settings": {
            "null_pairs": null_pairs,
            "power_pairs": power_pairs,
            "items": len(golden_shape()),
            "min_effect": MIN_EFFECT,
            "primary": "faithfulness",
        },
    }


def run(null_pairs: int = NULL_PAIRS, power_pairs: int = POWER_PAIRS) -> list[Figure]:
    r = results(null_pairs, power_pairs)
    note = f"{null_pairs} equal and {power_pairs} dropped pairs per model, golden set's 68 items and tags"
    figures = [
        Figure(f"regression: false alarms on equal runs ({m})", r["false_alarm"][m]["rate"], "", 0.05, True, note)
        for m in MODELS
    ]
    power = r["power"]["faithfulness_drop_0.1"]
    figures.append(
        Figure("regression: power, faithfulness −0.1 (claims)", power["claims"]["rate"], "", 0.8, False, note)
    )
    figures.append(
        Figure("regression: power, faithfulness −0.1 (correlated)", power["correlated"]["rate"], "", 0.6, False, note)
    )
    return figures


def _option(argv: list[str], name: str, default: int) -> int:
    return int(argv[argv.index(name) + 1]) if name in argv else default


def main(argv: list[str]) -> int:
    r = results(_option(argv, "--null", NULL_PAIRS), _option(argv, "--power", POWER_PAIRS))
    if "--json" in argv:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{'model':<11} {'false alarms [95% Wilson]':<28} {'any rejection':<26} power −0.1     power −0.05")
    for m in MODELS:
        fa, fw = r["false_alarm"][m], r["family_wise_rejection"][m]
        p1, p05 = r["power"]["faithfulness_drop_0.1"][m], r["power"]["faithfulness_drop_0.05"][m]
        print(
            f"{m:<11} {fa['rate']:.4f} [{fa['wilson_95'][0]:.4f}, {fa['wilson_95'][1]:.4f}]   "
            f"{fw['rate']:.4f} [{fw['wilson_95'][0]:.4f}, {fw['wilson_95'][1]:.4f}]   "
            f"{p1['rate']:.3f}          {p05['rate']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
