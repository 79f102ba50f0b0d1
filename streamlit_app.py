"""Chat, the main page: ask a question; watch every step; see the answer with each claim checked against its
source. Questions follow on: the engine gets the conversation so far (a follow-up is rewritten into a standalone
question), and the browser session keeps one conversation (its id in session state) until New conversation. The
other pages are the scripts in pages/ (Streamlit's pages/ mode)."""

import streamlit as st

from pages.views.answer import follow_live, show_answer
from pages.views.chat_start import example_picker
from pages.views.common import page_setup, show_error, show_failed_checks, sidebar_health
from pages.views.navigation import START_PAGE
from pipeline.answering.conversation import Turn
from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.errors import InputError
from pipeline.evaluation.example_questions import example_questions
from pipeline.history.conversations import new_conversation_id
from pipeline.knowledge.documents import count_chunks

settings, db = page_setup(__file__)
show_failed_checks(sidebar_health(settings, START_PAGE, st.session_state))  # the sidebar's reading of this load
if count_chunks(db, settings.embed_model) == 0:
    st.warning(
        "The knowledge base is empty: add documents on the Knowledge base page, "
        "or run `python -m pipeline ingest data/kb`."
    )

conversation = st.session_state.setdefault("conversation", [])
conversation_id = st.session_state.setdefault("conversation_id", new_conversation_id())
if conversation and st.button(
    "New conversation",
    icon=":material/add_comment:",
    help="Start afresh: the next question is not read as a follow-up of these.",
):
    st.session_state["conversation"] = []
    st.session_state["conversation_id"] = new_conversation_id()
    st.rerun()
for turn in conversation:
    with st.chat_message("user"):
        st.text(turn["question"])
    with st.chat_message("assistant"):
        show_answer(turn["result"])

examples = st.empty()
picked = None
if not conversation:
    with examples.container():
        picked = example_picker(example_questions(db))
question = st.chat_input("Ask about the knowledge base") or picked
if question is not None:
    examples.empty()
    engine = VerifiedQueryEngine(settings=settings, db=db)
    try:
        history = [Turn.from_result(turn["result"]) for turn in conversation if turn["result"] is not None]
        events = engine.stream(
            question, history=history, conversation_id=conversation_id, turn_no=len(conversation) + 1
        )
    except InputError as exc:
        show_error(exc)
        st.stop()
    with st.chat_message("user"):
        st.text(question)
    with st.chat_message("assistant"):
        result = follow_live(events, st.status("Working…", expanded=True))
        show_answer(result)
    conversation.append({"question": question, "result": result})
