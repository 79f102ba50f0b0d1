"""Regression alerts, baseline pins and the metric series over evaluation runs, as the screen reads them.

Alerts are written by pipeline.evaluation.regression; these are the typed reads and the two user actions. An alert of
kind FLOOR is a metric below its floor ("below floor"), counted and shown apart from the regressions."""

from __future__ import annotations

from store.alerts import (
    FLOOR,
    below_floor_metrics,
    count_below_floor,
    count_open_alerts,
    list_alerts,
    metric_series,
    pin_baseline,
)
from store.alerts import acknowledge as _acknowledge
from store.baselines import clean_runs
from store.baselines import pinned as pinned_baseline
from store.db import Database

__all__ = [
    "FLOOR",
    "acknowledge",
    "below_floor_metrics",
    "clean_runs",
    "count_below_floor",
    "count_open_alerts",
    "list_alerts",
    "metric_series",
    "pin_baseline",
    "pinned_baseline",
]


def acknowledge(db: Database, alert_id: int, comment: str) -> bool:
    """Mark an open alert acknowledged with the comment; False when it was not open."""
    return _acknowledge(db, alert_id, comment.strip())
