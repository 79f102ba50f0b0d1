"""The streamed answer loop against the paced fake Ollama: tokens go out as they arrive, sentences are checked
while generation goes on (cited passages first), and a failing context grade withdraws streamed text."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fake_ollama import _pieces
from test_engine import RAG_QUESTION, is_generation, schema_has

from pages.views.answer import LiveAnswer
from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.answering.events import SentenceChecked, Token
from pipeline.answering.live import SentenceFeed
from pipeline.models.llm import LLM
from pipeline.verification.claims import CheckedClaim, Passage
from pipeline.verification.verifiers.minicheck import MiniCheckChunk
from store.runs import get_run

# Not verbatim in the sources, so each sentence needs a claim-extraction call; the second is long, so it is
# still streaming when the first sentence's verdicts come in.
PARAPHRASE = (
    "The RAG index held 21 million passages [1]. Those passages came from a Wikipedia dump of December 2018 "
    "that the RAG authors split into disjoint chunks of one hundred words each and searched with FAISS [1]."
)


# Order, not speed: the fake holds a reply at a chunk (fake.hold) until the test has seen the event it waits
# for, so what must happen while generation goes on happens then however loaded the machine is.


def engine_events(settings, kb_db, question=RAG_QUESTION, on_event=None):
    """The engine's events; on_event(event) runs as each comes out, before the engine goes on."""
    out = []
    for event in VerifiedQueryEngine(settings=settings, db=kb_db).stream(question):
        if on_event:
            on_event(event)
        out.append(event)
    return out


def is_answer(body):
    """The generator's answer request (a verifier's check carries no format either)."""
    return is_generation(body) and "minicheck" not in body["model"]


def release_at(kind, gate, fake, seen):
    """An on_event that, at the first event of this kind, notes whether the fake was holding a reply at the gate
    then (it waits for it to get there) and releases it."""

    def on_event(event):
        if event.kind == kind and not seen:
            seen.append(fake.wait_until(lambda f: gate.waiting == 1))
            gate.release()

    return on_event


def test_tokens_arrive_as_events_long_before_the_run_ends(fake, settings, kb_db):
    gate, seen = fake.hold(match=is_answer, after_chunks=1, times=1), []
    events = engine_events(settings, kb_db, on_event=release_at("token", gate, fake, seen))
    assert seen == [True] and gate.timed_out == 0  # the first text came out while the fake held back the rest
    tokens = [e for e in events if e.kind == "token"]
    assert len(tokens) > 20
    answer = "".join(e.delta for e in tokens)
    result = events[-1].result
    assert result.status == "accepted" and answer.strip() == result.answer


def test_a_sentence_is_verified_while_generation_goes_on(fake, settings, kb_db):
    fake.enqueue(PARAPHRASE, match=is_generation)
    first_sentence_chunks = len(_pieces(PARAPHRASE.split("[1]. ")[0] + "[1]. "))
    # the answer stops two words into its second sentence until the first sentence's verdicts are out
    gate, seen = fake.hold(match=is_answer, after_chunks=first_sentence_chunks + 2, times=1), []
    events = engine_events(settings, kb_db, on_event=release_at("sentence", gate, fake, seen))
    assert seen == [True] and gate.timed_out == 0
    kinds = [e.kind for e in events]
    first_sentence, generated = kinds.index("sentence"), kinds.index("generate")
    assert kinds.index("token") < first_sentence < generated
    assert "token" in kinds[first_sentence:generated]  # more answer text came after the first verdicts
    sentence = events[first_sentence]
    assert sentence.index == 0 and sentence.cited == [1] and sentence.claims
    assert all(c.claim_no >= 1 and c.verdict for c in sentence.claims)
    result = events[-1].result
    claims = result.final_claims or result.attempts[0].claims
    assert [c.claim_no for c in claims] == list(range(1, len(claims) + 1))  # numbered in answer order
    # the first sentence is checked as it stands (claim_granularity auto): one sentence, not the whole answer
    assert [c.text for c in sentence.claims] == ["The RAG index held 21 million passages."]
    verified = [r for r in fake.requests if (r["model"] or "").startswith("bespoke-minicheck")]
    first_prompt = verified[0]["body"]["messages"][-1]["content"]
    assert first_prompt.split("\nClaim: ")[1] == "The RAG index held 21 million passages."


