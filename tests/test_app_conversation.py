"""AppTests of conversations: the Chat page reads a follow-up with the conversation so far and starts afresh on New
conversation; the Runs page shows a conversation's turns in order; the drilldown links a turn to the turns either
side and says earlier turns are not evidence; Annotate shows the earlier turns as context."""

from __future__ import annotations

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_app import app, fresh_streamlit_caches, markdown_text  # noqa: F401 (autouse: fresh caches per test)

from pages.views.markup import escape_markdown
from pipeline.answering.conversation import NOT_EVIDENCE, Turn
from pipeline.answering.engine import VerifiedQueryEngine, final_result

FIRST = "Who introduced the Transformer?"
FOLLOW_UP = "When was it published?"
STANDALONE = "When was the Transformer published?"


def two_turns(settings, db, conversation_id="talk"):
    engine = VerifiedQueryEngine(settings=settings, db=db)
    first = final_result(engine.stream(FIRST, conversation_id=conversation_id))
    second = final_result(engine.stream(FOLLOW_UP, history=[Turn.from_result(first)], conversation_id=conversation_id))
    return first, second


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def texts(at) -> str:
    return "\n".join(t.value for t in at.text)


@pytest.mark.slow
def test_chat_reads_a_follow_up_with_the_conversation_until_a_new_one_is_started(kb_db):
    at = app()
    assert not [b for b in at.button if b.label == "New conversation"]  # nothing to start afresh from yet
    at.chat_input[0].set_value(FIRST).run()
    at.chat_input[0].set_value(FOLLOW_UP).run()
    assert not at.exception, at.exception
    conversation_id = at.session_state["conversation_id"]
    first, second = (turn["result"] for turn in at.session_state["conversation"])
    assert (first.status, second.status) == ("accepted", "accepted")
    assert (second.standalone_question, second.turn_no) == (STANDALONE, 2)
    assert first.conversation_id == second.conversation_id == conversation_id
    assert escape_markdown(f"retrieved for '{STANDALONE}'") in captions(at)
    assert len(at.chat_message) == 4

    next(b for b in at.button if b.label == "New conversation").click().run()
    assert at.session_state["conversation"] == [] and at.session_state["conversation_id"] != conversation_id
    at.chat_input[0].set_value(FOLLOW_UP).run()
    (fresh,) = (turn["result"] for turn in at.session_state["conversation"])
    assert (fresh.standalone_question, fresh.turn_no) == (FOLLOW_UP, 1)  # nothing earlier to read it with
    assert fresh.conversation_id == at.session_state["conversation_id"]


@pytest.mark.slow
def test_the_runs_page_shows_a_conversation_and_the_drilldown_links_its_turns(fake, settings, kb_db):
    first, second = two_turns(settings, kb_db)
    at = open_page("pages/runs.py", conversation="talk")
    assert at.title[0].value == "Conversation"
    turns = at.dataframe[0].value
    assert list(turns["turn"]) == [1, 2] and list(turns["status"]) == ["accepted", "accepted"]
    assert list(turns["retrieved for"]) == [FIRST, STANDALONE]
    assert f"Q: {FIRST}" in texts(at) and f"Q: {FOLLOW_UP}" in texts(at)

    at = open_page("pages/runs.py", run_id=str(second.run_id))
    text = markdown_text(at)
    assert f"(/runs?run_id={first.run_id})" in text and "previous turn" in text and "next turn" not in text
    assert "(/runs?conversation=talk)" in text and "turn **2** (2 of 2 stored)" in text
    assert "conversation **talk**" in text  # the run's columns in the header
    assert escape_markdown(NOT_EVIDENCE) in captions(at)
    assert STANDALONE in texts(at) and "rewritten by the model" in captions(at)

    at = open_page("pages/runs.py", run_id=str(first.run_id))
    text = markdown_text(at)
    assert f"(/runs?run_id={second.run_id})" in text and "next turn" in text and "previous turn" not in text
    assert escape_markdown(NOT_EVIDENCE) not in captions(at)  # the first turn has no earlier one


@pytest.mark.slow
def test_a_single_question_has_no_conversation_in_its_drilldown(fake, settings, kb_db):
    run = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(FIRST))
    at = open_page("pages/runs.py", run_id=str(run.run_id))
    text = markdown_text(at)
    assert "Conversation" not in text and "conversation" not in at.markdown[0].value and "turn **" not in text


@pytest.mark.slow
def test_the_runs_page_opens_a_conversation_from_its_list(fake, settings, kb_db):
    two_turns(settings, kb_db, "<b>notes</b>")
    at = open_page("pages/runs.py")
    assert at.selectbox(key="runs_conversation").value == "<b>notes</b>"
    next(b for b in at.button if b.label == "Open conversation").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Conversation" and "<b>notes</b>" in texts(at)
    assert list(at.dataframe[0].value["turn"]) == [1, 2]
    at = open_page("pages/runs.py", conversation="nobody")
    assert "There is no conversation" in at.error[0].value


@pytest.mark.slow
def test_annotate_shows_the_earlier_turns_of_a_conversation_as_context(fake, settings, kb_db):
    first, second = two_turns(settings, kb_db)
    at = open_page("pages/annotate.py", run_id=str(second.run_id))
    at.text_input(key="annotator").set_value("ana").run()
    assert not at.exception, at.exception
    (earlier,) = [e for e in at.expander if e.label.startswith("Earlier turns")]
    assert earlier.label == "Earlier turns of this conversation (1)"
    assert f"Q1: {FIRST}\nA1: {first.answer}" in texts(at)
    assert FOLLOW_UP in texts(at)
    at = open_page("pages/annotate.py", run_id=str(first.run_id))
    at.text_input(key="annotator").set_value("ana").run()
    assert not [e for e in at.expander if e.label.startswith("Earlier turns")]
