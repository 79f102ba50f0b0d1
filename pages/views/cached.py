"""Results a page computes, kept in memory by what they depend on, so that a visit shows them without computing them
again (issue 29): a finished evaluation's report, a comparison of two finished evaluations and the leaderboard of a
sweep that is not running (Calibration keeps its charts the same way, in pages/views/calibration.py). Shared by
every session of the server; a result is never mutated by the page that shows it."""

from __future__ import annotations

import streamlit as st

from pipeline.evaluation.compare_runs import RunComparison, compare_runs
from pipeline.evaluation.runner import EvalReport, report, report_key
from pipeline.experiments.leaderboard import Leaderboard, leaderboard, leaderboard_key

KEPT = 32  # results of each kind; an entry is small next to the store's own caches


def evaluation_report(settings, db, name: str) -> EvalReport:
    """runner.report, kept while the evaluation, its baseline and the settings stay as they are; computed each
    time while the evaluation runs."""
    key = report_key(db, name)
    if key is None:
        return report(settings, db, name)
    return _report(settings, db, name, (db.path, hash(settings), key))


def comparison(settings, db, a: str, b: str) -> RunComparison:
    """compare_runs, kept while both evaluations and the settings stay as they are."""
    keys = report_key(db, a), report_key(db, b)
    if None in keys:
        return compare_runs(settings, db, a, b)
    return _comparison(settings, db, a, b, (db.path, hash(settings), keys))


def sweep_leaderboard(settings, db, name: str, reference: str | None, quality: str | None) -> Leaderboard:
    """leaderboard, kept while the sweep, its evaluations and the settings stay as they are; computed each time
    while the sweep runs."""
    key = leaderboard_key(db, name)
    if key is None:
        return leaderboard(settings, db, name, reference, quality)
    return _leaderboard(settings, db, name, reference, quality, (db.path, hash(settings), key))


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def _leaderboard(_settings, _db, name: str, reference, quality, key: tuple) -> Leaderboard:
    return leaderboard(_settings, _db, name, reference, quality)


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def _report(_settings, _db, name: str, key: tuple) -> EvalReport:
    return report(_settings, _db, name)


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def _comparison(_settings, _db, a: str, b: str, key: tuple) -> RunComparison:
    return compare_runs(_settings, _db, a, b)
