"""Widgets of the Annotate page: which runs to rate, the rating form, the judge's scores after saving.

Nothing on the form anchors the rater: each criterion's rubric (the judge's own anchors) is a click away in the
popover under its scores, the verifier's verdicts can stay hidden until the rating is saved, and the judge's
scores appear only after. The form is a fragment: a score, a key or a claim verdict reruns the form alone, not the
page's reads of the store (which are cached by their inputs); saving or skipping reruns the whole page, so the
count of rated answers and the next answer follow. The form fits one screen: the answer and its sources side by
side in boxes of bounded height that scroll, the five scores side by side.
Keys: 1-5 score the first criterion not yet scored, N saves and moves on, S skips (Streamlit's own button
shortcuts, which ignore keys typed into a text box).
"""

from __future__ import annotations

import streamlit as st

from pages.views.common import show_error
from pages.views.conversation import show_earlier_turns
from pages.views.markup import annotated_markdown, escape_markdown
from pipeline.answering.conversation import Turn
from pipeline.answering.events import AnswerResult
from pipeline.calibration.annotations import CRITERIA, VERDICTS, criterion_rubric, rated_by, save_rating
from pipeline.errors import WorkbenchError
from pipeline.history.conversations import earlier_turns
from pipeline.history.evaluations import list_eval_runs, run_ids_of
from pipeline.history.runs import load_result, recent_chat_run_ids, scores_for_run
from pipeline.text import short_source
from pipeline.verification.claims import scored_claims
from pipeline.vocabulary import Status

CHAT = "Recent chat runs"
SCORES = [1, 2, 3, 4, 5]
SAVE_KEY, SKIP_KEY = "n", "s"
BOX_HEIGHT = 260  # px: the answer's and the sources' boxes, each scrolling on its own
CLAIMS_HEIGHT = 180  # px: the claim verdicts' box, once there are more claims than fit in it
SAVED = "ratings_saved"  # session state: ratings saved in this session, part of the rated runs' cache key

# The store's reads, cached by their inputs (the store's path first: one process may serve several stores). Lists
# of runs for CACHE_S (a new evaluation shows within that), runs themselves longer (a finished run does not change),
# the runs a rater has rated until this session saves a rating (SAVED is in the key).
CACHE_S = 30


@st.cache_data(ttl=CACHE_S, show_spinner=False)
def _evaluations(store: str, _db) -> dict[str, int]:
    return {r["name"]: r["id"] for r in list_eval_runs(_db)}


@st.cache_data(ttl=CACHE_S, show_spinner=False)
def _runs_of(store: str, evaluation: int | None, _db) -> list[int]:
    return recent_chat_run_ids(_db) if evaluation is None else run_ids_of(_db, evaluation)


@st.cache_data(ttl=CACHE_S, show_spinner=False)
def _rated(store: str, annotator: str, run_ids: tuple[int, ...], saved: int, _db) -> set[int]:
    return rated_by(_db, annotator, list(run_ids))


@st.cache_data(ttl=600, show_spinner=False, max_entries=200)
def _result(store: str, run_id: int, _db) -> AnswerResult | None:
    return load_result(_db, run_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=200)
def _earlier(store: str, run_id: int, _db, _result) -> list[Turn]:
    return earlier_turns(_db, _result)


def source_runs(db) -> list[int]:
    evals = _evaluations(db.path, db)
    choice = st.selectbox("Rate the answers of", list(evals) + [CHAT], key="annotate_source")
    return _runs_of(db.path, None if choice == CHAT else evals[choice], db)


def rated(db, annotator: str, run_ids: list[int]) -> set[int]:
    """The runs among run_ids this annotator has rated (cached until this session saves a rating)."""
    return _rated(db.path, annotator, tuple(run_ids), st.session_state.get(SAVED, 0), db)


def cached_result(db, run_id: int) -> AnswerResult | None:
    return _result(db.path, run_id, db)


def hide_verdicts() -> bool:
    return st.toggle(
        "Hide verdicts until I save",  # short: the longer label was cut in its column at 1280 px
        value=True,
        key="hide_verdicts",
        help="The answer is shown without its claim colours and the claim verdicts start empty, so the "
        "verifier cannot anchor your rating; they appear once the rating is saved.",
    )


def show_run(result: AnswerResult, hidden: bool, db=None) -> None:
    """The earlier turns when the run is a turn of a conversation (with the store, `db`), the question, then the
    answer and its retrieved context side by side, each in a box that scrolls."""
    if db is not None and result.conversation_id:
        show_earlier_turns(_earlier(db.path, result.run_id, db, result))
    st.text(result.question)
    answer, sources = st.columns(2)
    with answer:
        st.markdown("**Answer**")
        with st.container(height=BOX_HEIGHT, key="annotate-answer"):
            if hidden:
                st.markdown(escape_markdown(result.answer or ""))
            else:
                st.markdown(annotated_markdown(result.answer or "", claims_to_rate(result)))
    with sources:
        st.markdown(f"**Retrieved context** ({len(result.passages)} chunks)")
        with st.container(height=BOX_HEIGHT, key="annotate-sources"):
            for p in result.passages:
                st.markdown(f"**\\[{p.n}\\] {escape_markdown(short_source(p.source))}**")
                st.markdown(escape_markdown(p.text))


