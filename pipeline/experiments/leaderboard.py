"""A sweep's leaderboard: each combination's metrics with their intervals, its cost and latency, the best combination
per metric, each combination tested against a reference, and the Pareto front of quality against latency.

The statistics:
- a metric's mean over the items scored, with its two-sided 95% Student t interval: mean ± t(0.975, n - 1) × s / √n
  (s the sample standard deviation), clipped to the metric's scale (the true mean lies on the scale, so clipping
  keeps the coverage); none with fewer than 2 items;
- each combination against the reference combination, per metric, over the items both scored, with the test the
  regression check uses (pipeline/evaluation/family.py): a paired t-test on the per-item differences, or for
  faithfulness, where every shared item records its claim count, the claim-level test (the change in the share of
  supported claims, jackknife standard error). Here the question is "is it different?", not "did it drop?": the
  p-value is two-sided, 2 × P(T ≤ -|t|). Tested with at least MIN_PAIRS shared items, as the regression check;
- Holm's step-down correction across every test of the leaderboard (all combinations × metrics), controlling the
  family-wise error rate at ALPHA: adjusted p = max over the tests ordered before it of min(1, (m - k + 1) p_(k));
  a test is significant when its adjusted p is at most ALPHA. A significant difference smaller than min_effect ×
  the metric's scale is called negligible, as the regression check does;
- latency: the answering time of each question (its run's latency, from original costs: a question answered from
  the response cache reports the latency of the run that first computed it, pipeline/models/replay.py), p50 and p95
  over the questions (linear interpolation between order statistics); cost: the tokens of every call at its
  original cost at the prices set (price_per_1k_*), none without prices;
- the Pareto front: the combinations no other combination beats on both the quality metric (default the first
  primary metric) and p50 latency (at least as good on both, better on one). A combination answered from the cache
  that another combination filled is placed by the latencies first measured, never by the time of the replay; a
  question stored before replays kept their cost, and answered from the cache then, has no latency to count.
Each row's share of calls replayed (`replayed`) is shown beside its latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import stdtr, stdtrit

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation import family, registry, regression
from pipeline.experiments.sweep import get_sweep
from pipeline.history.views import prices
from store import alerts as alert_store
from store import evals, sweeps

ALPHA = family.ALPHA
CONFIDENCE = 0.95
MIN_PAIRS = regression.MIN_PAIRS


@dataclass
class Interval:
    mean: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0


@dataclass
class PairedTest:
    """One combination against the reference on one metric."""

    metric: str
    label: str
    reference: str
    n: int
    delta: float | None = None  # combination - reference (claim level: the change in the share of supported claims)
    ci_low: float | None = None  # raw two-sided 95% interval of delta
    ci_high: float | None = None
    p_value: float | None = None  # two-sided, unadjusted
    p_adjusted: float | None = None  # Holm, across every test of the leaderboard
    significant: bool = False
    verdict: str = "too few items"  # better | worse | negligible | no detected difference | too few items
    claim_level: bool = False


@dataclass
class Row:
    position: int
    label: str
    settings: dict
    eval_name: str
    status: str
    eval_run_id: int | None = None
    index: str | None = None  # the fingerprint of the combination's own index; None: the knowledge base
    items_done: int = 0
    items_failed: int = 0
    metrics: dict[str, Interval] = field(default_factory=dict)
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_s: float = 0.0
    cost: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    wall_s: float | None = None
    replayed: float | None = None  # the share of its calls replayed from the response cache
    tests: dict[str, PairedTest] = field(default_factory=dict)  # metric -> the test against the reference
    best_for: list[str] = field(default_factory=list)  # the metrics it is best on
    pareto: bool = False
    is_reference: bool = False


@dataclass
class Leaderboard:
    sweep: str
    dataset: str
    status: str
    reference: str
    metrics: list[str]
    quality_metric: str | None
    rows: list[Row]
    best: dict[str, str]  # metric -> label of the best combination
    pareto: list[str]  # labels on the Pareto front, fastest first
    alpha: float = ALPHA
    n_tests: int = 0


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """The mean and its two-sided Student t interval (none with fewer than 2 values; the mean itself when they are
    all equal)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return Interval(None)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, n=n)
    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1)) / np.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def clipped(interval: Interval, metric: str) -> Interval:
    """The interval cut to the metric's scale (0-1, or 1-5 for a judge criterion)."""
    if interval.low is None:
        return interval
    low, high = registry.scale_of(metric)
    return Interval(interval.mean, max(interval.low, low), min(interval.high, high), interval.n)


def two_sided(test: family.Test) -> float | None:
    """The two-sided p-value of a family test (whose p_raw is one-sided, of a drop)."""
    if test.p_raw is None:
        return None
    if test.se == 0:
        return 1.0 if test.delta == 0 else 0.0
    return float(2 * stdtr(test.n - 1, -abs(test.delta / test.se)))


