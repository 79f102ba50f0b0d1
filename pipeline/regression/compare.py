"""Regression detection: a run against its baseline, per metric and per tag slice.

- floors: a metric's mean below its floor (settings `floors`, e.g. faithfulness=0.70,context_recall=0.75);
- drops: the paired bootstrap 95% interval of the mean per-item difference (new - baseline), over the
  items both runs scored, lies wholly below -min_effect × the width of the metric's scale (1 on 0-1,
  4 for 1-5 judge scores).
Every registered metric is compared (pipeline.evaluation.registry). Runs under different judge pins are
never compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import bootstrap

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.diagnosis import diagnose
from pipeline.evaluation.registry import METRIC_NAMES, get_metric, metric_names, span_of
from store import alerts as alert_store
from store import evals
from store.db import Database

METRICS = METRIC_NAMES  # a live view of the registry, in its order
MIN_PAIRS = 5


@dataclass
class Comparison:
    metric: str
    slice: str
    kind: str  # floor | drop | ok | too_few
    baseline_value: float | None
    new_value: float | None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    regression: bool = False
    message: str = ""
    worst_items: list[dict] = field(default_factory=list)


def parse_floors(text: str) -> dict[str, float]:
    floors = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name.strip() not in METRICS:
            raise InputError(
                f"floor for unknown metric {name.strip()!r}",
                fix=f"WORKBENCH_FLOORS takes metric=value pairs for {', '.join(metric_names())}",
            )
        try:
            floors[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"floor {part!r} is not metric=number", fix="e.g. faithfulness=0.70") from None
    return floors


def paired_interval(diffs: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of paired differences."""
    if np.allclose(diffs, diffs[0]):
        return float(diffs[0]), float(diffs[0])
    result = bootstrap(
        (diffs,),
        np.mean,
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def compare_metric(metric: str, slice_name: str, base: dict, new: dict, min_effect: float) -> Comparison:
    """base/new: item id -> (value, run id, tags)."""
    shared = sorted(set(base) & set(new))
    base_mean = float(np.mean([v[0] for v in base.values()])) if base else None
    new_mean = float(np.mean([v[0] for v in new.values()])) if new else None
    if len(shared) < MIN_PAIRS:
        return Comparison(
            metric,
            slice_name,
            "too_few",
            base_mean,
            new_mean,
            n=len(shared),
            message=f"{len(shared)} shared items: too few for a paired test",
        )
    diffs = np.array([new[i][0] - base[i][0] for i in shared])
    low, high = paired_interval(diffs)
    effect = min_effect * span_of(metric)
    dropped = high < -effect
    worst = sorted(
        (
            {
                "item_id": i,
                "baseline": base[i][0],
                "new": new[i][0],
                "delta": new[i][0] - base[i][0],
                "run_id": new[i][1],
                "baseline_run_id": base[i][1],
            }
            for i in shared
        ),
        key=lambda d: d["delta"],
    )[:5]
    message = (
        f"{metric} on {slice_name}: mean change {diffs.mean():+.3f} over {len(shared)} shared items, "
        f"95% interval [{low:+.3f}, {high:+.3f}]" + (f", wholly below -{effect:g}" if dropped else "")
    )
    return Comparison(
        metric,
        slice_name,
        "drop" if dropped else "ok",
        base_mean,
        new_mean,
        float(diffs.mean()),
        low,
        high,
        len(shared),
        dropped,
        message,
        worst if dropped else [],
    )


def check_floors(means: dict[str, float | None], floors: dict[str, float]) -> list[Comparison]:
    out = []
    for metric, floor in floors.items():
        value = means.get(metric)
        if value is not None and value < floor:
            out.append(
                Comparison(
                    metric,
                    "all",
                    "floor",
                    floor,
                    value,
                    value - floor,
                    regression=True,
                    message=f"{metric} is {value:.3f}, below its floor {floor:.2f}",
                )
            )
    return out


def config_diff(old: dict, new: dict) -> dict:
    return {k: [old.get(k), new.get(k)] for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def same_pin(a: evals.EvalRun, b: evals.EvalRun) -> bool:
    return (a.judge_model, a.judge_digest, a.judge_prompt_version) == (
        b.judge_model,
        b.judge_digest,
        b.judge_prompt_version,
    )


def resolve(db: Database, run_name: str, baseline_name: str | None) -> tuple[evals.EvalRun, evals.EvalRun | None]:
    run = evals.get_eval_run(db, run_name)
    if run is None:
        raise InputError(f"there is no evaluation named {run_name!r}", fix="see `python -m pipeline runs` or Evaluate")
    if baseline_name:
        baseline = evals.get_eval_run(db, baseline_name)
        if baseline is None:
            raise InputError(f"there is no evaluation named {baseline_name!r}", fix="check --baseline")
    else:
        baseline_id = alert_store.pinned_baseline(db, run.dataset)
        if baseline_id == run.id:
            baseline_id = None
        baseline_id = baseline_id or alert_store.previous_run(db, run.id)
        baseline = evals.get_eval_run_by_id(db, baseline_id) if baseline_id else None
    if baseline is not None and not same_pin(run, baseline):
        raise InputError(
            f"{run.name!r} and {baseline.name!r} were judged under different judge pins "
            f"({run.judge_model}/{run.judge_prompt_version} vs "
            f"{baseline.judge_model}/{baseline.judge_prompt_version}); their scores are not comparable",
            fix="compare runs judged by the same judge model, digest and prompt version",
        )
    return run, baseline


def compare(db: Database, settings: Settings, run: evals.EvalRun, baseline: evals.EvalRun | None) -> list[Comparison]:
    means = {row["metric"]: row["mean"] for row in evals.metric_summary(db, run.id)}
    results = check_floors(means, parse_floors(settings.floors))
    if baseline is None:
        return results
    for metric in metric_names():
        base, new = alert_store.item_scores(db, baseline.id, metric), alert_store.item_scores(db, run.id, metric)
        if not base and not new:
            continue
        results.append(compare_metric(metric, "all", base, new, settings.min_effect))
        tags = sorted({t for v in new.values() for t in v[2]})
        for tag in tags:
            sliced = [{k: v for k, v in d.items() if tag in v[2]} for d in (base, new)]
            comparison = compare_metric(metric, tag, sliced[0], sliced[1], settings.min_effect)
            if comparison.regression:
                results.append(comparison)
    return results


def component_of(metric: str, diagnosed: str) -> str:
    """The component a metric speaks for; for the judge's criteria, the one the diagnostic grid names."""
    registered = get_metric(metric)
    return registered.component if registered and registered.component != "judge" else diagnosed


def check(db: Database, settings: Settings, run_name: str, baseline_name: str | None = None) -> tuple:
    """Compare, store the regressions as alerts, and return (run, baseline, comparisons)."""
    run, baseline = resolve(db, run_name, baseline_name)
    comparisons = compare(db, settings, run, baseline)
    means = {row["metric"]: row["mean"] for row in evals.metric_summary(db, run.id)}
    grid = diagnose(means, settings.diagnosis_low, settings.diagnosis_high)
    diff = config_diff(baseline.config, run.config) if baseline else {}
    alerts = [
        {
            "kind": c.kind,
            "metric": c.metric,
            "slice": c.slice,
            "baseline_value": c.baseline_value,
            "new_value": c.new_value,
            "delta": c.delta,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
            "n": c.n,
            "component": component_of(c.metric, grid.component),
            "message": c.message,
            "config_diff": diff,
            "worst_items": c.worst_items,
        }
        for c in comparisons
        if c.regression
    ]
    alert_store.replace_open_alerts(db, run.id, baseline.id if baseline else None, alerts)
    return run, baseline, comparisons
