"""One stored run: the answer with its claims, the sources, the attempts, scores and LLM calls."""
import pandas as pd
import streamlit as st

from pages.answer_view import show_answer
from pages.common import resources
from pipeline.stored_runs import load_result
from store.evals import scores_for_run
from store.llm_log import calls_for_run

settings, db = resources()
st.title("Run")

raw = st.query_params.get("run_id", "")
run_id = st.number_input("Run id", min_value=1, step=1, value=int(raw) if raw.isdigit() else None)
if run_id is None:
    st.info("Enter a run id, or open a run from the Evaluate page.")
    st.stop()
st.query_params["run_id"] = str(run_id)
result = load_result(db, int(run_id))
if result is None:
    st.error(f"There is no run {run_id}. It may have been deleted, or the id is mistyped.")
    st.stop()

st.subheader("Question")
st.text(result.question)
show_answer(result)
scores = scores_for_run(db, int(run_id))
if scores:
    st.subheader("Scores")
    st.dataframe(pd.DataFrame(scores), hide_index=True, width="stretch")
calls = calls_for_run(db, int(run_id))
if calls:
    with st.expander(f"LLM calls ({len(calls)})"):
        st.dataframe(pd.DataFrame(calls)[["stage", "model", "prompt_tokens", "completion_tokens", "latency_ms",
                                          "cache_hit", "error"]], hide_index=True, width="stretch")