def paired(metric: str, label: str, reference: str, base: dict, new: dict, min_pairs: int = MIN_PAIRS) -> PairedTest:
    """The test of one combination (`new`: item id -> (value, run id, tags, claims)) against the reference
    (`base`) on one metric, over the items both scored, unadjusted."""
    shared = sorted(set(base) & set(new))
    result = PairedTest(metric, label, reference, len(shared))
    if len(shared) < max(min_pairs, 2):
        return result
    claims = [(base[i][3], new[i][3]) for i in shared] if metric in family.CLAIM_METRICS else []
    if claims and all(cb and cn and cb > 0 and cn > 0 for cb, cn in claims):
        test = family.claim_test(
            metric,
            family.OVERALL,
            [base[i][0] for i in shared],
            [c[0] for c in claims],
            [new[i][0] for i in shared],
            [c[1] for c in claims],
        )
        result.claim_level = True
    else:
        test = family.paired_test(metric, family.OVERALL, [new[i][0] - base[i][0] for i in shared])
    result.delta, result.ci_low, result.ci_high = test.delta, test.ci_low, test.ci_high
    result.p_value = two_sided(test)
    return result


def holm(tests: list[PairedTest], alpha: float = ALPHA, min_effect: float = 0.0) -> list[PairedTest]:
    """Holm's correction across the tests that have a p-value (family.holm_adjusted with equal weights); sets
    p_adjusted, significant and the verdict of each."""
    tested = [t for t in tests if t.p_value is not None]
    adjusted = family.holm_adjusted([t.p_value for t in tested], [1.0] * len(tested)) if tested else []
    for t, p in zip(tested, adjusted, strict=True):
        t.p_adjusted = float(p)
        t.significant = t.p_adjusted <= alpha
        if not t.significant:
            t.verdict = "no detected difference"
        elif abs(t.delta) < min_effect * registry.span_of(t.metric):
            t.verdict = "negligible"
        else:
            t.verdict = "better" if (t.delta > 0) == registry.higher_is_better(t.metric) else "worse"
    return tests


def pareto_front(points: dict[str, tuple[float, float]], higher_is_better: bool = True) -> list[str]:
    """The labels no other point dominates: `points` label -> (quality, latency); a point dominates another when
    it is at least as good on both (quality higher, or lower when not higher_is_better; latency lower) and better
    on one. Fastest first."""
    sign = 1 if higher_is_better else -1
    front = []
    for label, (quality, latency) in points.items():
        dominated = any(
            sign * q >= sign * quality and lat <= latency and (sign * q > sign * quality or lat < latency)
            for other, (q, lat) in points.items()
            if other != label
        )
        if not dominated:
            front.append(label)
    return sorted(front, key=lambda label: (points[label][1], -sign * points[label][0]))


def best_per_metric(rows: list[Row], metrics: list[str]) -> dict[str, str]:
    """metric -> the label of the combination with the best mean (ties: the first in grid order)."""
    best = {}
    for metric in metrics:
        scored = [r for r in rows if metric in r.metrics and r.metrics[metric].mean is not None]
        if scored:
            sign = 1 if registry.higher_is_better(metric) else -1
            best[metric] = max(scored, key=lambda r: (sign * r.metrics[metric].mean, -r.position)).label
    return best


def quantile(values: Sequence[float], q: float) -> float | None:
    return float(np.quantile(np.asarray(values, dtype=float), q)) if len(values) else None


def _row(settings: Settings, db, combo: sweeps.CombinationRow, metrics: list[str]) -> tuple[Row, dict]:
    """A combination's row, and its per-item scores (metric -> item -> (value, run id, tags, claims))."""
    run = evals.get_eval_run(db, combo.eval_name)
    row = Row(combo.position, combo.label, combo.settings, combo.eval_name, combo.status, index=combo.index_fingerprint)
    row.wall_s = combo.wall_s
    if run is None:
        return row, {}
    row.eval_run_id = run.id
    counts = sweeps.item_counts(db, run.id)
    row.items_done, row.items_failed = counts["done"], counts["failed"]
    scores = {m: alert_store.item_scores(db, run.id, m) for m in metrics}
    row.metrics = {m: clipped(mean_interval([v[0] for v in scores[m].values()]), m) for m in metrics}
    usage = sweeps.evaluation_usage(db, run.id)
    row.calls, row.cache_hits = usage["calls"], usage["cache_hits"]
    row.replayed = row.cache_hits / row.calls if row.calls else None
    row.prompt_tokens, row.completion_tokens = usage["prompt_tokens"], usage["completion_tokens"]
    row.model_s = float(usage["model_s"])
    per_prompt, per_completion = prices(settings)
    if per_prompt or per_completion:
        row.cost = (usage["prompt_tokens"] * per_prompt + usage["completion_tokens"] * per_completion) / 1000
    latencies = sweeps.question_latencies(db, run.id)
    row.latency_p50_ms, row.latency_p95_ms = quantile(latencies, 0.5), quantile(latencies, 0.95)
    return row, scores


