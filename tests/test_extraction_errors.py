"""Claims that belong to their sentence: a claim the extractor copied from the question or from its prompt's
example, took from elsewhere, or repeated is kept in the run as an extraction error, never scored, and counted."""

from __future__ import annotations

import json

import pytest
from test_app import open_runs_page

from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.api import check_answer
from pipeline.evaluation.dataset import Dataset, GoldenItem
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.runs import load_result
from pipeline.verification.extraction_check import REPEAT, extraction_errors
from pipeline.verification.faithfulness import example_text
from pipeline.verification.prompts import EXTRACT_CLAIMS, EXTRACT_SENTENCE_CLAIMS

QUESTION = "How tall is the Eiffel Tower?"
CONTEXT = "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."
ANSWER = "The Eiffel Tower is 330 metres tall and it was completed in 1889."
GOOD = ["The Eiffel Tower is 330 metres tall.", "The Eiffel Tower was completed in 1889."]
COPY_OF_EXAMPLE = "BERT was released by Google in 2018."  # the extraction prompt's own example
WRONG = [QUESTION, COPY_OF_EXAMPLE, "the eiffel tower is 330 metres tall"]  # the question, the example, a repeat


@pytest.fixture(autouse=True)
def atomic_claims(monkeypatch):
    """These tests are of claim extraction itself, so every sentence is decomposed (claim_granularity atomic; auto
    decomposes only a failing sentence, and these answers' sentences mostly hold)."""
    monkeypatch.setenv("WORKBENCH_CLAIM_GRANULARITY", "atomic")


def extraction_of(sentence: str):
    """Matches the claim extraction of one streamed sentence."""

    def match(body) -> bool:
        schema = (body.get("format") or {}).get("properties") or {}
        last = (body.get("messages") or [{}])[-1].get("content") or ""
        return "claims" in schema and last.endswith(f"Answer:\n{sentence}")

    return match


def whole_answer_extraction(body) -> bool:
    return "Split the answer into atomic factual claims" in json.dumps(body)


def test_the_rule_tells_the_questions_the_examples_the_repeats_and_text_from_elsewhere_from_real_claims():
    reasons = extraction_errors(
        [
            *GOOD,
            "What is the height of the Eiffel Tower?",  # a question, whatever its words
            "The Paris landmark rises above the ground.",  # the question's words, none of the sentence's
            COPY_OF_EXAMPLE,
            "The Louvre holds the Mona Lisa.",  # in no sentence: another passage, or made up
            "The Eiffel Tower is 330 metres tall",  # the first again
        ],
        ANSWER,
        question="How high does the Paris landmark rise above the ground?",
        examples=example_text(EXTRACT_CLAIMS),
    )
    assert reasons[:2] == [None, None]
    assert reasons[2].startswith("a question")
    assert reasons[3].startswith("copies the question")
    assert reasons[4].startswith("copies the extraction prompt's example")
    assert reasons[5].startswith("not in its answer sentence")
    assert reasons[6] == REPEAT


def test_a_pronoun_replaced_from_the_sentence_before_is_no_error():
    earlier = "BERT was released by Google in 2018."
    [why] = extraction_errors(
        ["BERT has 340 million parameters."],
        "It has 340 million parameters.",
        question="How large is BERT?",
        earlier=earlier,
        examples=example_text(EXTRACT_SENTENCE_CLAIMS),
    )
    assert why is None


def test_an_answers_extraction_errors_are_kept_with_their_reason_and_not_scored(fake, settings, db):
    fake.enqueue({"claims": [GOOD[0], *WRONG, GOOD[1]]}, match=whole_answer_extraction)
    checked = check_answer(QUESTION, ANSWER, [CONTEXT], pipeline="p", settings=settings)
    verdicts = [(c.text, c.verdict) for c in checked.claims]
    assert verdicts == [
        (GOOD[0], "supported"),
        (QUESTION, "extraction_error"),
        (COPY_OF_EXAMPLE, "extraction_error"),
        (WRONG[2], "extraction_error"),
        (GOOD[1], "supported"),
    ]
    assert checked.faithfulness == 1.0 and checked.status == "accepted"  # 2 of 2 scored claims, not 2 of 5
    assert [c.reason.split(" ")[0] for c in checked.claims if c.verdict == "extraction_error"] == [
        "a",
        "copies",
        "repeats",
    ]
    stored = load_result(db, checked.run_id)
    assert [c.verdict for c in stored.final_claims] == [v for _, v in verdicts]  # kept in the run
    assert stored.final_record.n_claims == 2 and stored.final_record.n_supported == 2
    assert {c.verifier for c in stored.final_claims if c.verdict == "extraction_error"} == {"extraction check"}


def test_the_evaluation_report_counts_the_extraction_errors(fake, settings, db):
    fake.enqueue({"claims": [GOOD[0], *WRONG]}, match=whole_answer_extraction)
    item = GoldenItem(id="tower", question=QUESTION, answer=ANSWER, contexts=[{"text": CONTEXT}])
    dataset = Dataset("answers.jsonl", [item], [], "hash", answers_hash="answers")
    run_evaluation(settings, db, dataset, "with-errors", metrics=["faithfulness"])
    result = report(settings, db, "with-errors")
    assert result.extraction_errors == (3, 4) and result.extraction_error_rate == 0.75
    faith = next(m for m in result.metrics if m["metric"] == "faithfulness")
    assert faith["mean"] == 1.0


def test_a_streamed_answers_sentence_claims_that_repeat_or_copy_the_question_are_not_scored(fake, settings, kb_db):
    question = "How many passages were in the Wikipedia index of the RAG paper?"
    first = "The RAG paper's index held twenty-one million passages from Wikipedia [1]."
    second = "That index of passages came from a Wikipedia dump [1]."
    fake.enqueue(f"{first} {second}", model="llama3.2", match=lambda body: not body.get("format"))
    claim = "The RAG paper's index held twenty-one million passages from Wikipedia."
    fake.enqueue({"claims": [claim]}, match=extraction_of(first))
    fake.enqueue(
        {"claims": [claim, question, "The index of passages came from a Wikipedia dump."]}, match=extraction_of(second)
    )
    settings = settings.__class__(**{**settings.__dict__, "max_retries": 0, "when_unverified": "show_best"})
    events = list(VerifiedQueryEngine(settings=settings, db=kb_db).stream(question))
    result = events[-1].result
    kinds = {c.text: (c.verdict, c.reason) for c in result.final_claims}
    assert kinds[question][0] == "extraction_error" and kinds[question][1].startswith("a question")
    repeats = [c for c in result.final_claims if c.text == claim]
    assert [c.verdict for c in repeats][1] == "extraction_error" and repeats[1].reason == REPEAT
    assert result.final_record.n_claims == len(result.final_claims) - 2


def test_the_drilldown_shows_the_extraction_errors_apart_and_colours_no_sentence_by_them(fake, settings, db):

    fake.enqueue({"claims": [GOOD[0], *WRONG]}, match=whole_answer_extraction)
    checked = check_answer(QUESTION, ANSWER, [CONTEXT], pipeline="p", settings=settings)
    at = open_runs_page(str(checked.run_id))
    assert any(c.value.startswith("3 of 4 extraction errors") for c in at.caption)
    assert [e.label.split(" — ")[1].split(" \\(")[0] for e in at.expander if e.label.startswith("Claim ")] == [
        "supported",
        "extraction error",
        "extraction error",
        "extraction error",
    ]
    answer = next(m.value for m in at.markdown if "green-background" in m.value and "claim 1" in m.value)
    assert "claim 2" not in answer and "claim 3" not in answer  # the errors mark no sentence
