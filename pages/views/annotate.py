"""Widgets of the Annotate page: which runs to rate, the rating form, the judge's scores after saving."""

from __future__ import annotations

import streamlit as st

from pages.views.common import show_error
from pages.views.markup import escape_markdown
from pipeline.answering.events import AnswerResult
from pipeline.calibration.annotations import CRITERIA, VERDICTS, save_rating
from pipeline.errors import WorkbenchError
from pipeline.history.evaluations import list_eval_runs, run_ids_of
from pipeline.history.runs import recent_chat_run_ids, scores_for_run

CHAT = "Recent chat runs"


def source_runs(db) -> list[int]:
    evals = {r["name"]: r["id"] for r in list_eval_runs(db)}
    choice = st.selectbox("Rate the answers of", list(evals) + [CHAT], key="annotate_source")
    return recent_chat_run_ids(db) if choice == CHAT else run_ids_of(db, evals[choice])


def rating_form(db, annotator: str, result: AnswerResult) -> None:
    with st.form(f"rate-{result.run_id}", clear_on_submit=True):
        scores = {
            c: st.radio(c.capitalize(), [1, 2, 3, 4, 5], index=None, horizontal=True, key=f"{c}-{result.run_id}")
            for c in CRITERIA
        }
        verdicts = {}
        for claim in result.final_claims:
            verdicts[(result.final_attempt, claim.claim_no)] = st.selectbox(
                f"Claim {claim.claim_no}: {escape_markdown(claim.text)}",
                VERDICTS,
                index=VERDICTS.index(claim.verdict) if claim.verdict in VERDICTS else 0,
                key=f"claim-{result.run_id}-{claim.claim_no}",
            )
        comment = st.text_area("Comment (optional)", key=f"comment-{result.run_id}")
        left, right = st.columns(2)
        save = left.form_submit_button("Save rating", type="primary")
        skip = right.form_submit_button("Skip")
    if skip:
        st.session_state["skipped"].add(result.run_id)
        st.query_params.pop("run_id", None)
        st.rerun()
    if save:
        missing = [c for c, v in scores.items() if v is None]
        if missing:
            st.error(f"Give a score for {', '.join(missing)} before saving.")
            return
        try:
            save_rating(db, result.run_id, annotator, scores, comment, verdicts)
        except WorkbenchError as exc:
            show_error(exc)
            return
        st.session_state["just_rated"] = (result.run_id, scores)
        st.query_params.pop("run_id", None)
        st.rerun()


def judge_reveal(db) -> None:
    """After a rating is saved: the judge's scores for that run, next to the person's."""
    rated = st.session_state.pop("just_rated", None)
    if not rated:
        return
    run_id, human = rated
    judge = {
        s["metric"].removeprefix("judge_"): s for s in scores_for_run(db, run_id) if s["metric"].startswith("judge_")
    }
    lines = []
    for criterion in CRITERIA:
        score = judge.get(criterion)
        shown = "no judge score" if not score or score["value"] is None else f"judge {score['value']:.0f}"
        lines.append(f"{criterion}: you {human[criterion]}, {shown}")
    st.success(f"Saved run {run_id}. " + "; ".join(lines))
