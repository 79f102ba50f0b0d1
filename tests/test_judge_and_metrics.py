"""The judge's parsing and every component metric on inputs with known values."""

from datetime import datetime, timezone

import pytest

from pipeline.answering.events import AnswerResult, Attempt
from pipeline.evaluation import metrics
from pipeline.evaluation.diagnosis import diagnose
from pipeline.evaluation.judge import judge, judge_pin
from pipeline.models.llm import LLM
from pipeline.verification.faithfulness import CheckedClaim, Passage
from store.records import AttemptRecord

PASSAGES = [
    Passage(1, 1, "a.md", "The Transformer was introduced in 2017 by Vaswani and colleagues.", 0.9),
    Passage(2, 2, "b.md", "Bananas are yellow fruit rich in potassium.", 0.5),
    Passage(3, 3, "c.md", "The Transformer base model uses 8 attention heads.", 0.4),
]


def schema_has(key):
    return lambda body: key in ((body.get("format") or {}).get("properties") or {})


def run_judge(settings, db, reference="The Transformer appeared in 2017."):
    llm = LLM(settings, db)
    return judge(
        llm,
        settings,
        "When did the Transformer appear?",
        "It appeared in 2017 [1].",
        "[1] ...",
        reference,
        judge_pin(llm, settings),
    )


def test_judge_scores_carry_the_pin(fake, settings, db):
    scores = run_judge(settings, db)
    assert [s.metric for s in scores] == [
        "judge_correctness",
        "judge_helpfulness",
        "judge_faithfulness",
        "judge_grounding",
        "judge_topicality",
    ]
    assert all(s.status == "ok" and 1 <= s.value <= 5 for s in scores)
    assert {s.scorer_model for s in scores} == {"llama3.2"}
    # the first three keep the pin they always had; the later criteria carry their own prompt versions
    assert [s.prompt_version for s in scores] == ["judge-v1"] * 3 + ["judge-grounding-v1", "judge-topicality-v1"]
    assert all(len(s.scorer_digest) == 64 for s in scores)


def test_judge_prompt_has_anchors_and_the_reference(fake, settings, db):
    run_judge(settings, db)
    body = next(r["body"] for r in fake.requests if r["body"] and schema_has("score")(r["body"]))
    system, user = body["messages"]
    assert "5: fully correct" in system["content"] and "1: wrong or off-topic" in system["content"]
    assert "Reference:\nThe Transformer appeared in 2017." in user["content"]
    assert body["format"]["properties"]["score"]["maximum"] == 5


@pytest.mark.parametrize("bad", ["not json at all", '{"reasoning": "fine", "score": 7}', '{"score": "high"}'])
def test_an_invalid_judge_reply_is_retried_once_then_stored_invalid(fake, settings, db, bad):
    fake.enqueue(bad, match=schema_has("score"), times=2)
    scores = run_judge(settings, db)
    correctness = scores[0]
    assert correctness.status == "invalid" and correctness.value is None
    assert "invalid judge_correctness reply after a retry" in correctness.explanation
    assert scores[1].status == "ok"


def test_a_judge_reply_that_parses_on_retry_is_used(fake, settings, db):
    fake.enqueue("oops", match=schema_has("score"))
    fake.enqueue({"reasoning": "right year", "score": 5}, match=schema_has("score"))
    assert run_judge(settings, db)[0].value == 5.0


@pytest.mark.parametrize(
    "relevant, expected",
    [
        ([True, False, True], (1 + 2 / 3) / 2),
        ([False, False, True], 1 / 3),
        ([True, True, False], 1.0),
        ([False, False, False], 0.0),
    ],
)
def test_average_precision(relevant, expected):
    assert metrics.average_precision(relevant) == pytest.approx(expected)


def test_context_precision_judges_every_chunk_by_rank(fake, settings, db):
    for verdict in (True, False, True):
        fake.enqueue({"relevant": verdict, "reason": "r"}, match=schema_has("relevant"))
    score = metrics.context_precision(LLM(settings, db), "llama3.2", "q?", "ref", PASSAGES)
    assert score.value == pytest.approx(5 / 6)
    assert score.details["relevant"] == [True, False, True]
    assert score.explanation == "by rank: [1] relevant, [2] not relevant, [3] relevant"


def test_context_recall_counts_reference_statements_found(settings, db):
    reference = (
        "The Transformer was introduced in 2017. The Transformer base model uses 8 attention heads. "
        "The Transformer won a Turing Award."
    )
    score = metrics.context_recall(LLM(settings, db), "bespoke-minicheck", reference, PASSAGES)
    assert score.value == pytest.approx(2 / 3)
    assert score.details["found"] == [True, True, False]
    assert "missing: The Transformer won a Turing Award." in score.explanation


