"""Regression detection: a run against its baseline, per metric and per tag slice.

- floors: a metric's mean below its floor (settings `floors`, e.g. faithfulness=0.70,context_recall=0.75; empty:
  none), a separate, explicit check outside the family below. A breach is "below floor" (kind floor, below_floor),
  never a regression: it is stored and shown apart, holds on a run without a baseline, and does not keep a run
  from being the next run's baseline;
- drops: a one-sided test per metric × slice over the items both runs scored (claim-level for faithfulness),
  tested in a pre-declared order: the primary metrics' whole-run drops first (setting primary_metrics, default
  faithfulness) with 80% of alpha, every other test at the rest, and at the full alpha once every primary is
  rejected, so that equal runs raise any drop alert in at most 5% of comparisons; a rejected test is an alert
  when its change is at least min_effect × the width of the metric's scale (1 on 0-1, 4 for 1-5 judge scores).
  Each test reports the drop it could have detected (80% power). The statistics are in
  pipeline.evaluation.family.
Only drops are regressions. Every metric the run measured is compared (pipeline.evaluation.registry). Runs under
different judge pins are never compared, nor a judge criterion's scores under different prompt versions of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation import family
from pipeline.evaluation.causes import Cause, likely_cause
from pipeline.evaluation.diagnosis import diagnose
from pipeline.evaluation.judge import recorded_version
from pipeline.evaluation.matching import in_terms_of_a, matched_items
from pipeline.evaluation.registry import METRIC_NAMES, get_metric, metric_names, named_metrics, span_of
from store import alerts as alert_store
from store import baselines, evals
from store.alerts import FLOOR
from store.db import Database

METRICS = METRIC_NAMES  # a live view of the registry, in its order
BASELINE_RULE = (
    "Each run is compared with the pinned run over its dataset; without one, with the newest earlier run over the "
    "same dataset (same content hash and size; for a golden set kept in the store, the same version), judged under "
    "the same judge pin, with no failed item and no open regression alert (a metric below its floor does not count); "
    "a sweep's combination is a baseline only when pinned. Either way the two counted claims at the same "
    "claim granularity (sentences or atomic claims)."
)
MIN_PAIRS = 5


@dataclass
class Comparison:
    metric: str
    slice: str
    kind: str  # floor | drop | ok | too_few | not_comparable (a judge criterion judged under another prompt version)
    baseline_value: float | None
    new_value: float | None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    regression: bool = False  # a drop against the baseline (never a floor breach)
    message: str = ""
    worst_items: list[dict] = field(default_factory=list)
    p_value: float | None = None  # one-sided, of a drop
    p_adjusted: float | None = None  # adjusted over the comparison's family (gatekeeping, Holm within)
    adjusted_high: float | None = None  # the change's one-sided upper bound at the test's share of alpha
    family_size: int = 0
    below_floor: bool = False  # the run's mean is below the metric's floor (kind floor): not a regression
    primary: bool = False  # a primary endpoint (setting primary_metrics), tested first
    level: float | None = None  # the share of alpha it is first tested at
    mde: float | None = None  # the drop it could have detected with 80% power (its level, its standard error)
    claim_level: bool = False  # tested on claims (the share of supported claims), not on item means

    @property
    def alert(self) -> bool:
        """Whether it is stored as an open alert: a regression, or a breach of a floor."""
        return self.regression or self.below_floor


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


def parse_primary(text: str) -> tuple[str, ...]:
    """The primary endpoints (setting primary_metrics): registered metric names, comma-separated."""
    return named_metrics(text, "primary_metrics")


def _worst(items: list[str], base: dict, new: dict) -> list[dict]:
    rows = (
        {
            "item_id": i,
            "baseline": base[i][0],
            "new": new[i][0],
            "delta": new[i][0] - base[i][0],
            "run_id": new[i][1],
            "baseline_run_id": base[i][1],
        }
        for i in items
    )
    return sorted(rows, key=lambda d: d["delta"])[:5]


def _comparison(test: family.Test, base: dict, new: dict, min_effect: float) -> Comparison:
    """A family's test as a comparison: a drop when the family rejects it and its change is at least
    min_effect × the metric's scale width."""
    items = test.items
    base_mean = float(np.mean([base[i][0] for i in items]))
    new_mean = float(np.mean([new[i][0] for i in items]))
    effect = min_effect * span_of(test.metric)
    dropped = test.rejected and test.delta is not None and test.delta <= -effect
    what = "change in the share of supported claims" if test.claim_level else "mean change"
    mde = family.detectable(test, effect)
    message = (
        f"{test.metric} on {test.slice}: {what} {test.delta:+.3f} over {test.n} shared items, "
        f"95% interval [{test.ci_low:+.3f}, {test.ci_high:+.3f}]; p = {test.p_raw:.4f}, "
        f"adjusted p = {test.p_adjusted:.4f} over {test.family_size} tests"
        + (" (primary)" if test.primary else "")
        + (f", change beyond -{effect:g}" if dropped else "")
        + (f"; the smallest drop it could detect: {mde:.3f} ({family.POWER:.0%} power)" if mde is not None else "")
    )
    return Comparison(
        test.metric,
        test.slice,
        "drop" if dropped else "ok",
        base_mean,
        new_mean,
        test.delta,
        test.ci_low,
        test.ci_high,
        test.n,
        dropped,
        message,
        _worst(items, base, new) if dropped else [],
        test.p_raw,
        test.p_adjusted,
        test.adjusted_high,
        test.family_size,
        primary=test.primary,
        level=test.level,
        mde=mde,
        claim_level=test.claim_level,
    )


