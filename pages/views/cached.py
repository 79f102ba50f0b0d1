"""Results a page computes, kept in memory by what they depend on, so that a visit shows them without computing them
again (issue 29): a finished evaluation's report, a comparison of two finished evaluations and the Calibration
page's charts. Shared by every session of the server; a result is never mutated by the page that shows it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views import charts
from pipeline.evaluation.compare_runs import RunComparison, compare_runs
from pipeline.evaluation.runner import EvalReport, report, report_key

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


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def _report(_settings, _db, name: str, key: tuple) -> EvalReport:
    return report(_settings, _db, name)


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def _comparison(_settings, _db, a: str, b: str, key: tuple) -> RunComparison:
    return compare_runs(_settings, _db, a, b)


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def agreement_heatmap(matrix: tuple[tuple[int, ...], ...], criterion: str):
    """The judge x human grid of one criterion's pairs, as a Vega-Lite spec (Altair validates a chart against the
    schema each time it is converted: ~12 ms a chart, on every render; the spec is validated once)."""
    scores = [str(s) for s in range(1, 6)]
    return charts.heatmap(matrix, scores, scores, "human score", "judge score", f"{criterion}: judge x human").to_dict()


@st.cache_resource(max_entries=KEPT, show_spinner=False)
def base_rates_chart(judge: tuple[float, ...], people: tuple[float, ...]):
    """Each score's share among the judge's scores and people's ratings, side by side (a Vega-Lite spec)."""
    frame = pd.DataFrame(
        {
            "score": [str(s) for s in range(1, 6)] * 2,
            "share": list(judge) + list(people),
            "rater": ["judge"] * 5 + ["people"] * 5,
        }
    )
    return charts.grouped_bars(frame, "score", "share", "rater", "Base rates").to_dict()
