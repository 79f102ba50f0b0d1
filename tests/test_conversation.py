"""Follow-up questions through the real ollama client and LlamaIndex classes against the fake Ollama: a follow-up is
rewritten into a standalone question from the earlier turns before retrieval, a question that stands alone is not
(no model call), earlier answers are never evidence, the history is bounded by its token budget, and a rewrite
that cannot be used leaves the question as asked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipeline.answering import prompts
from pipeline.answering.budget import count_tokens
from pipeline.answering.conversation import NOT_EVIDENCE, STEP, Turn, bounded, refers_back, turn_text
from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.history.conversations import earlier_turns, history_of, neighbours
from pipeline.history.runs import load_run
from store.runs import get_run

FIRST = "Who introduced the Transformer?"
FOLLOW_UP = "When was it published?"
STANDALONE = "When was the Transformer published?"
PUBLISHED = '"Attention Is All You Need" was published in 2017'


def ask(db, settings, question, **conversation):
    events = list(VerifiedQueryEngine(settings=settings, db=db).stream(question, **conversation))
    return events, events[-1].result


def schema_has(key):
    return lambda body: key in ((body.get("format") or {}).get("properties") or {})


def rewrite_calls(fake):
    return [r for r in fake.requests if r["path"] == "/api/chat" and schema_has("standalone")(r["body"])]


def standalone_event(events):
    (event,) = [e for e in events if e.kind == "standalone"]
    return event


def request_text(request) -> str:
    """Everything a request sent (its messages, a prompt, texts to embed)."""
    return json.dumps(request["body"] or {})


# -- the rule: which questions are follow-ups (no model call decides it) ----------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        FOLLOW_UP,
        "How many layers does its encoder have?",
        "Who wrote them?",
        "Is that true for the big model?",
        "What about BERT?",
        "And the decoder?",
        "Which one is larger?",
        "Tell me more",
        "Why?",
        "How so?",
    ],
)
def test_a_question_that_leans_on_an_earlier_turn_is_a_follow_up(question):
    assert refers_back(question)


@pytest.mark.parametrize(
    "question",
    [
        FIRST,
        "How many parameters does the Transformer base model have?",
        "What is RAG?",
        "Why does self-attention cost O(n^2) in the sequence length?",
        "Which tokenizer does Llama use?",
        "How are documents split into chunks before embedding?",
    ],
)
def test_a_question_that_names_what_it_asks_about_stands_alone(question):
    assert refers_back(question) is None


# -- follow-ups through the engine ------------------------------------------------------------------------------


def test_a_follow_up_retrieves_for_the_standalone_question_rewritten_from_the_conversation(fake, settings, kb_db):
    _, first = ask(kb_db, settings, FIRST, conversation_id="talk")
    assert (first.conversation_id, first.turn_no, first.standalone_question) == ("talk", 1, FIRST)
    assert not rewrite_calls(fake)  # the first turn has nothing to lean on
    events, second = ask(kb_db, settings, FOLLOW_UP, history=[Turn.from_result(first)], conversation_id="talk")

    step = standalone_event(events)
    assert (step.method, step.standalone) == ("model", STANDALONE)
    assert [e.kind for e in events if e.kind != "token"][:2] == ["standalone", "retrieve"]  # before retrieval
    (call,) = rewrite_calls(fake)
    assert FIRST in request_text(call) and FOLLOW_UP in request_text(call)
    assert (second.question, second.standalone_question, second.turn_no) == (FOLLOW_UP, STANDALONE, 2)
    stored = get_run(kb_db, second.run_id)
    assert {r["query"] for r in stored["retrievals"] if r["round"] == 1} == {STANDALONE}
    assert (stored["conversation_id"], stored["turn_no"], stored["standalone_question"]) == ("talk", 2, STANDALONE)
    assert second.passages[0].source.endswith("transformer.md")
    assert any(PUBLISHED in p.text for p in second.passages)
    # the step is in the run's trace with its input and output, and the rewrite's call with its stage
    run = load_run(kb_db, second.run_id)
    (span,) = [s for s in run.spans if s.name == STEP]
    assert span.attributes["question"] == FOLLOW_UP and span.attributes["standalone"] == STANDALONE
    assert [c["stage"] for c in run.calls].count("standalone_question") == 1

    # the same words asked alone retrieve no chunk that says when the Transformer was published
    _, alone = ask(kb_db, settings, FOLLOW_UP)
    assert alone.standalone_question is None and not any(PUBLISHED in p.text for p in alone.passages)


def test_a_question_that_stands_alone_is_not_rewritten_and_gets_no_history(fake, settings, kb_db):
    history = [Turn(FIRST, "The Transformer was introduced by Vaswani et al.")]
    question = "How many parameters does the Transformer base model have?"
    events, result = ask(kb_db, settings, question, history=history, conversation_id="talk")
    assert not rewrite_calls(fake)
    step = standalone_event(events)
    assert step.method == "rule" and "stands alone" in step.message
    assert result.standalone_question == question and result.status == "accepted"
    assert not any(prompts.HISTORY_HEADING in request_text(r) for r in fake.requests if r["path"] == "/api/chat")


def test_a_claim_only_an_earlier_answer_supports_is_unsupported_and_the_verifiers_never_see_the_history(
    fake, settings, kb_db
):
    earlier = "The Transformer was designed in Zanzibar by a team of 40 engineers."
    history = [Turn(FIRST, earlier)]
    answer = f"{PUBLISHED} [1]. {earlier[:-1]} [1]."
    fake.enqueue(answer, model="llama3.2", match=lambda body: not body.get("format"), times=3)
    exact = dataclasses.replace(settings, precheck_enabled=False)  # the model verifiers decide, not the pre-check
    events, result = ask(kb_db, exact, FOLLOW_UP, history=history, conversation_id="talk")
    first = result.attempts[0]
    verdicts = {c.text: c.verdict for c in first.claims}
    assert verdicts[earlier] in ("unsupported", "contradicted")
    assert first.record.faithfulness < 1.0 and earlier in first.record.failed_claims
    # the generation prompt shows the earlier turns, marked as no source; nothing else but the rewrite sees them
    shown = [r for r in fake.requests if "Turn 1 answer" in request_text(r)]
    assert shown and all(r["path"] == "/api/chat" for r in shown)
    assert all(schema_has("standalone")(r["body"]) or not r["body"].get("format") for r in shown)
    assert all(r["model"] == "llama3.2:latest" for r in shown)
    generation = next(r for r in shown if not r["body"].get("format"))
    assert prompts.HISTORY_HEADING in request_text(generation)
    verifier_calls = [r for r in fake.requests if r["model"] == "bespoke-minicheck:latest"]
    assert verifier_calls and not any("Turn 1" in request_text(r) for r in verifier_calls)


def test_the_history_budget_keeps_the_newest_turns_and_drops_the_oldest_first():
    turns = [Turn(f"Question number {n} about topic {n}?", f"Answer number {n}.") for n in range(1, 11)]
    cost = count_tokens(turn_text(10, turns[-1])) + 1
    history = bounded(turns, 3 * cost + 2)
    assert [n for n, _ in history.turns] == [8, 9, 10]
    assert (history.dropped, history.skipped, history.given) == (7, 0, 10)
    assert history.tokens <= history.budget
    assert "the oldest 7 dropped" in history.summary()
    assert bounded(turns, 0).turns == [] and bounded(turns, 0).dropped == 10
    assert [n for n, _ in bounded(turns, 10**6).turns] == list(range(1, 11))


def test_a_conversation_of_500_turns_is_read_within_the_budget(fake, settings, kb_db):
    turns = [Turn(f"Who wrote paper number {n}?", f"Paper {n} was written by author {n}.") for n in range(1, 501)]
    turns[-1] = Turn(FIRST, "The Transformer was introduced by Vaswani and colleagues.")
    tight = dataclasses.replace(settings, conversation_history_tokens=200)
    events, result = ask(kb_db, tight, FOLLOW_UP, history=turns, conversation_id="long")
    step = standalone_event(events)
    assert 0 < step.turns < 500 and step.dropped == 500 - step.turns
    assert step.history_tokens <= 200
    (call,) = rewrite_calls(fake)
    sent = call["body"]["messages"][-1]["content"]
    assert "Turn 500 question: " + FIRST in sent and "Turn 1 question" not in sent
    assert result.standalone_question == STANDALONE and result.turn_no == 501


def test_an_unparseable_rewrite_falls_back_to_the_question_as_asked_and_says_so(fake, settings, kb_db):
    fake.enqueue("the standalone question is about the Transformer", match=schema_has("standalone"), times=2)
    events, result = ask(kb_db, settings, FOLLOW_UP, history=[Turn(FIRST, "Vaswani et al.")], conversation_id="t")
    step = standalone_event(events)
    assert step.method == "fallback" and step.standalone == FOLLOW_UP
    assert "could not be used" in step.message and "invalid standalone_question reply" in step.message
    assert len(rewrite_calls(fake)) == 2  # the call and its one retry, then the question as asked
    assert result.standalone_question == FOLLOW_UP
    assert {r["query"] for r in get_run(kb_db, result.run_id)["retrievals"] if r["round"] == 1} == {FOLLOW_UP}
    (span,) = [s for s in load_run(kb_db, result.run_id).spans if s.name == STEP]
    assert span.attributes["method"] == "fallback" and "invalid" in span.attributes["fallback"]


def test_an_empty_earlier_turn_is_skipped_with_the_reason_and_a_wrong_one_refused(fake, settings, kb_db):
    history = [Turn("   ", "an answer to nothing"), {"question": FIRST, "answer": "Vaswani et al."}, ("", None)]
    events, result = ask(kb_db, settings, FOLLOW_UP, history=history, conversation_id="t")
    step = standalone_event(events)
    assert (step.turns, step.skipped, step.method) == (1, 2, "model")
    (span,) = [s for s in load_run(kb_db, result.run_id).spans if s.name == STEP]
    assert "2 empty skipped" in span.attributes["history"]
    assert result.standalone_question == STANDALONE and result.turn_no == 4
    with pytest.raises(InputError, match="an earlier turn is a int"):
        VerifiedQueryEngine(settings=settings, db=kb_db).stream(FOLLOW_UP, history=[7])


def test_without_history_in_budget_a_follow_up_is_used_as_asked_without_a_call(fake, settings, kb_db):
    off = dataclasses.replace(settings, conversation_history_tokens=0)
    events, result = ask(kb_db, off, FOLLOW_UP, history=[Turn(FIRST, "Vaswani et al.")], conversation_id="t")
    assert standalone_event(events).method == "no history" and not rewrite_calls(fake)
    assert result.standalone_question == FOLLOW_UP


def test_turns_are_read_back_in_order_with_their_neighbours(fake, settings, kb_db):
    _, first = ask(kb_db, settings, FIRST, conversation_id="talk")
    _, second = ask(kb_db, settings, FOLLOW_UP, history=[Turn.from_result(first)], conversation_id="talk")
    assert [(t.question, t.standalone, t.run_id) for t in history_of(kb_db, "talk")] == [
        (FIRST, None, first.run_id),
        (FOLLOW_UP, STANDALONE, second.run_id),
    ]
    assert [t.run_id for t in earlier_turns(kb_db, second)] == [first.run_id]
    place = neighbours(kb_db, second)
    assert (place.previous, place.next, place.position, place.total) == (first.run_id, None, 2, 2)
    assert neighbours(kb_db, first).next == second.run_id
    assert "not evidence" in NOT_EVIDENCE


# -- the CLI -------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ask_conversation_continues_the_named_conversation_across_two_calls(fake, kb_db, capsys):
    assert main(["ask", "--json", "--quiet", "--conversation", "notes", FIRST]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["conversation"], first["turn"], first["standalone_question"]) == ("notes", 1, FIRST)
    assert main(["ask", "--json", "--quiet", "--conversation", "notes", FOLLOW_UP]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["conversation"], second["turn"]) == ("notes", 2)
    assert second["question"] == FOLLOW_UP and second["standalone_question"] == STANDALONE
    assert any(PUBLISHED in p["text"] for p in second["passages"])
    # another conversation does not lean on this one, and plain output names the question retrieved for
    assert main(["ask", "--conversation", "other", FOLLOW_UP]) == 0
    out = capsys.readouterr().out
    assert "retrieved for" not in out and "conversation other, turn 1" in out
    assert main(["ask", "--conversation", "notes", "What about BERT?"]) == 0
    out = capsys.readouterr().out
    # the latest turn, as it was read
    assert "retrieved for: When was BERT published?" in out and "conversation notes, turn 3" in out
    # runs lists a conversation's turns
    assert main(["runs", "--conversation", "notes", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed][::-1][:2] == [first["run_id"], second["run_id"]]
    assert len(listed) == 3  # not the turn of conversation other


def test_ask_refuses_an_empty_conversation_name(fake, kb_db, capsys):
    assert main(["ask", "--conversation", "  ", FIRST]) == 2
    assert "the conversation's name is empty" in capsys.readouterr().err
