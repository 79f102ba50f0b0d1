"""Traced runs' faithfulness day by day, per service, and its alerts (issue 28).

A traced run (pipeline/collect) carries the OpenTelemetry service name of the application that answered in its
`pipeline` column. Per service and day (the day of the run's start as the store keeps it: the local time of the
machine that wrote it), the daily faithfulness is the mean of that day's traced runs that have one (verified, with
claims; a trace kept without verdicts or an answer without claims has none), with n.

The check of a complete day (by default yesterday) against the day before, per service, under the rules the
regression check of evaluations follows (pipeline.evaluation.regression, pipeline.evaluation.family):

- floors: the day's mean below the faithfulness floor (setting `floors`) is "below floor" (kind floor): never a
  regression, shown and counted apart;
- drops: one one-sided test per service, all services of the day one family of primary endpoints (one metric,
  faithfulness, the default primary; no other tests to gate): Holm's step-down with equal weights at the share
  of alpha the evaluations' family spends when it holds only primaries (family.SPENT, 90%: adjusted p = Holm's
  adjusted p / SPENT), so the family-wise error rate is at most 0.9 ALPHA; an alert (kind drop)
  when the family rejects the test AND the change is at least min_effect (setting) × the scale's width. Two days'
  runs answer different questions, so the test is not paired: Welch's unequal-variance t-test on the runs'
  faithfulness (the quantity the series draws), with at least MIN_PAIRS runs on each day, as the paired test needs
  MIN_PAIRS shared items;
- one alert of a kind per service and day, open or acknowledged: a check repeated over the same day opens nothing
  again (store.alerts.open_traced_alerts).

Where it runs: the online worker checks after every batch that stored runs and once when the day turns
(OnlineWorker.run_once), so an alert is open, and counted in every page's sidebar, without anyone opening Trends,
and the Trends page stays a reader (a read-only store or a snapshot can be browsed). The check reads two days of
traced runs: a few milliseconds beside a batch of verified answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np
from scipy.special import stdtr, stdtrit

from pipeline.config import Settings
from pipeline.evaluation.family import ALPHA, SPENT, holm_adjusted
from pipeline.evaluation.registry import get_metric, span_of
from pipeline.evaluation.regression import MIN_PAIRS, parse_floors
from pipeline.text import plural
from store import alerts as alert_store
from store.alerts import FLOOR
from store.db import Database

METRIC = "faithfulness"
SLICE = "traced runs"  # the alert's slice: every traced run of the service that day
DROP = "drop"


@dataclass
class DayCheck:
    """One service's complete day against the day before."""

    service: str
    day: date
    mean: float
    n: int
    previous_mean: float | None = None
    previous_n: int = 0
    delta: float | None = None
    ci_low: float | None = None  # two-sided 95% interval of the change (Welch)
    ci_high: float | None = None
    p_value: float | None = None  # one-sided, of a drop
    p_adjusted: float | None = None  # Holm over the day's services, at the share of alpha spent
    family_size: int = 0
    regression: bool = False  # a tested drop of at least min_effect × span (kind drop)
    below_floor: bool = False  # the day's mean below the faithfulness floor (kind floor)
    floor: float | None = None
    note: str = ""  # why there was no test (too few runs)
    worst: list[dict] = field(default_factory=list)  # the day's least faithful runs


def daily_series(db: Database, since: date | None = None) -> list[dict]:
    """Per service and day: the mean faithfulness of its traced runs and n (store.alerts.traced_daily)."""
    return alert_store.traced_daily(db, since)


def faithfulness_floor(settings: Settings) -> float | None:
    """The faithfulness floor evaluations are held to (setting `floors`), held to traced days too."""
    return parse_floors(settings.floors).get(METRIC)


def welch(base, new) -> tuple[float, float, float, float]:
    """One-sided Welch t-test of a drop (mean(new) < mean(base)) between two independent samples: (change,
    p, 95% interval low, high). Degrees of freedom by Welch-Satterthwaite."""
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    delta = float(n.mean() - b.mean())
    vb, vn = b.var(ddof=1) / len(b), n.var(ddof=1) / len(n)
    se = float(np.sqrt(vb + vn))
    if se == 0:  # both days constant: no noise to test against
        return delta, (0.0 if delta < 0 else 1.0), delta, delta
    df = (vb + vn) ** 2 / (vb**2 / (len(b) - 1) + vn**2 / (len(n) - 1))
    half = float(stdtrit(df, 0.975)) * se
    return delta, float(stdtr(df, delta / se)), delta - half, delta + half


