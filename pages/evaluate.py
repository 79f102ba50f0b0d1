"""Run a golden set through the workbench; see every metric, the diagnosis, slices and items."""

from pathlib import Path

import streamlit as st

from pages.views.common import page_setup, show_error
from pages.views.evaluation import choose_dataset, live_progress, show_report, start_form
from pipeline.errors import WorkbenchError
from pipeline.evaluation.runner import report
from pipeline.history.evaluations import list_eval_runs

settings, db = page_setup("Evaluate")
st.title("Evaluate")

with st.expander("Start an evaluation", expanded=not list_eval_runs(db)):
    dataset = choose_dataset(Path(settings.kb_path).parent / "eval")
    if dataset is not None:
        start_form(settings, db, dataset)

live_progress()

runs = list_eval_runs(db)
if not runs:
    st.info("No evaluations yet.")
    st.stop()
names = [r["name"] for r in runs]
selected = st.session_state.get("eval_selected")
name = st.selectbox("Evaluation", names, index=names.index(selected) if selected in names else 0)
try:
    show_report(report(settings, db, name))
except WorkbenchError as exc:
    show_error(exc)
