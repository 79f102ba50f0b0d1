"""The on-topic check: the cheap embedding signal decides when it is sure, one model call when it is not."""

from __future__ import annotations

import dataclasses

import pytest
from test_app import fresh_streamlit_caches  # noqa: F401 - autouse: no page sees another test's cached settings

from pages.views.markup import escape_markdown
from pipeline.answering import on_topic
from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.models.llm import LLM

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
ON_TARGET = "The RAG paper's Wikipedia index held 21 million passages [1]."
OFF_TARGET = "BERT was released by Google in 2018 [2]. It has 340 million parameters [2]."
UNSURE = "The RAG model uses BART as its generator [1]."


@pytest.fixture(autouse=True)
def whole_chunks(monkeypatch):
    """The scripted answers here quote chunk text that a context budget's windows around the question would leave
    out (the generator would not have read it): the generator reads whole chunks."""
    monkeypatch.setenv("WORKBENCH_CONTEXT_BUDGET_TOKENS", "0")


def topic_requests(fake):
    formats = [((r["body"] or {}).get("format") or {}, r) for r in fake.requests]
    return [r for schema, r in formats if "addresses" in (schema.get("properties") or {})]


@pytest.fixture
def llm(settings, db):
    return LLM(settings, db)


def test_missing_terms_are_the_question_words_the_answer_never_uses():
    assert on_topic.missing_terms(QUESTION, ON_TARGET) == []
    # "many" asks for a number: an answer does not repeat it; "passages" is met by "passage" (same stem)
    assert on_topic.missing_terms(QUESTION, "One passage came from the index.") == ["wikipedia", "rag", "paper"]
    assert on_topic.missing_terms(QUESTION, OFF_TARGET) == ["passage", "wikipedia", "index", "rag", "paper"]


def test_an_on_target_answer_is_accepted_by_the_embedding_without_a_model_call(fake, settings, llm):
    topic = on_topic.check(llm, settings, QUESTION, ON_TARGET)
    assert topic.on_topic is True and topic.method == "embedding"
    assert topic.score >= settings.on_topic_accept
    assert topic.reason == f"similarity {topic.score:.2f} ≥ {settings.on_topic_accept:.2f}, the on-topic threshold"
    assert not topic_requests(fake)
    assert [c.stage for c in llm.calls] == ["embed_query", "embed_documents"]


def test_an_off_target_answer_is_rejected_by_the_embedding_and_names_what_it_misses(fake, settings, llm):
    topic = on_topic.check(llm, settings, QUESTION, OFF_TARGET)
    assert topic.on_topic is False and topic.method == "embedding"
    assert topic.score < settings.on_topic_reject
    assert topic.missing == ["passage", "wikipedia", "index", "rag", "paper"]
    assert "does not mention passage, wikipedia, index, rag, paper" in topic.reason
    assert not topic_requests(fake)


def test_the_closest_sentence_counts_so_an_answer_with_one_on_target_sentence_passes(fake, settings, llm):
    assert on_topic.check(llm, settings, QUESTION, f"{OFF_TARGET} {ON_TARGET}").on_topic is True


def test_when_the_embedding_is_unsure_one_model_call_decides_and_states_the_gap(fake, settings, llm):
    gap = "the number of passages in the Wikipedia index"
    fake.enqueue({"addresses": False, "gap": gap}, model="llama3.2")
    topic = on_topic.check(llm, settings, QUESTION, UNSURE)
    assert settings.on_topic_reject <= topic.score < settings.on_topic_accept
    assert (topic.on_topic, topic.method, topic.gap) == (False, "model", gap)
    assert topic.reason.endswith(f"the model says it does not address the question: {gap}")
    [request] = topic_requests(fake)
    assert f"Question: {QUESTION}" in request["body"]["messages"][-1]["content"]
    assert "Answer:\n" + UNSURE in request["body"]["messages"][-1]["content"]


