"""The streamed answer loop against the paced fake Ollama: tokens go out as they arrive, sentences are checked
while generation goes on (cited passages first), and a failing context grade withdraws streamed text."""

from __future__ import annotations

import dataclasses
import json
import time

from test_engine import RAG_QUESTION, is_generation, schema_has

from pages.views.answer import LiveAnswer
from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.answering.events import Event
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


def timed_events(settings, kb_db, question=RAG_QUESTION):
    out = []
    for event in VerifiedQueryEngine(settings=settings, db=kb_db).stream(question):
        out.append((time.perf_counter(), event))
    return out


def test_tokens_arrive_as_events_long_before_the_run_ends(fake, settings, kb_db):
    fake.set_latency(0.02)
    events = timed_events(settings, kb_db)
    tokens = [(t, e) for t, e in events if e.kind == "token"]
    generated = next(t for t, e in events if e.kind == "generate")
    assert len(tokens) > 20
    assert generated - tokens[0][0] > 0.02 * len(tokens) * 0.5  # the first text came while the rest was written
    answer = "".join(e.data["delta"] for _, e in tokens)
    result = events[-1][1].data["result"]
    assert result.status == "accepted" and answer.strip() == result.answer


def test_a_sentence_is_verified_while_generation_goes_on(fake, settings, kb_db):
    fake.set_latency(0.03)
    fake.enqueue(PARAPHRASE, match=is_generation)
    events = [e for _, e in timed_events(settings, kb_db)]
    kinds = [e.kind for e in events]
    first_sentence, generated = kinds.index("sentence"), kinds.index("generate")
    assert kinds.index("token") < first_sentence < generated
    assert "token" in kinds[first_sentence:generated]  # more answer text came after the first verdicts
    sentence = events[first_sentence].data
    assert sentence["index"] == 0 and sentence["cited"] == [1] and sentence["claims"]
    assert all(c.claim_no >= 1 and c.verdict for c in sentence["claims"])
    result = events[-1].data["result"]
    claims = result.final_claims or result.attempts[0].claims
    assert [c.claim_no for c in claims] == list(range(1, len(claims) + 1))  # numbered in answer order
    extractions = [r for r in fake.requests if r["body"] and schema_has("claims")(r["body"])]
    first_prompt = extractions[0]["body"]["messages"][-1]["content"]
    assert "21 million" in first_prompt and "FAISS" not in first_prompt  # one sentence, not the whole answer


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


def test_a_failing_grade_after_streaming_withdraws_the_text_and_abstains(fake, settings, kb_db):
    fake.set_latency(0.02)
    slow_no = {"relevant": False, "reason": "the passages discuss the topic " + "but never state the figure " * 6}
    fake.enqueue(slow_no, match=schema_has("relevant"))
    fake.enqueue({"relevant": False, "reason": "still nothing that answers it"}, match=schema_has("relevant"))
    events = [e for _, e in timed_events(settings, kb_db)]
    kinds = [e.kind for e in events]
    grade = kinds.index("grade")
    assert "token" in kinds[:grade]  # text was shown before the grade came in
    assert kinds[grade + 1] == "discard" and kinds.count("discard") == 2
    result = events[-1].data["result"]
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
        live.take(Event("token", "", {"attempt": 1, "delta": piece + " "}))
    assert ":orange-background[" not in live.markdown() and "\\<b\\>" in live.markdown()
    sentence = SentenceFeed()
    finished = sentence.add(text)[0]
    claim = CheckedClaim(1, "The index held 21 million passages.", "unsupported", "precheck")
    claim.answer_span = (finished.start, finished.end)
    live.take(Event("sentence", "", {"attempt": 1, "claims": [claim]}))
    markdown = live.markdown()
    assert ":orange-background[" in markdown and "<b>" not in markdown and "\\*\\*21 million\\*\\*" in markdown
    assert markdown.rstrip().endswith("It was")  # the sentence being written stays plain
    live.take(Event("token", "", {"attempt": 2, "delta": "Fresh"}))
    assert "Attempt 2" in live.markdown() and "orange" not in live.markdown()


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


def test_precheck_off_still_gets_three_way_verdicts_on_a_streamed_sentence(fake, settings, kb_db):
    fake.enqueue("The RAG index was split into 50 million passages [1].", match=is_generation, times=3)
    events = [e for _, e in timed_events(dataclasses.replace(settings, precheck_enabled=False), kb_db)]
    first = next(e for e in events if e.kind == "sentence")
    assert [c.verdict for c in first.data["claims"]] == ["contradicted"]
    assert "21 million" in first.data["claims"][0].evidence


def test_the_retry_starts_while_a_rejected_claim_is_still_being_classified(fake, settings, kb_db):
    fake.set_latency(0.02)  # the classifier's reply (verdict, quote, reason) takes ~30 tokens, the verifier's 1
    fake.enqueue("The RAG index was split into 50 million passages [1].", match=is_generation)
    fake.enqueue("The RAG index held 21 million passages [1].", match=is_generation)
    no_precheck = dataclasses.replace(settings, precheck_enabled=False)
    events = [e for _, e in timed_events(no_precheck, kb_db)]
    classified = [r for r in fake.requests if schema_has("quote")(r["body"] or {})]
    retried = [r for r in fake.requests if r["path"] == "/api/chat" and "previous answer" in json.dumps(r["body"])]
    assert len(classified) == 1 and len(retried) == 1
    assert retried[0]["received"] < classified[0]["done"]  # the retry did not wait for the classification
    verdict = next(e for e in events if e.kind == "verdict")
    assert verdict.data["attempt"] == 1 and verdict.data["claim"].verdict == "contradicted"
    assert events.index(verdict) > next(i for i, e in enumerate(events) if e.kind == "retry")
    result = events[-1].data["result"]
    first, second = result.attempts
    assert [c.verdict for c in first.claims] == ["contradicted"] and "21 million" in first.claims[0].evidence
    assert first.record.failed_claims == ["The RAG index was split into 50 million passages."]
    assert result.status == "accepted" and {c.verdict for c in second.claims} == {"supported"}
    stored = get_run(kb_db, result.run_id)["claims"]
    assert [(c["attempt_no"], c["verdict"]) for c in stored] == [(1, "contradicted")] + [(2, "supported")] * len(
        second.claims
    )
