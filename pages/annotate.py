"""Rate answers one at a time, on the judge's rubric; the judge's scores (and, by default, the verifier's
verdicts) appear only after the rating is saved. The rating form is a fragment (pages/views/annotate.py): a key
press reruns the form, not this page."""

import streamlit as st

from pages.views.annotate import (
    cached_result,
    hide_verdicts,
    judge_reveal,
    rated,
    rating_form,
    show_run,
    source_runs,
)
from pages.views.common import page_setup

settings, db = page_setup(__file__)

name_column, source_column, hide_column = st.columns(3, vertical_alignment="bottom")
annotator = name_column.text_input("Your name (ratings are saved under it)", key="annotator").strip()
with source_column:
    run_ids = source_runs(db)
with hide_column:
    hidden = hide_verdicts()
if not run_ids:
    st.info("Nothing to rate yet: run an evaluation or ask questions on the Chat page first.")
    st.stop()
if not annotator:
    st.info("Enter your name to start rating.")
    st.stop()

done = rated(db, annotator, run_ids)
st.progress(len(done) / len(run_ids), text=f"{len(done)} rated of {len(run_ids)}")
judge_reveal(db, lambda run_id: cached_result(db, run_id))

skipped = st.session_state.setdefault("skipped", set())
asked = st.query_params.get("run_id", "")
todo = [r for r in run_ids if r not in done and r not in skipped]
result = cached_result(db, int(asked)) if asked.isdigit() else None
if result is None and todo:
    result = cached_result(db, todo[0])
if result is None:
    st.success("Every answer here is rated (or skipped). Skipped ones come back when you clear the skips.")
    if skipped and st.button("Clear skips"):
        skipped.clear()
        st.rerun()
    st.stop()

st.subheader(f"Run {result.run_id}" + (" (rated by you before: saving updates it)" if result.run_id in done else ""))
show_run(result, hidden, db)
rating_form(db, annotator, result, hidden)