def test_an_unsure_answer_the_model_accepts_is_on_target(fake, settings, llm):
    fake.enqueue({"addresses": True, "gap": ""}, model="llama3.2")
    topic = on_topic.check(llm, settings, QUESTION, UNSURE)
    assert (topic.on_topic, topic.method) == (True, "model")


def test_an_unreadable_model_verdict_leaves_the_check_undecided_with_its_reason(fake, settings, llm):
    fake.enqueue("not json at all", model="llama3.2", times=2)
    topic = on_topic.check(llm, settings, QUESTION, UNSURE)
    assert topic.on_topic is None and topic.method == "model"
    assert "unreadable: invalid on_topic reply after a retry" in topic.reason
    assert len(topic_requests(fake)) == 2


def test_thresholds_decide_where_the_model_is_asked(fake, settings, llm):
    never_sure = dataclasses.replace(settings, on_topic_accept=1.0, on_topic_reject=-1.0)
    fake.enqueue({"addresses": True, "gap": ""}, model="llama3.2")
    assert on_topic.check(llm, never_sure, QUESTION, ON_TARGET).method == "model"
    always_sure = dataclasses.replace(settings, on_topic_accept=0.3, on_topic_reject=0.3)
    assert on_topic.check(llm, always_sure, QUESTION, UNSURE).method == "embedding"
    assert len(topic_requests(fake)) == 1


def test_an_answer_without_a_sentence_is_undecided_not_off_target(fake, settings, llm):
    topic = on_topic.check(llm, settings, QUESTION, "21 [1]")
    assert topic.on_topic is None and topic.score is None
    assert not llm.calls


@pytest.mark.parametrize(
    "env",
    [
        {"WORKBENCH_ON_TOPIC_REJECT": "0.6", "WORKBENCH_ON_TOPIC_ACCEPT": "0.5"},
        {"WORKBENCH_ON_TOPIC_ACCEPT": "1.5"},
        {"WORKBENCH_OFF_TOPIC_FINAL": "ignore"},
    ],
)
def test_settings_out_of_range_are_refused_with_the_fix(env):
    with pytest.raises(ConfigError) as error:
        load_settings(environ=env)
    assert "WORKBENCH_" in error.value.fix


def test_an_attempts_check_is_stored_with_it_and_read_back(tmp_path):
    from datetime import datetime, timezone

    from store.db import Database
    from store.records import AttemptRecord, RunLog, RunRecord
    from store.runs import get_run, save_run

    attempt = AttemptRecord(1, False, "BERT [1].", "accepted", 1.0, 1, 1)
    attempt.on_topic, attempt.on_topic_score, attempt.on_topic_method = False, 0.07, "embedding"
    attempt.on_topic_reason, attempt.missing_terms = "similarity 0.07 < on_topic_reject 0.14", ["wikipedia", "rag"]
    run = RunRecord(kind="chat", question=QUESTION, status="off_topic", started_at=datetime.now(timezone.utc))
    db = Database(str(tmp_path / "r.duckdb"), 1, 0)
    [stored] = get_run(db, save_run(db, RunLog(run, attempts=[attempt])))["attempts"]
    assert (stored["on_topic"], stored["on_topic_score"], stored["on_topic_method"]) == (False, 0.07, "embedding")
    assert stored["on_topic_reason"] == "similarity 0.07 < on_topic_reject 0.14"
    assert stored["missing_terms"] == '["wikipedia", "rag"]'


def test_the_fakes_rule_decides_an_unsure_answer_and_names_the_gap(fake, settings, llm):
    topic = on_topic.check(llm, settings, QUESTION, UNSURE)
    assert (topic.on_topic, topic.method) == (False, "model")
    assert topic.gap == "it does not mention many, passage, wikipedia, index, paper"


def test_describe_says_the_verdict_the_step_and_why():
    from store.records import AttemptRecord

    record = AttemptRecord(1, False, OFF_TARGET, "accepted", 1.0, 2, 2)
    assert on_topic.describe(record) is None
    on_topic.keep(record, on_topic.TopicCheck(False, 0.05, "embedding", "similarity 0.05 < on_topic_reject 0.14"))
    assert on_topic.describe(record) == (
        "does not address the question — embedding check: similarity 0.05 < on_topic_reject 0.14"
    )