def test_verification_tries_the_cited_passage_first(fake, settings, db):
    claim = "The RAG index held 21 million passages."
    passages = [
        Passage(1, 11, "a.md", "The RAG index held 21 million passages, as the paper says.", 0.9),
        Passage(2, 12, "b.md", "In total the RAG index held 21 million passages of Wikipedia text.", 0.5),
    ]
    verifier = MiniCheckChunk(LLM(settings, db), settings)

    def first_document(**kwargs):
        fake.clear()
        checked = verifier.verify(1, claim, passages, **kwargs)
        asked = [r for r in fake.requests if r["model"] == "bespoke-minicheck:latest"]
        return checked, asked[0]["body"]["messages"][-1]["content"]

    checked, document = first_document()
    assert "as the paper says" in document and checked.passage.n == 1  # best word overlap first
    checked, document = first_document(cited={2})
    assert "Wikipedia text" in document and checked.passage.n == 2 and checked.verdict == "supported"


def test_a_failing_grade_after_streaming_withdraws_the_text_and_abstains(fake, settings, kb_db, monkeypatch):
    fake.enqueue({"relevant": False, "reason": "the passages never state the figure"}, match=schema_has("relevant"))
    fake.enqueue({"relevant": False, "reason": "still nothing that answers it"}, match=schema_has("relevant"))
    stops = []  # the first answer's stop flag, as the engine hands it to the stream
    real_stream = LLM.stream_chat

    def stream_chat(self, *args, stop=None, **kwargs):
        stops.append(stop)
        return real_stream(self, *args, stop=stop, **kwargs)

    monkeypatch.setattr(LLM, "stream_chat", stream_chat)
    # the grade waits until the first text is out; the answer stops at its third chunk until it is told to stop
    grading, seen = fake.hold(match=schema_has("relevant"), times=1), []
    answering = fake.hold(match=is_answer, after_chunks=2, times=1, until=lambda f: bool(stops) and stops[0]())
    events = engine_events(settings, kb_db, on_event=release_at("token", grading, fake, seen))
    assert seen == [True] and grading.timed_out == 0 and answering.caught == 1 and answering.timed_out == 0
    kinds = [e.kind for e in events]
    grade = kinds.index("grade")
    assert "token" in kinds[:grade]  # text was shown before the grade came in
    assert kinds[grade + 1] == "discard" and kinds.count("discard") == 2
    result = events[-1].result
    assert result.status == "abstained" and result.attempts == [] and "does not cover" in result.abstain_reason
    run = get_run(kb_db, result.run_id)
    assert [g["relevant"] for g in run["grades"]] == [False, False] and run["rewritten_query"]
    from store.llm_log import calls_for_run

    generations = [c for c in calls_for_run(kb_db, result.run_id) if c["stage"] == "generate"]
    assert generations and (generations[0]["error"] or "").startswith("stopped")  # cut short, and said so

    live = LiveAnswer()
    for event in events[: grade + 2]:
        live.take(event)
    assert live.withdrawn and "withdrawn" in live.markdown() and "RAG" not in live.markdown()


def test_the_live_view_colours_finished_sentences_and_escapes_the_text(fake, settings, kb_db):
    text = "<b>The index</b> held **21 million** passages. [1] It was"
    live = LiveAnswer()
    for piece in text.split(" "):
        live.take(Token(attempt=1, delta=piece + " "))
    assert ":orange-background[" not in live.markdown() and "\\<b\\>" in live.markdown()
    sentence = SentenceFeed()
    finished = sentence.add(text)[0]
    claim = CheckedClaim(1, "The index held 21 million passages.", "unsupported", "precheck")
    claim.answer_span = (finished.start, finished.end)
    live.take(
        SentenceChecked(
            attempt=1, index=0, span=claim.answer_span, cited=[1], claims=[claim], error=None, message="sentence 1"
        )
    )
    markdown = live.markdown()
    assert ":orange-background[" in markdown and "<b>" not in markdown and "\\*\\*21 million\\*\\*" in markdown
    assert markdown.rstrip().endswith("It was")  # the sentence being written stays plain
    live.take(Token(attempt=2, delta="Fresh"))
    assert "Attempt 2" in live.markdown() and "orange" not in live.markdown()