def test_context_metrics_need_a_reference(settings, db):
    llm = LLM(settings, db)
    assert metrics.context_recall(llm, "bespoke-minicheck", None, PASSAGES).status == "not_applicable"
    assert metrics.context_precision(llm, "llama3.2", "q", None, PASSAGES).status == "not_applicable"


def result_with(status="accepted", answer="The Transformer appeared in 2017 [1].", faithfulness=1.0, verdicts=()):
    claims = [CheckedClaim(n, f"claim {n}", v, "m") for n, v in enumerate(verdicts, start=1)]
    attempt = Attempt(AttemptRecord(1, False, answer, "verified", faithfulness, len(claims), 0), claims)
    return AnswerResult(
        run_id=1,
        kind="chat",
        status=status,
        question="q",
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        answer=answer,
        faithfulness=faithfulness,
        attempts=[attempt],
        final_attempt=1,
        passages=PASSAGES,
    )


def test_answer_relevancy_from_questions_generated_back(fake, settings, db):
    question = "When was the Transformer introduced?"
    fake.enqueue(
        {"questions": [question, question, "What are bananas?"], "noncommittal": False}, match=schema_has("questions")
    )
    score = metrics.answer_relevancy(LLM(settings, db), "llama3.2", question, result_with())
    sims = score.details["similarities"]
    assert sims[0] == pytest.approx(1.0, abs=1e-5) and sims[2] < 0.2
    assert score.value == pytest.approx(sum(sims) / 3)


def test_answer_relevancy_of_evasive_and_abstained_answers(fake, settings, db):
    fake.enqueue({"questions": ["x?"], "noncommittal": True}, match=schema_has("questions"))
    llm = LLM(settings, db)
    assert metrics.answer_relevancy(llm, "llama3.2", "q?", result_with()).value == 0.0
    abstained = metrics.answer_relevancy(llm, "llama3.2", "q?", result_with(status="abstained"))
    assert (abstained.value, abstained.status) == (None, "not_applicable")


def test_faithfulness_metric_from_the_claims():
    score = metrics.faithfulness(result_with(faithfulness=0.5, verdicts=["supported", "contradicted"]))
    assert (score.value, score.status) == (0.5, "ok")
    assert score.explanation == "1 of 2 claims supported; not supported: claim 2"
    abstained = metrics.faithfulness(result_with(status="abstained", faithfulness=None))
    assert (abstained.value, abstained.status) == (None, "not_applicable")
    unverified = metrics.faithfulness(result_with(status="unverified", faithfulness=None))
    assert unverified.status == "invalid"


@pytest.mark.parametrize(
    "means, component",
    [
        ({"faithfulness": 0.4, "context_recall": 0.9, "context_precision": 0.8, "answer_relevancy": 0.8}, "generator"),
        ({"faithfulness": 0.95, "context_recall": 0.3, "context_precision": 0.8, "answer_relevancy": 0.8}, "retrieval"),
        ({"faithfulness": 0.9, "context_recall": 0.9, "context_precision": 0.3, "answer_relevancy": 0.8}, "reranking"),
        ({"faithfulness": 0.9, "context_recall": 0.9, "context_precision": 0.9, "answer_relevancy": 0.2}, "prompt"),
        ({"faithfulness": 0.3, "context_recall": 0.3, "context_precision": 0.9, "answer_relevancy": 0.9}, "retrieval"),
        ({"faithfulness": 0.9, "context_recall": 0.9, "context_precision": 0.9, "answer_relevancy": 0.9}, "none"),
        ({}, "unknown"),
    ],
)
def test_diagnostic_grid(means, component):
    diagnosis = diagnose(means)
    assert diagnosis.component == component
    assert diagnosis.sentence.endswith(".")


def test_each_judge_criterion_is_a_registered_metric_that_carries_its_own_corrections(fake, settings, db):
    from pipeline.evaluation.dataset import GoldenItem
    from pipeline.evaluation.registry import MetricInput, get_metric
    from pipeline.evaluation.runner import EvalPin
    from store.annotations import Correction

    llm = LLM(settings, db)
    base = judge_pin(llm, settings)
    # another question (a correction of the very question being scored is left out: leave-one-out)
    correction = Correction(
        1, "correctness", 7, "When was the Transformer paper published?", "in 2016", 1, 4, "the year is wrong"
    )
    pin = EvalPin(base.model, base.digest, base.prompt_version, corrections=[correction])
    item = GoldenItem(id="t", question="When did the Transformer appear?", reference="In 2017.")
    inputs = MetricInput(llm, settings, item, result_with(), pin)
    scores = {name: get_metric(name).measure(inputs) for name in ("judge_correctness", "judge_helpfulness")}
    assert all(s.status == "ok" and 1 <= s.value <= 5 for s in scores.values())
    systems = [
        r["body"]["messages"][0]["content"] for r in fake.requests if r["body"] and schema_has("score")(r["body"])
    ]
    assert len(systems) == 2
    assert "Why: the year is wrong" in systems[0] and "Why: the year is wrong" not in systems[1]