# -- in the engine -------------------------------------------------------------------------------------

# Faithful (it stands verbatim in rag.md) but about another model: it talks past the question.
FAITHFUL_OFF_TARGET = (
    "REALM, by Guu et al. from Google and published at ICML 2020, pre-trained a language model jointly with a "
    "latent knowledge retriever [1]."
)
# Faithful, shares two of the question's words: the embedding is unsure and the model decides.
FAITHFUL_UNSURE = (
    "The RAG paper was written by researchers from Facebook AI Research together with University College London "
    "and New York University [1]."
)


def asks_topic(body):
    return "addresses" in ((body.get("format") or {}).get("properties") or {})


def is_generation(body):
    return not body.get("format")


def generations(fake):
    return [r for r in fake.requests if r["path"] == "/api/chat" and is_generation(r["body"] or {})]


def run_question(kb_db, settings, question=QUESTION):
    from pipeline.answering.engine import VerifiedQueryEngine

    events = list(VerifiedQueryEngine(settings=settings, db=kb_db).stream(question))
    return events, events[-1].result


def test_an_off_target_answer_is_retried_with_a_prompt_that_names_the_missing_terms(fake, settings, kb_db):
    from store.runs import get_run

    fake.enqueue(FAITHFUL_OFF_TARGET, model="llama3.2", match=is_generation)
    events, result = run_question(kb_db, settings)
    first = result.attempts[0].record
    assert first.faithfulness == 1.0 and first.status == "accepted"  # faithfulness alone would accept it
    assert (first.on_topic, first.on_topic_method) == (False, "embedding")
    assert first.missing_terms == ["passage", "wikipedia", "index", "rag", "paper"]
    [checked, _] = [e for e in events if e.kind == "on_topic"]
    assert checked.on_topic is False and checked.message.startswith("attempt 1: does not address")
    [retry] = [e for e in events if e.kind == "retry"]
    assert retry.missing_terms == first.missing_terms and retry.failed_claims == []
    assert "passage, wikipedia, index, rag, paper" in retry.message
    second = generations(fake)[1]["body"]["messages"]
    assert "did not address the question that was asked" in second[-1]["content"]
    assert (
        "It did not mention these terms of the question: passage, wikipedia, index, rag, paper" in second[-1]["content"]
    )
    assert result.status == "accepted" and result.final_attempt == 2
    assert "21 million passages" in result.answer and result.attempts[1].record.on_topic is True
    stored = get_run(kb_db, result.run_id)["attempts"]
    assert [(a["on_topic"], a["on_topic_method"]) for a in stored] == [(False, "embedding"), (True, "embedding")]


def test_when_the_embedding_is_unsure_the_models_stated_gap_goes_into_the_retry(fake, settings, kb_db):
    fake.enqueue(FAITHFUL_UNSURE, model="llama3.2", match=is_generation)
    _, result = run_question(kb_db, settings)
    first = result.attempts[0].record
    assert settings.on_topic_reject <= first.on_topic_score < settings.on_topic_accept
    assert (first.on_topic, first.on_topic_method) == (False, "model")
    assert len(topic_requests(fake)) == 1  # the retry's answer was sure: no second model call
    retry_prompt = generations(fake)[1]["body"]["messages"][-1]["content"]
    assert "did not address the question: it does not mention many, passage, wikipedia, index" in retry_prompt
    assert result.status == "accepted" and result.final_attempt == 2


@pytest.mark.parametrize("final", ["mark", "abstain"])
def test_a_persistently_off_target_answer_ends_as_configured(fake, settings, kb_db, final):
    from pipeline.answering import status

    fake.enqueue(FAITHFUL_OFF_TARGET, model="llama3.2", match=is_generation, times=3)
    events, result = run_question(kb_db, dataclasses.replace(settings, off_topic_final=final))
    assert len(result.attempts) == 3 and all(a.record.on_topic is False for a in result.attempts)
    assert len([e for e in events if e.kind == "retry"]) == 2
    assert result.final_attempt == 1 and result.faithfulness == 1.0
    if final == "mark":
        assert result.status == status.OFF_TOPIC and result.answer == FAITHFUL_OFF_TARGET
        assert "marked as not addressing it" in events[-2].message
    else:
        assert result.status == "abstained" and result.answer == status.NOT_ON_TOPIC
        assert result.abstain_reason.startswith("no attempt addressed the question, so none is given")