def radio_key(criterion: str, run_id: int) -> str:
    return f"{criterion}-{run_id}"


def score_next(run_id: int, value: int) -> None:
    """A 1-5 key or button: score the first criterion that has no score yet (runs before the page is drawn)."""
    for criterion in CRITERIA:
        if st.session_state.get(radio_key(criterion, run_id)) is None:
            st.session_state[radio_key(criterion, run_id)] = value
            return


def keys_caption(run_id: int) -> None:
    todo = [c for c in CRITERIA if st.session_state.get(radio_key(c, run_id)) is None]
    st.caption(
        f"Keys: 1–5 score {'**' + todo[0] + '**' if todo else 'the next criterion'} "
        f"(then the next one), {SAVE_KEY.upper()} saves and moves on, {SKIP_KEY.upper()} skips."
    )


def score_buttons(run_id: int) -> None:
    """The 1-5 buttons that carry the keys (each scores the next criterion)."""
    for value in SCORES:
        st.button(str(value), key=f"key-{value}", shortcut=str(value), on_click=score_next, args=(run_id, value))


def score_radios(run_id: int) -> dict[str, int | None]:
    """The criteria side by side, each a row of 1-5 with its rubric (the judge's anchors) in a popover below."""
    scores = {}
    for column, criterion in zip(st.columns(len(CRITERIA)), CRITERIA, strict=True):
        description, anchors = criterion_rubric(criterion)
        with column:
            scores[criterion] = st.radio(
                criterion.capitalize(),
                SCORES,
                index=None,
                horizontal=True,
                key=radio_key(criterion, run_id),
                help=description,
            )
            with st.popover("Rubric", icon=":material/menu_book:", type="tertiary"):
                st.markdown(f"**{escape_markdown(criterion.capitalize())}**: {escape_markdown(description)}")
                st.markdown("  \n".join(f"**{score}** · {escape_markdown(anchors[score])}" for score in SCORES[::-1]))
    return scores


def claims_to_rate(result: AnswerResult) -> list:
    """The claims the rater is asked about: those of the answer shown, and only the answer's own. An abstention
    shows its abstention, not the withheld attempt whose claims these are; an extraction error is the extractor's
    mistake, not a claim of the answer."""
    if result.status == Status.ABSTAINED:
        return []
    return scored_claims(result.final_claims)


def claim_verdicts(result: AnswerResult, hidden: bool) -> dict[tuple[int, int], str]:
    """The person's verdict of each claim of the answer shown (claims_to_rate); while the verifier's are hidden
    they start empty and only the claims given a verdict are saved."""
    verdicts = {}
    claims = claims_to_rate(result)
    if not claims:
        return {}
    box = st.container(height=CLAIMS_HEIGHT if len(claims) > 4 else "content", border=len(claims) > 4)
    columns = box.columns(2)
    for n, claim in enumerate(claims):  # keyed by the toggle too: showing the verifier starts from its verdicts
        shown = None if hidden else (VERDICTS.index(claim.verdict) if claim.verdict in VERDICTS else 0)
        verdicts[(result.final_attempt, claim.claim_no)] = columns[n % 2].selectbox(
            f"Claim {claim.claim_no}: {escape_markdown(claim.text)}",
            VERDICTS,
            index=shown,
            placeholder="your verdict (optional)",
            key=f"claim-{result.run_id}-{claim.claim_no}-{'hidden' if hidden else 'shown'}",
        )
    return {key: verdict for key, verdict in verdicts.items() if verdict is not None}


@st.fragment
def rating_form(db, annotator: str, result: AnswerResult, hidden: bool) -> None:
    """The rating's widgets, a fragment: a score, key or verdict reruns only this. Saving or skipping reruns the
    whole page (the count of rated answers and the next answer are outside). No st.form: a form keeps its last
    error on screen until the next submit."""
    keys_caption(result.run_id)
    scores = score_radios(result.run_id)
    verdicts = claim_verdicts(result, hidden)
    comment = st.text_area("Comment (optional)", key=f"comment-{result.run_id}", height=68)
    with st.container(horizontal=True, vertical_alignment="center"):
        score_buttons(result.run_id)
        save = st.button("Save rating", type="primary", shortcut=SAVE_KEY)
        skip = st.button("Skip", shortcut=SKIP_KEY)
    if skip:
        st.session_state["skipped"].add(result.run_id)
        st.query_params.pop("run_id", None)
        st.rerun(scope="app")
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
        st.session_state[SAVED] = st.session_state.get(SAVED, 0) + 1  # the rated runs are read again
        st.session_state["just_rated"] = (result.run_id, scores)
        st.query_params.pop("run_id", None)
        st.rerun(scope="app")  # the page, not only the form: its count and the next answer


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
