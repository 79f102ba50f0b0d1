"""Widgets of the Annotate page: which runs to rate, the rating form, the judge's scores after saving.

Nothing on the form anchors the rater: each score's rubric text (the judge's own) sits under its radio button,
the verifier's verdicts can stay hidden until the rating is saved, and the judge's scores appear only after.
Keys: 1-5 score the first criterion not yet scored, N saves and moves on, S skips (Streamlit's own button
shortcuts, which ignore keys typed into a text box).
"""

from __future__ import annotations

import streamlit as st

from pages.views.common import show_error
from pages.views.markup import annotated_markdown, escape_markdown
from pipeline.answering.events import AnswerResult
from pipeline.calibration.annotations import CRITERIA, VERDICTS, criterion_rubric, save_rating
from pipeline.errors import WorkbenchError
from pipeline.history.evaluations import list_eval_runs, run_ids_of
from pipeline.history.runs import recent_chat_run_ids, scores_for_run

CHAT = "Recent chat runs"
SCORES = [1, 2, 3, 4, 5]
SAVE_KEY, SKIP_KEY = "n", "s"


def source_runs(db) -> list[int]:
    evals = {r["name"]: r["id"] for r in list_eval_runs(db)}
    choice = st.selectbox("Rate the answers of", list(evals) + [CHAT], key="annotate_source")
    return recent_chat_run_ids(db) if choice == CHAT else run_ids_of(db, evals[choice])


def hide_verdicts() -> bool:
    return st.toggle(
        "Hide the verifier's verdicts until I save",
        value=True,
        key="hide_verdicts",
        help="The answer is shown without its claim colours and the claim verdicts start empty, so the "
        "verifier cannot anchor your rating; they appear once the rating is saved.",
    )


def show_answer(result: AnswerResult, hidden: bool) -> None:
    st.markdown("**Answer**")
    if hidden:
        st.markdown(escape_markdown(result.answer or ""))
    else:
        st.markdown(annotated_markdown(result.answer or "", result.final_claims))


def radio_key(criterion: str, run_id: int) -> str:
    return f"{criterion}-{run_id}"


def score_next(run_id: int, value: int) -> None:
    """A 1-5 key or button: score the first criterion that has no score yet (runs before the page is drawn)."""
    for criterion in CRITERIA:
        if st.session_state.get(radio_key(criterion, run_id)) is None:
            st.session_state[radio_key(criterion, run_id)] = value
            return


def score_keys(run_id: int) -> None:
    todo = [c for c in CRITERIA if st.session_state.get(radio_key(c, run_id)) is None]
    st.caption(
        f"Keys: 1–5 score {'**' + todo[0] + '**' if todo else 'the next criterion'} "
        f"(then the next one), {SAVE_KEY.upper()} saves and moves on, {SKIP_KEY.upper()} skips."
    )
    for column, value in zip(st.columns(len(SCORES) + 4)[: len(SCORES)], SCORES, strict=True):
        column.button(str(value), key=f"key-{value}", shortcut=str(value), on_click=score_next, args=(run_id, value))


def score_radios(run_id: int) -> dict[str, int | None]:
    scores = {}
    for criterion in CRITERIA:
        description, anchors = criterion_rubric(criterion)
        scores[criterion] = st.radio(
            criterion.capitalize(),
            SCORES,
            index=None,
            horizontal=True,
            key=radio_key(criterion, run_id),
            captions=[escape_markdown(anchors[score]) for score in SCORES],
            help=description,
        )
    return scores


def claim_verdicts(result: AnswerResult, hidden: bool) -> dict[tuple[int, int], str]:
    """The person's verdict of each claim; while the verifier's are hidden they start empty and only the claims
    given a verdict are saved."""
    verdicts = {}
    for claim in result.final_claims:  # keyed by the toggle too: showing the verifier starts from its verdicts
        shown = None if hidden else (VERDICTS.index(claim.verdict) if claim.verdict in VERDICTS else 0)
        verdicts[(result.final_attempt, claim.claim_no)] = st.selectbox(
            f"Claim {claim.claim_no}: {escape_markdown(claim.text)}",
            VERDICTS,
            index=shown,
            placeholder="your verdict (optional)",
            key=f"claim-{result.run_id}-{claim.claim_no}-{'hidden' if hidden else 'shown'}",
        )
    return {key: verdict for key, verdict in verdicts.items() if verdict is not None}


def rating_form(db, annotator: str, result: AnswerResult, hidden: bool) -> None:
    """The rating's widgets (no st.form: a form keeps its last error on screen until the next submit)."""
    score_keys(result.run_id)
    scores = score_radios(result.run_id)
    verdicts = claim_verdicts(result, hidden)
    comment = st.text_area("Comment (optional)", key=f"comment-{result.run_id}")
    left, right = st.columns(2)
    save = left.button("Save rating", type="primary", shortcut=SAVE_KEY)
    skip = right.button("Skip", shortcut=SKIP_KEY)
    if skip:
        st.session_state["skipped"].add(result.run_id)
        st.query_params.pop("run_id", None)
        st.rerun()
    if save:
        missing = [c for c, v in scores.items() if v is None]
        if missing:
            st.error(f"Give a score for {', '.join(missing)} before saving.", icon=":material/error:")
            return
        try:
            save_rating(db, result.run_id, annotator, scores, comment, verdicts)
        except WorkbenchError as exc:
            show_error(exc)
            return
        st.session_state["just_rated"] = (result.run_id, scores)
        st.query_params.pop("run_id", None)
        st.rerun()


def judge_reveal(db, load_result) -> None:
    """After a rating is saved: the judge's scores for that run next to the person's, and the verifier's
    verdicts on its answer."""
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
    st.success(f"Saved run {run_id}. " + "; ".join(lines), icon=":material/check_circle:")
    result = load_result(run_id)
    if result is not None and result.final_claims:
        with st.expander(f"The verifier's verdicts on run {run_id}"):
            st.markdown(annotated_markdown(result.answer or "", result.final_claims))
