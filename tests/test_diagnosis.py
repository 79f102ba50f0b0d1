"""The diagnosis knows what it does not know (issue 11): constructed metric means, no model."""

import pytest

from pipeline.evaluation.diagnosis import diagnose

ALL_HIGH = {"faithfulness": 0.9, "answer_relevancy": 0.85, "context_precision": 0.8, "context_recall": 0.95}


def test_health_only_when_every_metric_is_measured_and_the_judge_mostly_answered():
    healthy = diagnose(ALL_HIGH, judge_invalid_rate=0.1)
    assert healthy.component == "none" and healthy.unmeasured == []
    assert "at or above 0.75" in healthy.sentence


def test_missing_metrics_are_named_with_their_reason_and_health_is_not_claimed():
    means = {"faithfulness": 0.9, "answer_relevancy": None, "context_precision": None, "context_recall": None}
    why = {"answer_relevancy": "10 invalid", "context_recall": "10 not applicable: no references"}
    diagnosis = diagnose(means, judge_invalid_rate=1.0, why_missing=why)
    assert diagnosis.component == "unknown"
    assert "Every component metric is at or above" not in diagnosis.sentence
    assert "health cannot be claimed" in diagnosis.sentence
    assert "answer relevancy (10 invalid)" in diagnosis.sentence
    assert "context precision (no valid score)" in diagnosis.sentence
    assert "context recall (10 not applicable: no references)" in diagnosis.sentence
    assert "100% of its replies were invalid" in diagnosis.sentence
    assert len(diagnosis.unmeasured) == 4


def test_too_many_invalid_judge_replies_alone_withhold_health():
    diagnosis = diagnose(ALL_HIGH, judge_invalid_rate=0.25)
    assert diagnosis.component == "unknown" and "25% of its replies were invalid, more than 20%" in diagnosis.sentence
    assert diagnose(ALL_HIGH, judge_invalid_rate=0.2).component == "none"  # at the limit: still health


def test_a_metric_far_below_the_others_names_its_component():
    means = {"faithfulness": 0.65, "answer_relevancy": 0.7, "context_precision": 0.62, "context_recall": 0.0}
    diagnosis = diagnose(means)
    assert diagnosis.component == "retriever/chunking"
    assert diagnosis.sentence.startswith("context recall (0.00) is at least 0.2 below the next-lowest metric")
    assert "No clear pattern" not in diagnosis.sentence
    # closer than 0.2: no component is singled out
    means["context_recall"] = 0.5
    assert diagnose(means).component == "unknown" and "No clear pattern" in diagnose(means).sentence


def test_the_grid_still_reads_its_patterns_first():
    means = {"faithfulness": 0.3, "answer_relevancy": 0.9, "context_precision": 0.9, "context_recall": 0.9}
    assert diagnose(means).component == "generator"


@pytest.mark.slow
def test_an_evaluation_whose_judge_never_answers_in_json_is_not_called_healthy(fake, settings, kb_db):
    from pipeline.evaluation.dataset import Dataset, GoldenItem
    from pipeline.evaluation.runner import report, run_evaluation

    def judge_request(body):
        return "score" in ((body.get("format") or {}).get("properties") or {})

    fake.enqueue("I would rate this answer highly.", match=judge_request, times=50)
    item = GoldenItem(
        id="rag",
        question="How many passages were in the Wikipedia index of the RAG paper?",
        reference="The Wikipedia index had 21 million passages.",
    )
    run_evaluation(settings, kb_db, Dataset("g.jsonl", [item], [], "h"), "judge-mute")
    result = report(settings, kb_db, "judge-mute")
    assert result.judge_invalid == result.judge_total == 5  # one item, five criteria
    assert result.diagnosis.component != "none"
    assert "100% of its replies were invalid" in result.diagnosis.sentence


def test_the_generator_sentence_says_how_many_abstained_items_faithfulness_left_out():
    means = {"faithfulness": 0.4, "context_recall": 0.9, "context_precision": 0.8, "answer_relevancy": 0.8}
    found = diagnose(means, abstained=3)
    assert found.component == "generator"
    assert "the generator adds claims the retrieved context does not support (3 abstained items left out" in (
        found.sentence
    )
    assert "abstained" not in diagnose(means).sentence