def default_quality_metric(settings: Settings, metrics: list[str]) -> str | None:
    """The first primary metric (setting primary_metrics) the sweep measures, else its first metric."""
    try:
        primary = regression.parse_primary(settings.primary_metrics)
    except InputError:
        primary = ()
    return next((m for m in primary if m in metrics), metrics[0] if metrics else None)


def leaderboard_key(db, name: str) -> tuple | None:
    """What a sweep's leaderboard depends on in the store: the sweep's reference and each combination's status and
    evaluation as it ended (id, status, wall time, which a resumed run adds to); None while the sweep or one of its
    evaluations runs, or when there is no such sweep (then the leaderboard is computed each time)."""
    sweep = sweeps.get_sweep(db, name)
    if sweep is None or sweep.status == sweeps.RUNNING:
        return None
    ended = []
    for combo in sweep.combinations:
        run = evals.get_eval_run_by_id(db, combo.eval_run_id) if combo.eval_run_id else None
        if run is not None and run.status == "running":
            return None
        ended.append((combo.status, run.id, run.status, run.wall_s) if run else (combo.status,))
    return sweep.id, sweep.reference, tuple(ended)


def leaderboard(
    settings: Settings, db, name: str, reference: str | None = None, quality_metric: str | None = None
) -> Leaderboard:
    """The leaderboard of the sweep `name` (finished or not: combinations not started have empty rows), tested
    against `reference` (a label or evaluation name; default the sweep's reference) on every metric it measures,
    with the Pareto front of `quality_metric` (default: default_quality_metric) against p50 latency."""
    sweep = get_sweep(db, name)
    metrics = sweep.metrics or registry.metric_names()
    labels = [c.label for c in sweep.combinations]
    wanted = (reference or sweep.reference).strip().removeprefix(f"{sweep.name}/")
    if wanted not in labels:
        raise InputError(f"{reference!r} is no combination of sweep {name!r}", fix=f"name one of {', '.join(labels)}")
    if quality_metric is not None and quality_metric not in metrics:
        raise InputError(
            f"sweep {name!r} does not measure {quality_metric!r}", fix=f"choose one of {', '.join(metrics)}"
        )
    quality = quality_metric or default_quality_metric(settings, metrics)
    built = [_row(settings, db, c, metrics) for c in sweep.combinations]
    rows = [r for r, _ in built]
    scores = {r.label: s for r, s in built}
    runs = {r.label: evals.get_eval_run_by_id(db, r.eval_run_id) if r.eval_run_id else None for r in rows}
    tests = []
    for row in rows:
        row.is_reference = row.label == wanted
        if row.is_reference or not scores[row.label] or not scores[wanted]:
            continue
        if not regression.same_pin(runs[row.label], runs[wanted]):
            continue  # judged under another judge pin: its scores are not comparable
        for metric in metrics:
            row.tests[metric] = paired(metric, row.label, wanted, scores[wanted][metric], scores[row.label][metric])
            tests.append(row.tests[metric])
    holm(tests, ALPHA, settings.min_effect)
    best = best_per_metric(rows, metrics)
    for metric, label in best.items():
        next(r for r in rows if r.label == label).best_for.append(metric)
    points = {
        r.label: (r.metrics[quality].mean, r.latency_p50_ms)
        for r in rows
        if quality in r.metrics and r.metrics[quality].mean is not None and r.latency_p50_ms is not None
    }
    front = pareto_front(points, registry.higher_is_better(quality)) if quality else []
    for row in rows:
        row.pareto = row.label in front
    return Leaderboard(
        sweep.name,
        evals.dataset_label(sweep.dataset, sweep.dataset_version),
        sweep.status,
        wanted,
        list(metrics),
        quality,
        rows,
        best,
        front,
        ALPHA,
        sum(t.p_value is not None for t in tests),
    )


def leaderboard_json(board: Leaderboard) -> list[dict]:
    """One object per combination: its settings, evaluation name, status, each metric's mean and 95% interval,
    calls, tokens, cost and latency, its tests against the reference (Holm-adjusted), the metrics it is best on and
    whether it is on the Pareto front."""
    out = []
    for r in board.rows:
        out.append(
            {
                "combination": r.label,
                "settings": r.settings,
                "evaluation": r.eval_name,
                "status": r.status,
                "reference": r.is_reference,
                "items_done": r.items_done,
                "items_failed": r.items_failed,
                "metrics": {
                    m: {"mean": i.mean, "ci_low": i.low, "ci_high": i.high, "n": i.n} for m, i in r.metrics.items()
                },
                "calls": r.calls,
                "cache_hits": r.cache_hits,
                "replayed": r.replayed,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "model_s": r.model_s,
                "cost": r.cost,
                "latency_p50_ms": r.latency_p50_ms,
                "latency_p95_ms": r.latency_p95_ms,
                "wall_s": r.wall_s,
                "index": r.index,
                "tests": {
                    m: {k: v for k, v in asdict(t).items() if k not in ("metric", "label")} for m, t in r.tests.items()
                },
                "best_for": r.best_for,
                "pareto": r.pareto,
            }
        )
    return out