def test_the_best_attempt_is_on_target_before_it_is_faithful(fake, settings, kb_db):
    half_true = "The RAG index held 21 million passages [1]. The RAG paper won the best paper award at ICML 2019 [1]."
    fake.enqueue(FAITHFUL_OFF_TARGET, model="llama3.2", match=is_generation)
    fake.enqueue(half_true, model="llama3.2", match=is_generation, times=2)
    _, result = run_question(kb_db, dataclasses.replace(settings, abstain_below=0.4))
    faith = [(a.record.faithfulness, a.record.on_topic) for a in result.attempts]
    assert faith == [(1.0, False), (0.5, True), (0.5, True)]
    assert result.status == "flagged" and result.final_attempt == 2


def test_an_on_target_answer_costs_no_model_call_when_the_embedding_is_sure(fake, settings, kb_db):
    _, result = run_question(kb_db, settings)
    record = result.attempts[0].record
    assert result.status == "accepted" and (record.on_topic, record.on_topic_method) == (True, "embedding")
    with_check = [r["path"] for r in fake.requests if r["path"] == "/api/chat"]
    assert not topic_requests(fake)
    fake.clear()
    _, unchecked = run_question(kb_db, dataclasses.replace(settings, on_topic_check=False, cache_enabled=False))
    assert unchecked.attempts[0].record.on_topic_method is None
    assert len([r for r in fake.requests if r["path"] == "/api/chat"]) == len(with_check)


# -- on screen -----------------------------------------------------------------------------------------


def _page(run_id: int | None = None):
    """The Chat page, or the drilldown of run_id."""
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    if run_id is not None:
        at.query_params["run_id"] = str(run_id)
    at.run()
    if run_id is not None:
        at.switch_page("pages/runs.py")
        at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_the_chat_shows_each_attempts_check_with_the_models_words_escaped(fake, kb_db):
    fake.enqueue(FAITHFUL_UNSURE, model="llama3.2", match=is_generation)
    fake.enqueue({"addresses": False, "gap": "**the count** <b>of passages</b>"}, model="llama3.2", match=asks_topic)
    at = _page()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    assert at.session_state["conversation"][0]["result"].final_attempt == 2
    captions = "\n".join(c.value for c in at.caption)
    assert escape_markdown("Does not address the question — model check: similarity 0.21 is between") in captions
    assert escape_markdown("says it does not address the question: **the count** <b>of passages</b>") in captions
    assert "<b>" not in captions and "**the" not in captions
    assert escape_markdown("Addresses the question — embedding check: similarity 0.55 ≥ ") in captions


@pytest.mark.slow
def test_an_off_target_answer_is_marked_in_the_chat_and_the_drilldown(fake, settings, kb_db):
    fake.enqueue(FAITHFUL_OFF_TARGET, model="llama3.2", match=is_generation, times=6)
    at = _page()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    result = at.session_state["conversation"][0]["result"]
    assert result.status == "off_topic", (result.error, result.fix)
    warnings = [w.value for w in at.warning]
    expected = escape_markdown("Does not address the question — embedding check: similarity 0.11 < ")
    assert any(w.startswith(expected) for w in warnings), warnings
    assert "does not address the question" in "\n".join(m.value for m in at.markdown)
    at = _page(result.run_id)
    warnings = [w.value for w in at.warning]
    assert any(escape_markdown("does not mention passage, wikipedia, index, rag, paper") in w for w in warnings)
    captions = [c.value for c in at.caption if c.value.startswith("Does not address the question")]
    assert len(captions) == 3  # one per attempt
