"""Regression alerts simulated on the golden set's shape: false alarms on equal runs and power on a true drop.

The golden set's 68 items with their real tags; every registered metric (nine; judge criteria on 1-5)
compared over the overall slice and every tag slice, exactly as `pipeline.regression.compare` does
(compare_family: the same tests, the same Holm control, the same min_effect). Floors are a separate check
and are not simulated.

Two noise models, 200 seeds each:
- paired: per-item differences ~ N(0, 0.1) (× 4 on the judges' 1-5 scale), around baseline values drawn
  uniformly on the scale's upper part;
- claims: each item has a latent p ~ Beta(4, 1.2) per metric; each run draws 1-8 claims per item
  independently and scores supported/total (the judge criteria: 1 + Binomial(4, p), the same latent
  ratio on the 1-5 scale).
Power: faithfulness drops by 0.1 (paired: the differences' mean is -0.1; claims: p' = max(0, p - 0.1)),
the other metrics stay equal; a seed counts when any faithfulness drop alert is raised (and, separately,
when the overall slice's is).

`python -m bench regression --json` prints {"false_alarm": {...}, "power": {...}, "detail": {...}}.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from bench.common import ROOT, Figure
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.registry import metric_names, span_of
from pipeline.regression.compare import compare_family

SEEDS = 200
MIN_EFFECT = 0.05
DROP = 0.1
MODELS = ("paired", "claims")


def golden_shape() -> list[tuple[str, list[str]]]:
    return [(item.id, list(item.tags or [])) for item in load_dataset(ROOT / "data" / "eval" / "golden.jsonl").items]


def simulate_run_pair(rng, model: str, items, drop: float = 0.0) -> tuple[dict, dict]:
    """(base, new): metric -> item id -> (value, run id, tags, claims or None)."""
    base, new = {}, {}
    n = len(items)
    for metric in metric_names():
        span, low = span_of(metric), 1.0 if span_of(metric) > 1 else 0.0
        d = drop if metric == "faithfulness" else 0.0
        if model == "paired":
            b = low + span * rng.uniform(0.3, 0.9, n)
            nv = b + span * (rng.normal(0, 0.1, n) - d)
            mb = mn = [None] * n
        else:
            p = rng.beta(4, 1.2, n)
            if span > 1:
                b, nv = 1 + rng.binomial(4, p), 1 + rng.binomial(4, np.maximum(0, p - d))
                mb = mn = [None] * n
            else:
                mb, mn = rng.integers(1, 9, n), rng.integers(1, 9, n)
                b, nv = rng.binomial(mb, p) / mb, rng.binomial(mn, np.maximum(0, p - d)) / mn
        base[metric] = {i: (float(b[k]), k, tags, _int(mb[k])) for k, (i, tags) in enumerate(items)}
        new[metric] = {i: (float(nv[k]), k, tags, _int(mn[k])) for k, (i, tags) in enumerate(items)}
    return base, new


def _int(value):
    return None if value is None else int(value)


def simulate(model: str, drop: float, seeds: int = SEEDS, min_effect: float = MIN_EFFECT) -> dict:
    items = golden_shape()
    any_alert, overall_alert, faith_alert = 0, 0, 0
    by_slice: Counter = Counter()
    family_sizes = []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, MODELS.index(model), int(drop * 1000)])
        comparisons = compare_family(*simulate_run_pair(rng, model, items, drop), min_effect)
        family_sizes.append(sum(c.kind in ("drop", "ok") for c in comparisons))
        alerts = [c for c in comparisons if c.regression]
        any_alert += bool(alerts)
        faith_alert += any(c.metric == "faithfulness" for c in alerts)
        overall_alert += any(c.metric == "faithfulness" and c.slice == "all" for c in alerts)
        by_slice.update(f"{c.metric}/{c.slice}" for c in alerts)
    return {
        "seeds": seeds,
        "any_alert": any_alert / seeds,
        "faithfulness_alert": faith_alert / seeds,
        "faithfulness_overall_alert": overall_alert / seeds,
        "tests_per_comparison": float(np.mean(family_sizes)),
        "alerts_by_slice": dict(by_slice.most_common()),
    }


def results(seeds: int = SEEDS) -> dict:
    null = {m: simulate(m, 0.0, seeds) for m in MODELS}
    drop = {m: simulate(m, DROP, seeds) for m in MODELS}
    return {
        "false_alarm": {m: null[m]["any_alert"] for m in MODELS},
        "power": {m: drop[m]["faithfulness_alert"] for m in MODELS},
        "power_overall_slice": {m: drop[m]["faithfulness_overall_alert"] for m in MODELS},
        "detail": {"equal_runs": null, "faithfulness_drop_0.1": drop},
        "settings": {"seeds": seeds, "items": len(golden_shape()), "min_effect": MIN_EFFECT},
    }


def run(seeds: int = SEEDS) -> list[Figure]:
    r = results(seeds)
    note = f"{seeds} seeds, golden set's 68 items and tags, {len(metric_names())} metrics × slices, Holm"
    return [
        Figure("regression: false alarms on equal runs (paired)", r["false_alarm"]["paired"], "", 0.05, True, note),
        Figure("regression: false alarms on equal runs (claims)", r["false_alarm"]["claims"], "", 0.05, True, note),
        Figure("regression: power, faithfulness −0.1 (paired)", r["power"]["paired"], "", 0.95, False, note),
        Figure("regression: power, faithfulness −0.1 (claims)", r["power"]["claims"], "", 0.5, False, note),
    ]


def main(argv: list[str]) -> int:
    r = results()
    if "--json" in argv:
        print(json.dumps(r, indent=2))
    else:
        print(json.dumps({k: r[k] for k in ("false_alarm", "power", "power_overall_slice")}, indent=2))
    return 0
