"""Sweeps (`python -m pipeline sweep`): run one from a form (a progress bar across its combinations), then a sweep's
leaderboard (each metric's mean with its 95% interval, calls, tokens, latency), the best combination per metric, the
paired tests of each combination against a chosen reference (Holm), and quality against latency with the Pareto front;
each combination opens in Compare against the reference. The widgets are in pages/views/experiments.py."""

import streamlit as st

from pages.views.common import page_setup, show_error
from pages.views.experiments import (
    best_table,
    choose_view,
    empty_state,
    leaderboard_table,
    pick_sweep,
    quality_chart,
    show_summary,
    sweep_form,
    tests_table,
)
from pipeline.errors import WorkbenchError
from pipeline.experiments import leaderboard, list_sweeps

settings, db = page_setup("Experiments")
st.title("Experiments")

rows = list_sweeps(db)
ran = sweep_form(settings, db, expanded=not rows)
if ran is not None:
    rows = list_sweeps(db)  # with the sweep it has just run
if not rows:
    empty_state()
    st.stop()
name = pick_sweep(rows, ran)
try:
    reference, quality = choose_view(settings, db, name)
    board = leaderboard(settings, db, name, reference, quality)
except WorkbenchError as exc:
    show_error(exc)
    st.stop()
show_summary(board)
leaderboard_table(board)
best_table(board)
tests_table(board)
quality_chart(board)
