"""Experiments (`python -m pipeline sweep`): one evaluation per combination of a grid of settings, ranked honestly.

grid.py reads `--grid SETTING=VALUES` into typed values and combinations; sweep.py runs a sweep (resumable as a
whole, one progress view across combinations); indexes.py builds and reuses the separate indexes of combinations that
chunk or embed differently from the knowledge base, which a sweep never changes; leaderboard.py ranks the
combinations: means with t intervals, cost and latency, the best per metric, paired tests against a reference with
Holm's correction, and the Pareto front of quality against latency.

A page calls: run_sweep (with on_progress and a cancel event), list_sweeps, get_sweep, leaderboard and
leaderboard_json, sweepable_settings (the names a grid may vary), parse_grid (to check a grid before running it).
"""

from pipeline.experiments.grid import INDEX_SETTINGS, combinations, parse_grid, sweepable_settings
from pipeline.experiments.leaderboard import (
    Leaderboard,
    PairedTest,
    Row,
    leaderboard,
    leaderboard_json,
    mean_interval,
    pareto_front,
)
from pipeline.experiments.sweep import SweepOutcome, SweepProgress, get_sweep, list_sweeps, open_sweep, run_sweep

__all__ = [
    "INDEX_SETTINGS",
    "Leaderboard",
    "PairedTest",
    "Row",
    "SweepOutcome",
    "SweepProgress",
    "combinations",
    "get_sweep",
    "leaderboard",
    "leaderboard_json",
    "list_sweeps",
    "mean_interval",
    "open_sweep",
    "pareto_front",
    "parse_grid",
    "run_sweep",
    "sweepable_settings",
]
