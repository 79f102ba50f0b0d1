"""Rate answers one at a time, on the judge's rubric; the judge's scores (and, by default, the verifier's
verdicts) appear only after the rating is saved."""

import streamlit as st

from pages.views.annotate import hide_verdicts, judge_reveal, rating_form, show_answer, source_runs
from pages.views.common import page_setup
from pages.views.markup import escape_markdown
from pipeline.calibration.annotations import rated_by
from pipeline.history.runs import load_result, load_run
from pipeline.text import short_source

settings, db = page_setup("Annotate")
st.title("Annotate")

annotator = st.text_input("Your name (ratings are saved under it)", key="annotator").strip()
run_ids = source_runs(db)
if not run_ids:
    st.info("Nothing to rate yet: run an evaluation or ask questions on the Chat page first.")
    st.stop()
if not annotator:
    st.info("Enter your name to start rating.")
    st.stop()

done = rated_by(db, annotator, run_ids)
st.progress(len(done) / len(run_ids), text=f"{len(done)} rated of {len(run_ids)}")
judge_reveal(db, lambda run_id: load_result(db, run_id))
hidden = hide_verdicts()

skipped = st.session_state.setdefault("skipped", set())
asked = st.query_params.get("run_id", "")
todo = [r for r in run_ids if r not in done and r not in skipped]
stored = load_run(db, int(asked)) if asked.isdigit() else None
if stored is None and todo:
    stored = load_run(db, todo[0])
if stored is None:
    st.success("Every answer here is rated (or skipped). Skipped ones come back when you clear the skips.")
    if skipped and st.button("Clear skips"):
        skipped.clear()
        st.rerun()
    st.stop()

result = stored.result
st.subheader(f"Run {result.run_id}" + (" (rated by you before: saving updates it)" if result.run_id in done else ""))
st.markdown("**Question**")
st.text(result.question)
with st.expander(f"Retrieved context ({len(result.passages)} chunks)"):
    for p in result.passages:
        st.markdown(f"**\\[{p.n}\\] {escape_markdown(short_source(p.source))}**")
        st.markdown(escape_markdown(p.text))
show_answer(result, hidden)
rating_form(db, annotator, result, hidden)