def check_day(db: Database, settings: Settings, day: date) -> list[DayCheck]:
    """Every service with traced runs on `day`, against the day before (module docstring); nothing stored."""
    runs, before = alert_store.traced_day_runs(db, day), alert_store.traced_day_runs(db, day - timedelta(days=1))
    floor = faithfulness_floor(settings)
    effect = settings.min_effect * span_of(METRIC)
    checks = []
    for service in sorted(runs):
        values = [r[1] for r in runs[service]]
        check = DayCheck(service, day, float(np.mean(values)), len(values), floor=floor)
        check.below_floor = floor is not None and check.mean < floor
        check.worst = [
            {"run_id": run_id, "faithfulness": value, "question": question}
            for run_id, value, question in sorted(runs[service], key=lambda r: (r[1], r[0]))[:5]
        ]
        previous = [r[1] for r in before.get(service, [])]
        if previous:
            check.previous_mean, check.previous_n = float(np.mean(previous)), len(previous)
        if len(values) >= MIN_PAIRS and len(previous) >= MIN_PAIRS:
            check.delta, check.p_value, check.ci_low, check.ci_high = welch(previous, values)
        else:
            check.note = f"{len(previous)} and {len(values)} runs: at least {MIN_PAIRS} a day are needed for a test"
        checks.append(check)
    tested = [c for c in checks if c.p_value is not None]
    for c, p in zip(tested, holm_adjusted([c.p_value for c in tested], [1.0] * len(tested)), strict=True):
        c.p_adjusted, c.family_size = min(1.0, float(p) / SPENT), len(tested)
        c.regression = c.p_adjusted <= ALPHA and c.delta <= -effect
    return checks


def _message(c: DayCheck, kind: str, effect: float) -> str:
    if kind == FLOOR:
        return (
            f"{METRIC} of {c.service} on {c.day} is {c.mean:.3f} over {c.n} traced runs, below its floor {c.floor:.2f}"
        )
    return (
        f"{METRIC} of {c.service} on {c.day}: mean {c.mean:.3f} over {c.n} traced runs against {c.previous_mean:.3f} "
        f"over {c.previous_n} the day before: change {c.delta:+.3f}, 95% interval [{c.ci_low:+.3f}, "
        f"{c.ci_high:+.3f}]; Welch p = {c.p_value:.4f}, adjusted p = {c.p_adjusted:.4f} over "
        f"{plural(c.family_size, 'service')} (Holm), change beyond -{effect:g}"
    )


def alerts_of(checks: list[DayCheck], settings: Settings) -> list[dict]:
    """The alerts the checks open: a floor breach, a drop, or both, per service."""
    effect = settings.min_effect * span_of(METRIC)
    metric = get_metric(METRIC)
    component = metric.component if metric else "generator"
    out = []
    for c in checks:
        for kind, hit in ((FLOOR, c.below_floor), (DROP, c.regression)):
            if not hit:
                continue
            out.append(
                {
                    "service": c.service,
                    "service_day": c.day,
                    "kind": kind,
                    "metric": METRIC,
                    "slice": SLICE,
                    "baseline_value": c.floor if kind == FLOOR else c.previous_mean,
                    "new_value": c.mean,
                    "delta": c.mean - c.floor if kind == FLOOR else c.delta,
                    "ci_low": None if kind == FLOOR else c.ci_low,
                    "ci_high": None if kind == FLOOR else c.ci_high,
                    "n": c.n,
                    "component": component,
                    "message": _message(c, kind, effect),
                    "config_diff": {},
                    "worst_items": c.worst if kind == DROP else [],
                }
            )
    return out


def latest_complete_day(today: date | None = None) -> date:
    """The last day that has ended: yesterday, in the local time the store's run times are kept in."""
    return (today or datetime.now().date()) - timedelta(days=1)


def check_traced(db: Database, settings: Settings, today: date | None = None) -> tuple[list[DayCheck], int]:
    """Check the latest complete day of every service against the day before and open its alerts (each once);
    returns the checks and how many alerts were opened now."""
    checks = check_day(db, settings, latest_complete_day(today))
    return checks, alert_store.open_traced_alerts(db, alerts_of(checks, settings))
