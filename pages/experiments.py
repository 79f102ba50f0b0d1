"""Sweeps (`python -m pipeline sweep`): start one from a form (it runs in the background, a progress bar across its
combinations), then a sweep's leaderboard (each metric's mean with its 95% interval, calls, tokens, latency), the best
combination per metric, the paired tests of each combination against a chosen reference (Holm), and quality against
latency with the Pareto front; each combination opens in Compare against the reference. The widgets are in
pages/views/experiments.py."""

import streamlit as st

from pages.views.cached import sweep_leaderboard
from pages.views.common import page_setup, show_error
from pages.views.experiments import (
    best_table,
    choose_view,
    empty_state,
    leaderboard_table,
    live_sweeps,
    pick_sweep,
    quality_chart,
    show_summary,
    sweep_form,
    tests_table,
)
from pipeline.errors import WorkbenchError
from pipeline.experiments import list_sweeps

settings, db = page_setup(__file__)

sweep_form(settings, db, expanded=not list_sweeps(db))
with st.container():  # the fragment's own block (see pages/evaluate.py)
    live_sweeps()
rows = list_sweeps(db)  # with a sweep the form has just started
if not rows:
    empty_state()
    st.stop()
name = pick_sweep(rows)
try:
    reference, quality = choose_view(settings, db, name)
    board = sweep_leaderboard(settings, db, name, reference, quality)
except WorkbenchError as exc:
    show_error(exc)
    st.stop()
show_summary(board)
leaderboard_table(board)
best_table(board)
tests_table(board)
quality_chart(board)