def compare_family(
    base: dict[str, dict], new: dict[str, dict], min_effect: float, primary=("faithfulness",)
) -> list[Comparison]:
    """Every metric × slice of two runs' item scores (metric -> item id -> (value, run id, tags, claims)),
    tested together, the primary metrics' whole-run tests first (pipeline.evaluation.family). Overall slices
    with too few shared items are reported as too_few; tag slices below family.MIN_SLICE are not tested."""
    tests = family.family_tests(base, new, primary=primary, min_overall=MIN_PAIRS)
    tested = {t.metric for t in tests if t.slice == family.OVERALL}
    results = []
    for metric in new:
        if metric in tested or not (base.get(metric) or new[metric]):
            continue
        shared = len(set(base.get(metric, {})) & set(new[metric]))
        results.append(
            Comparison(
                metric,
                family.OVERALL,
                "too_few",
                _mean(base.get(metric, {})),
                _mean(new[metric]),
                n=shared,
                message=f"{shared} shared items: too few for a paired test",
            )
        )
    for test in tests:
        results.append(_comparison(test, base[test.metric], new[test.metric], min_effect))
    return results


def detectable(comparisons: list[Comparison]) -> list[str]:
    """What drops the comparison could have detected (80% power, each test at the share of alpha it is first
    tested at), in words: one sentence per primary endpoint, then one line for the other whole-run tests."""
    whole = [c for c in comparisons if c.slice == family.OVERALL and c.mde is not None]
    lines = [
        f"this run could have detected a {c.metric} drop of {c.mde:.3f} or more "
        f"({family.POWER:.0%} power, {c.n} items" + (", claim level" if c.claim_level else "") + ")"
        for c in whole
        if c.primary
    ]
    others = [f"{c.metric} {c.mde:.3f}" for c in whole if not c.primary]
    if others:
        share = " at their fallback share of alpha" if lines else ""
        lines.append(f"the other metrics' detectable drops ({family.POWER:.0%} power{share}): " + ", ".join(others))
    return lines


def _mean(scores: dict) -> float | None:
    return float(np.mean([v[0] for v in scores.values()])) if scores else None


def compare_metric(metric: str, slice_name: str, base: dict, new: dict, min_effect: float) -> Comparison:
    """One metric on one slice as a family of one (no correction): base/new: item id -> (value, run id, tags[,
    claims])."""
    results = compare_family({metric: base}, {metric: new}, min_effect)
    found = [c for c in results if c.slice == family.OVERALL]
    comparison = found[0]
    comparison.slice = slice_name
    comparison.message = comparison.message.replace(f"{metric} on all:", f"{metric} on {slice_name}:", 1)
    return comparison


def check_floors(means: dict[str, float | None], floors: dict[str, float]) -> list[Comparison]:
    """A breach (below_floor, kind floor) for each metric whose mean is below its floor; never a regression."""
    out = []
    for metric, floor in floors.items():
        value = means.get(metric)
        if value is not None and value < floor:
            out.append(
                Comparison(
                    metric,
                    "all",
                    FLOOR,
                    floor,
                    value,
                    value - floor,
                    below_floor=True,
                    message=f"{metric} is {value:.3f}, below its floor {floor:.2f}",
                )
            )
    return out


