"""Widgets of conversations: a conversation's turns in order with their verdicts (the Runs page's conversation view,
?conversation=NAME), a turn's place in it with links to the turns either side and how its question was read (the
drilldown), and the earlier turns as context (Annotate). Every question and answer is shown escaped or as text."""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd
import streamlit as st

from pages.views.markup import escape_markdown, fmt_score, plural, status_markdown
from pages.views.tables import score_column, table
from pipeline.answering.conversation import NOT_EVIDENCE, Turn, stored_standalone
from pipeline.answering.status import status_label
from pipeline.history.conversations import conversation_runs, neighbours, recent_conversations

# How the standalone-question step read a turn's question (the step's `method`).
METHODS = {
    "model": "a follow-up, rewritten by the model from the earlier turns",
    "rule": "it stands alone (it refers to no earlier turn), so it was not rewritten",
    "fallback": "a follow-up whose rewrite could not be used, so the question as asked was",
    "no history": "no earlier turn was within the history budget, so the question as asked was",
}


def run_link(run_id: int, label: str) -> str:
    return f"[{escape_markdown(label)}](/runs?run_id={int(run_id)})"


def conversation_link(conversation_id: str, label: str) -> str:
    return f"[{escape_markdown(label)}](/runs?conversation={quote(conversation_id, safe='')})"


def show_conversation(db, conversation_id: str) -> bool:
    """The conversation's turns in order: a table (turn, run, verdict, faithfulness, claims) and each turn's question
    (with the standalone question it was answered as) and answer as text. False when it has no stored turn."""
    rows = conversation_runs(db, conversation_id)
    if not rows:
        return False
    st.caption(f"{plural(len(rows), 'turn')}, oldest first. Open a turn's run for its claims and evidence.")
    frame = pd.DataFrame(
        [
            {
                "turn": r["turn_no"],
                "run": f"/runs?run_id={int(r['id'])}",
                "status": r["status"],
                "faithfulness": r["faithfulness"],
                "claims supported": "n/a" if r["n_claims"] is None else f"{r['n_supported'] or 0} of {r['n_claims']}",
                "question": r["question"],
                "retrieved for": r["standalone_question"] or r["question"],
            }
            for r in rows
        ]
    )
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "run": st.column_config.LinkColumn("run", display_text=r"run_id=(\d+)", width=55),
            "faithfulness": score_column("faithfulness"),
        },
        key="conversation_turns",
    )
    for r in rows:
        link = run_link(r["id"], f"run {r['id']}")
        with st.container(border=True, key=f"turn-{r['id']}"):
            st.markdown(
                f"**Turn {r['turn_no']}** · {status_markdown(status_label(r['status']), r['status'])} · "
                f"faithfulness **{fmt_score(r['faithfulness'])}** · {link}"
            )
            st.text(f"Q: {r['question']}")
            if r["standalone_question"] and r["standalone_question"] != r["question"]:
                st.caption(escape_markdown(f"Retrieved for: {r['standalone_question']}"))
            st.text(f"A: {r['answer'] or '(no answer)'}")
    return True


def conversation_picker(db) -> str | None:
    """A box of the recent conversations; the one to open, once its button is pressed."""
    recent = recent_conversations(db)
    if not recent:
        return None
    names = {r["conversation_id"]: r for r in recent}
    with st.expander(f"Conversations ({len(recent)})", icon=":material/forum:"):
        left, right = st.columns([3, 1], vertical_alignment="bottom")
        chosen = left.selectbox(
            "Conversation",
            list(names),
            format_func=lambda c: f"{c} · {plural(names[c]['turns'], 'turn')} · {names[c]['first_question'][:60]}",
            key="runs_conversation",
        )
        if right.button("Open conversation", width="stretch"):
            return chosen
    return None


def show_turn_of_conversation(db, result, spans) -> None:
    """A run that is a turn: its conversation, its place with links to the turns either side, the question it was
    answered as and how that was decided, and the note that earlier turns are not evidence."""
    if not result.conversation_id:
        return
    place = neighbours(db, result)
    links = [conversation_link(result.conversation_id, "whole conversation")]
    if place is not None and place.previous is not None:
        links.insert(0, run_link(place.previous, "← previous turn"))
    if place is not None and place.next is not None:
        links.append(run_link(place.next, "next turn →"))
    where = f"turn **{result.turn_no}**" + (f" ({place.position} of {place.total} stored)" if place else "")
    with st.container(border=True, key=f"conversation-{result.run_id}"):
        st.markdown(
            f":material/forum: Conversation **{escape_markdown(result.conversation_id)}** · {where} · "
            + " · ".join(links)
        )
        step = stored_standalone(spans)
        standalone = result.standalone_question or result.question
        if step is not None:
            how = METHODS.get(step.get("method"), step.get("method") or "")
            why = f" ({step['why']})" if step.get("why") else ""
            st.caption(escape_markdown(f"How the question was read: {how}{why}."))
            if step.get("fallback"):
                st.caption(escape_markdown(f"Why the rewrite was not used: {step['fallback']}"))
            if step.get("history"):
                st.caption(escape_markdown(f"History read: {step['history']}."))
        if standalone != result.question:
            st.markdown("**Retrieved for** (the standalone question)")
            st.text(standalone)
        if result.turn_no and result.turn_no > 1:
            st.caption(escape_markdown(NOT_EVIDENCE))


def show_earlier_turns(turns: list[Turn]) -> None:
    """The conversation's turns before the rated one, as text: context for the rating, not rated, not evidence."""
    if not turns:
        return
    with st.expander(f"Earlier turns of this conversation ({len(turns)})", icon=":material/forum:", expanded=True):
        st.caption(
            "Context for the rated answer, as the asker saw it: these turns are not rated here and were not "
            "evidence for its claims."
        )
        with st.container(height=min(80 + 90 * len(turns), 260), key="annotate-earlier"):
            for n, turn in enumerate(turns, start=1):
                st.text(f"Q{n}: {turn.question}\nA{n}: {turn.answer or '(no answer)'}")