@pytest.mark.slow
def test_the_chat_page_shows_the_answer_and_closes_its_step_list(fake, settings, kb_db):
    from streamlit.testing.v1 import AppTest
    from test_app import QUESTION, ROOT, markdown_text

    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception, at.exception
    steps = at.status[0]
    assert steps.state == "complete" and not steps.proto.expanded and steps.label == "Done: accepted"
    step_lines = [m.value for m in steps.markdown]
    assert any("sentence 1" in line for line in step_lines) and not any(line == "" for line in step_lines)
    assert "21 million passages" in markdown_text(at) and "withdrawn" not in markdown_text(at)


@pytest.mark.slow
def test_precheck_off_still_gets_three_way_verdicts_on_a_streamed_sentence(fake, settings, kb_db):
    fake.enqueue("The RAG index was split into 50 million passages [1].", match=is_generation, times=3)
    events = engine_events(dataclasses.replace(settings, precheck_enabled=False), kb_db)
    first = next(e for e in events if e.kind == "sentence")
    assert [c.verdict for c in first.claims] == ["contradicted"]
    assert "21 million" in first.claims[0].evidence


def test_with_slots_to_spare_the_answer_is_decided_before_its_rejected_claims_are_classified(fake, settings, kb_db):
    """Contradicted or unsupported changes neither the score nor the outcome: the decision is shown first and the
    classification, running alongside, settles after it, on the overlapped schedule as on one slot."""
    fake.enqueue("The RAG index was split into 50 million passages [1].", match=is_generation)
    once = dataclasses.replace(settings, precheck_enabled=False, max_retries=0, ollama_slots_per_host=4)
    events = engine_events(once, kb_db)
    kinds = [e.kind for e in events]
    assert "verdict" in kinds and kinds.index(next(k for k in kinds if k in ("decide", "abstain"))) < kinds.index(
        "verdict"
    )
    claim = events[-1].result.attempts[0].claims[0]
    assert claim.verdict == "contradicted" and "21 million" in claim.evidence  # settled all the same


@pytest.mark.slow
def test_the_retry_starts_while_a_rejected_claim_is_still_being_classified(fake, settings, kb_db):
    fake.enqueue("The RAG index was split into 50 million passages [1].", match=is_generation)
    fake.enqueue("The RAG index held 21 million passages [1].", match=is_generation)
    no_precheck = dataclasses.replace(settings, precheck_enabled=False)

    def retry_asked(f):
        return any(r["path"] == "/api/chat" and "previous answer" in json.dumps(r["body"]) for r in f.requests)

    # the classification is not answered before the retry's request has come in
    classifying = fake.hold(match=schema_has("quote"), until=retry_asked, times=1)
    events = engine_events(no_precheck, kb_db)
    assert classifying.caught == 1 and classifying.timed_out == 0
    classified = [r for r in fake.requests if schema_has("quote")(r["body"] or {})]
    retried = [r for r in fake.requests if r["path"] == "/api/chat" and "previous answer" in json.dumps(r["body"])]
    assert len(classified) == 1 and len(retried) == 1
    assert retried[0]["received"] < classified[0]["done"]  # the retry did not wait for the classification
    verdict = next(e for e in events if e.kind == "verdict")
    assert verdict.attempt == 1 and verdict.claim.verdict == "contradicted"
    assert events.index(verdict) > next(i for i, e in enumerate(events) if e.kind == "retry")
    result = events[-1].result
    first, second = result.attempts
    assert [c.verdict for c in first.claims] == ["contradicted"] and "21 million" in first.claims[0].evidence
    assert first.record.failed_claims == ["The RAG index was split into 50 million passages."]
    assert result.status == "accepted" and {c.verdict for c in second.claims} == {"supported"}
    stored = get_run(kb_db, result.run_id)["claims"]
    assert [(c["attempt_no"], c["verdict"]) for c in stored] == [(1, "contradicted")] + [(2, "supported")] * len(
        second.claims
    )