def config_diff(old: dict, new: dict) -> dict:
    return {k: [old.get(k), new.get(k)] for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def described_config(db: Database, run: evals.EvalRun) -> dict:
    """A run's configuration as comparisons show it: its settings (the cache setting among them) plus its
    judge pin and the dataset's content hash and size."""
    identity = baselines.dataset_identity(db, run.id) or (None, None)
    return {
        **run.config,
        "judge_pin": f"{run.judge_model}@{(run.judge_digest or '')[:12]} / {run.judge_prompt_version}",
        "dataset_hash": identity[0],
        "dataset_size": identity[1],
    }


def same_pin(a: evals.EvalRun, b: evals.EvalRun) -> bool:
    return (a.judge_model, a.judge_digest, a.judge_prompt_version) == (
        b.judge_model,
        b.judge_digest,
        b.judge_prompt_version,
    )


def baseline_of(db: Database, run: evals.EvalRun) -> int | None:
    """The one baseline rule (store.baselines): the run pinned for the dataset (over the same dataset identity: a
    run pinned over version 2 of a stored golden set is no baseline for one over version 3), else the newest earlier
    run over the same dataset hash and size, under the same judge pin, with no failed item and no open regression
    alert (floor breaches do not count). Either way at the same claim granularity: faithfulness counts other claims
    at another."""
    identity = (baselines.dataset_identity(db, run.id) or (None,))[0]
    pinned = baselines.pinned(db, run.dataset, run.pipeline, identity)
    if pinned is not None and pinned != run.id and baselines.same_granularity(db, run.id, pinned):
        return pinned
    return baselines.previous_comparable(db, run.id)


def resolve(db: Database, run_name: str, baseline_name: str | None) -> tuple[evals.EvalRun, evals.EvalRun | None]:
    run = evals.get_eval_run(db, run_name)
    if run is None:
        raise InputError(f"there is no evaluation named {run_name!r}", fix="see `python -m pipeline runs` or Evaluate")
    if baseline_name:
        baseline = evals.get_eval_run(db, baseline_name)
        if baseline is None:
            raise InputError(f"there is no evaluation named {baseline_name!r}", fix="check --baseline")
    else:
        baseline_id = baseline_of(db, run)
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
    measured = run.config.get("metrics") or metric_names()  # the metrics chosen for the run (older runs: all)
    names = [m for m in metric_names() if m in measured]
    versions = {
        m: (
            recorded_version(m, baseline.judge_prompt_version, baseline.config),
            recorded_version(m, run.judge_prompt_version, run.config),
        )
        for m in names
    }
    matched = matched_items(db, baseline.id, run.id)  # by id, else by question: another pipeline's items too
    base = {m: alert_store.item_scores(db, baseline.id, m) for m in names}
    new = {m: in_terms_of_a(alert_store.item_scores(db, run.id, m), matched) for m in names}
    differ = {m: pair for m, pair in versions.items() if pair[0] != pair[1] and base[m] and new[m]}
    for m in differ:
        del base[m], new[m]
    results += compare_family(base, new, settings.min_effect, parse_primary(settings.primary_metrics))
    results += [
        Comparison(
            m,
            family.OVERALL,
            "not_comparable",
            None,
            None,
            message=f"{m} was judged under prompt version {old} in {baseline.name} and {version} in {run.name}: "
            "its scores are not compared",
        )
        for m, (old, version) in differ.items()
    ]
    return results


def component_of(metric: str, diagnosed: str) -> str:
    """The component a metric speaks for; for the judge's criteria, the one the diagnostic grid names."""
    registered = get_metric(metric)
    return registered.component if registered and registered.component != "judge" else diagnosed


def cause_of(run: evals.EvalRun, baseline: evals.EvalRun | None, diff: dict, drops: list[Comparison]) -> Cause | None:
    """What changed since the baseline that explains the drops (causes.py); None without a baseline."""
    if baseline is None:
        return None
    moved = list(dict.fromkeys(c.metric for c in drops))
    return likely_cause(diff, moved, imported=run.pipeline is not None)


def check(db: Database, settings: Settings, run_name: str, baseline_name: str | None = None) -> tuple:
    """Compare, store the regressions and floor breaches as open alerts (each of its kind), and return (run,
    baseline, comparisons)."""
    run, baseline = resolve(db, run_name, baseline_name)
    comparisons = compare(db, settings, run, baseline)
    means = {row["metric"]: row["mean"] for row in evals.metric_summary(db, run.id)}
    abstained, items = evals.abstained_items(db, run.id)
    grid = diagnose(means, settings.diagnosis_low, settings.diagnosis_high, abstained=abstained, items=items)
    diff = config_diff(described_config(db, baseline), described_config(db, run)) if baseline else {}
    cause = cause_of(run, baseline, diff, [c for c in comparisons if c.regression])
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
            "component": cause.component if cause and c.regression else component_of(c.metric, grid.component),
            "message": c.message,
            "config_diff": diff,
            "worst_items": c.worst_items,
        }
        for c in comparisons
        if c.alert
    ]
    alert_store.replace_open_alerts(db, run.id, baseline.id if baseline else None, alerts)
    return run, baseline, comparisons
