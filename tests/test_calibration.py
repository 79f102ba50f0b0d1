"""Agreement statistics on known pairs, ratings, corrections and leave-one-out re-judging."""

import dataclasses

import numpy as np
import pytest
from scipy.stats import spearmanr
from test_evaluation import ITEMS, dataset

from pipeline.calibration.agreement import agreement, claim_agreement, rejudge
from pipeline.calibration.annotations import (
    Correction,
    add_corrections,
    current_corrections,
    judged_pairs,
    ratings_for,
    save_rating,
)
from pipeline.errors import InputError
from pipeline.evaluation.corrections import relevant_corrections
from pipeline.evaluation.runner import run_evaluation
from store.evals import run_ids_of


def hand_qwk(a, b):
    """Quadratic-weighted kappa from its definition: 1 - sum(w*O) / sum(w*E)."""
    observed = np.zeros((5, 5))
    for x, y in zip(a, b, strict=True):
        observed[x - 1, y - 1] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / len(a)
    weights = np.array([[(i - j) ** 2 / 16 for j in range(5)] for i in range(5)])
    return 1 - (weights * observed).sum() / (weights * expected).sum()


def test_agreement_on_known_pairs():
    judge, human = [1, 2, 3, 4, 5, 5, 3, 2], [1, 2, 4, 4, 3, 5, 3, 1]
    a = agreement(judge, human)
    assert a.n == 8
    assert a.exact == 5 / 8 and a.within_one == 7 / 8 and a.mean_abs_diff == 4 / 8
    assert a.kappa == pytest.approx(hand_qwk(judge, human))
    assert a.kappa == pytest.approx(97 / 121)  # 1 - 0.375 / 1.890625 (weighted observed / expected)
    assert a.spearman == pytest.approx(spearmanr(judge, human).statistic)
    assert a.kappa_low is None and a.why_not("kappa_low").startswith("only 8 pairs")  # too few for an interval
    assert a.matrix[4][2] == 1 and sum(map(sum, a.matrix)) == 8
    assert not a.reliable


def test_the_batched_kappa_of_the_bootstrap_matches_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    from pipeline.calibration.agreement import qwk_batch

    rng = np.random.default_rng(4)
    a, b = rng.integers(1, 6, size=(50, 12)), rng.integers(1, 6, size=(50, 12))
    expected = [cohen_kappa_score(x, y, weights="quadratic", labels=[1, 2, 3, 4, 5]) for x, y in zip(a, b, strict=True)]
    assert np.allclose(qwk_batch(a, b), expected)
    assert np.isnan(qwk_batch(np.array([[3, 3, 3]]), np.array([[3, 3, 3]]))[0])


def test_perfect_and_degenerate_agreement_never_divide_by_zero():
    assert agreement([1, 2, 3, 4, 5] * 2, [1, 2, 3, 4, 5] * 2).kappa == pytest.approx(1.0)
    empty = agreement([], [])
    assert (empty.n, empty.exact, empty.kappa, empty.spearman) == (0, None, None, None)
    assert empty.why_not("kappa") == empty.why_not("exact") == "no pairs to compare"


def test_undefined_agreement_figures_say_n_a_with_the_reason():
    """A constant rater makes kappa 0 by construction (scikit-learn returns 0.0): n/a, not "no agreement"."""
    from sklearn.metrics import cohen_kappa_score

    assert cohen_kappa_score([4, 4, 4, 4], [3, 4, 5, 4], weights="quadratic", labels=[1, 2, 3, 4, 5]) == 0
    constant_judge = agreement([4, 4, 4, 4], [3, 4, 5, 4])
    assert constant_judge.exact == 0.5 and constant_judge.kappa is None and constant_judge.spearman is None
    assert constant_judge.why_not("kappa").startswith("the judge gave every item 4: kappa is 0 by construction")
    assert constant_judge.why_not("kappa_low") == constant_judge.why_not("kappa")
    both = agreement([3, 3, 3], [3, 3, 3])
    assert both.exact == 1.0 and both.why_not("spearman").startswith("the judge gave every item 3 and the people")
    one = agreement([4], [2])
    assert one.mean_abs_diff == 2 and one.kappa is None and one.kappa_low is None
    assert one.why_not("kappa") == "one pair: kappa and Spearman need at least two"
    assert agreement([1, 2, 3, 4, 5] * 2, [1, 2, 3, 4, 5] * 2).why_not("kappa") is None


def test_the_kappa_standard_error_matches_the_spread_of_kappa_over_samples():
    from pipeline.calibration.agreement import qwk_batch, qwk_with_se

    rng = np.random.default_rng(8)
    human = rng.choice(5, size=(4000, 200), p=[0.05, 0.1, 0.15, 0.3, 0.4]) + 1
    judge = np.clip(human + rng.choice([-1, 0, 1], size=human.shape, p=[0.2, 0.6, 0.2]), 1, 5)
    kappas, ses = qwk_with_se(judge, human)
    assert np.allclose(kappas, qwk_batch(judge, human))
    assert np.median(ses) == pytest.approx(np.std(kappas), rel=0.1)


@pytest.mark.slow
def test_the_kappa_interval_covers_the_true_kappa_about_95_percent_of_the_time():
    from bench.kappa import coverage

    result = coverage(0.7, datasets=300, draws=200_000)
    assert abs(result["kappa"] - 0.7) < 0.005
    assert 0.91 <= result["coverage"] <= 0.98


@pytest.fixture
def evaluated(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(), "cal")
    return run_ids_of(kb_db, 1)


@pytest.mark.slow
def test_ratings_outside_1_to_5_are_refused_and_rating_again_updates(db, evaluated, kb_db):
    run_id = evaluated[0]
    for bad in (0, 6, 2.5, None, True, "3"):
        with pytest.raises(InputError, match="correctness must be a whole number from 1 to 5"):
            save_rating(kb_db, run_id, "ana", {"correctness": bad, "helpfulness": 3, "faithfulness": 3})
    with pytest.raises(InputError, match="annotator"):
        save_rating(kb_db, run_id, "  ", {"correctness": 3, "helpfulness": 3, "faithfulness": 3})
    with pytest.raises(InputError, match="unknown claim verdict 'maybe'"):
        save_rating(
            kb_db,
            run_id,
            "ana",
            {"correctness": 3, "helpfulness": 3, "faithfulness": 3},
            claim_verdicts={(1, 1): "maybe"},
        )
    assert ratings_for(kb_db, [run_id]) == []
    save_rating(kb_db, run_id, " ana ", {"correctness": 2, "helpfulness": 3, "faithfulness": 4})
    save_rating(kb_db, run_id, "ana", {"correctness": 5, "helpfulness": 5, "faithfulness": 5}, " changed my mind ")
    save_rating(kb_db, run_id, "ben", {"correctness": 4, "helpfulness": 4, "faithfulness": 4})
    rows = ratings_for(kb_db, [run_id])
    assert [(r["annotator"], r["correctness"], r["comment"]) for r in rows] == [
        ("ana", 5, "changed my mind"),
        ("ben", 4, None),
    ]


@pytest.mark.slow
def test_judge_pairs_and_claim_agreement(evaluated, kb_db):
    for run_id in evaluated:
        save_rating(kb_db, run_id, "ana", {"correctness": 1, "helpfulness": 1, "faithfulness": 5})
    pairs = judged_pairs(kb_db, evaluated, "correctness")
    assert len(pairs) == len(evaluated) and all(p["human"] == 1 for p in pairs)
    with kb_db.cursor() as cur:
        claims = cur.execute(
            "SELECT run_id, attempt_no, claim_no, verdict FROM claims WHERE verdict <> 'unverified' "
            "ORDER BY run_id, claim_no"
        ).fetchall()
    flips = {"supported": "unsupported", "unsupported": "supported", "contradicted": "contradicted"}
    save_rating(
        kb_db,
        claims[0][0],
        "ana",
        {"correctness": 1, "helpfulness": 1, "faithfulness": 5},
        claim_verdicts={
            (a, c): (flips[v] if i == 0 else v) for i, (r, a, c, v) in enumerate(claims) if r == claims[0][0]
        },
    )
    result = claim_agreement(kb_db, evaluated)
    same_run = [c for c in claims if c[0] == claims[0][0]]
    assert result["n"] == len(same_run)
    assert sum(map(sum, result["matrix"])) == len(same_run)


def test_relevant_corrections_leave_the_items_own_out():
    corrections = [
        Correction(1, "correctness", 10, "How many passages did RAG use?", "x", 1, 4, "wrong count"),
        Correction(2, "correctness", 11, "How many heads does the Transformer have?", "y", 2, 5, "no"),
        Correction(3, "helpfulness", 12, "How many passages did RAG use?", "z", 3, 5, "why"),
    ]
    chosen = relevant_corrections(corrections, "correctness", "How many passages were in RAG?", 3)
    assert [c.id for c in chosen] == [1, 2]
    assert [c.id for c in relevant_corrections(corrections, "correctness", "RAG passages", 3, exclude_run=10)] == [2]


@pytest.mark.slow
def test_rejudge_uses_corrections_but_never_an_items_own(fake, settings, evaluated, kb_db):
    for run_id in evaluated:
        save_rating(kb_db, run_id, "ana", {"correctness": 1, "helpfulness": 2, "faithfulness": 5})
    pairs = judged_pairs(kb_db, evaluated, "correctness")
    version = add_corrections(
        kb_db,
        [
            {
                "criterion": "correctness",
                "run_id": p["run_id"],
                "question": p["question"],
                "answer_excerpt": (p["answer"] or "")[:100],
                "human_score": 1,
                "judge_score": p["judge"],
                "why": f"MARKER-{p['run_id']}",
            }
            for p in pairs[:2]
        ],
    )
    assert current_corrections(kb_db)[0] == version == 1
    before = len(fake.requests)
    assert rejudge(settings, kb_db, evaluated) == 1
    judged = [
        r["body"]
        for r in fake.requests[before:]
        if r["body"] and "score" in ((r["body"].get("format") or {}).get("properties") or {})
    ]
    correctness_prompts = [b for b in judged if "Correctness:" in b["messages"][0]["content"]]
    for body in correctness_prompts:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        own = next(p["run_id"] for p in pairs if p["question"] in user)
        assert f"MARKER-{own}" not in system
    assert any("MARKER-" in b["messages"][0]["content"] for b in correctness_prompts)
    after = judged_pairs(kb_db, evaluated, "correctness", version=1)
    assert len(after) == len(pairs)
    with kb_db.cursor() as cur:
        used = dict(
            cur.execute("SELECT run_id, corrections_used FROM rejudged WHERE metric = 'judge_correctness'").fetchall()
        )
    first, second = pairs[0]["run_id"], pairs[1]["run_id"]
    assert used[first] == [2] and used[second] == [1]
    with kb_db.cursor() as cur:
        origins = dict(
            cur.execute("SELECT stage, count(*) FROM llm_calls WHERE origin = 'rejudge' GROUP BY stage").fetchall()
        )
    criteria = ("correctness", "helpfulness", "faithfulness", "grounding", "topicality")
    assert origins == {f"judge_{c}": len(pairs) for c in criteria}


@pytest.mark.slow
def test_a_correction_set_version_enters_the_evaluation_judge_pin(fake, settings, evaluated, kb_db):
    add_corrections(
        kb_db,
        [
            {
                "criterion": "correctness",
                "run_id": evaluated[0],
                "question": "q",
                "answer_excerpt": "a",
                "human_score": 2,
                "why": "because",
            }
        ],
    )
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "after-corrections")
    with kb_db.cursor() as cur:
        versions = dict(cur.execute("SELECT name, judge_prompt_version FROM eval_runs").fetchall())
    assert versions == {"cal": "judge-v1", "after-corrections": "judge-v1+corrections-v1"}
    with pytest.raises(InputError, match="reason"):
        add_corrections(
            kb_db,
            [
                {
                    "criterion": "correctness",
                    "run_id": 1,
                    "question": "q",
                    "answer_excerpt": "a",
                    "human_score": 2,
                    "why": " ",
                }
            ],
        )


def judge_prompts(fake, since: int, criterion: str = "Correctness:") -> list[tuple[str, str]]:
    """(system, user) of every judge request of the criterion since the index."""
    bodies = [
        r["body"]
        for r in fake.requests[since:]
        if r["body"] and "score" in ((r["body"].get("format") or {}).get("properties") or {})
    ]
    return [
        (b["messages"][0]["content"], b["messages"][1]["content"])
        for b in bodies
        if criterion in b["messages"][0]["content"]
    ]


@pytest.mark.slow
def test_leave_one_out_is_by_question_across_runs_when_rejudging_and_when_evaluating(fake, settings, evaluated, kb_db):
    """Two evaluations rated the same questions: a correction of a question in one run is never shown to the
    judge scoring that question in the other, neither when re-judging nor in a new evaluation."""
    settings = dataclasses.replace(settings, cache_enabled=False)  # every judge prompt reaches the fake
    run_evaluation(settings, kb_db, dataset(), "cal-again")
    second = run_ids_of(kb_db, 2)
    for run_id in evaluated + second:
        save_rating(kb_db, run_id, "ana", {"correctness": 1, "helpfulness": 2, "faithfulness": 5})
    first_pairs = judged_pairs(kb_db, evaluated, "correctness")
    rag = next(p for p in first_pairs if "RAG paper" in p["question"])
    add_corrections(
        kb_db,
        [
            {
                "criterion": "correctness",
                "run_id": rag["run_id"],
                "question": rag["question"],
                "answer_excerpt": (rag["answer"] or "")[:100],
                "human_score": 1,
                "judge_score": rag["judge"],
                "why": "MARKER-RAG",
            }
        ],
    )
    before = len(fake.requests)
    rejudge(settings, kb_db, second)
    prompts = judge_prompts(fake, before)
    assert len(prompts) == len(second)
    same = [system for system, user in prompts if rag["question"] in user]
    others = [system for system, user in prompts if rag["question"] not in user]
    assert len(same) == 1 and "MARKER-RAG" not in same[0]
    assert others and all("MARKER-RAG" in system for system in others)

    before = len(fake.requests)
    run_evaluation(settings, kb_db, dataset(), "with-corrections")
    prompts = judge_prompts(fake, before)
    same = [system for system, user in prompts if rag["question"] in user]
    others = [system for system, user in prompts if rag["question"] not in user]
    assert len(same) == 1 and "MARKER-RAG" not in same[0]
    assert others and all("MARKER-RAG" in system for system in others)


@pytest.mark.slow
def test_each_leave_one_out_filter_keeps_its_own_case_out_end_to_end(fake, settings, evaluated, kb_db):
    """An item comes back in another evaluation in two ways that only one filter each recognises: under its golden
    id with its question reworded (only the id says it is the same item), and under a new id with its question
    in capitals (only the normalised text says it is the same question). Neither the evaluation's judge nor
    re-judging shows either of them the correction of its own item; every other answer's judge sees both."""
    settings = dataclasses.replace(settings, cache_enabled=False)  # every judge prompt reaches the fake
    rag, bleu = ITEMS[0], ITEMS[1]
    reworded = "In the RAG paper, what was the number of passages in its Wikipedia index?"
    shouted = bleu.question.upper()
    again = [
        rag.model_copy(update={"question": reworded}),  # the same golden id
        bleu.model_copy(update={"id": "bleu-again", "question": shouted}),  # the same question
        *ITEMS[2:],
    ]
    for run_id in evaluated:
        save_rating(kb_db, run_id, "ana", {"correctness": 1, "helpfulness": 2, "faithfulness": 5})
    pairs = {p["question"]: p for p in judged_pairs(kb_db, evaluated, "correctness")}
    add_corrections(
        kb_db,
        [
            {
                "criterion": "correctness",
                "run_id": pairs[item.question]["run_id"],
                "question": item.question,
                "answer_excerpt": (pairs[item.question]["answer"] or "")[:100],
                "human_score": 1,
                "judge_score": pairs[item.question]["judge"],
                "why": marker,
            }
            for item, marker in ((rag, "MARKER-RAG"), (bleu, "MARKER-BLEU"))
        ],
    )

    def shown(prompts) -> dict[str, set[str]]:
        """question of the judged answer -> the markers its judge was shown."""
        out = {}
        for system, user in prompts:
            question = next(i.question for i in again if i.question in user)
            out[question] = {m for m in ("MARKER-RAG", "MARKER-BLEU") if m in system}
        return out

    both = {"MARKER-RAG", "MARKER-BLEU"}
    expected = {reworded: {"MARKER-BLEU"}, shouted: {"MARKER-RAG"}} | {i.question: both for i in ITEMS[2:]}
    before = len(fake.requests)
    run_evaluation(settings, kb_db, dataset(again), "again")
    assert shown(judge_prompts(fake, before)) == expected  # the evaluation's judge

    second = run_ids_of(kb_db, 2)
    for run_id in second:
        save_rating(kb_db, run_id, "ana", {"correctness": 1, "helpfulness": 2, "faithfulness": 5})
    before = len(fake.requests)
    rejudge(settings, kb_db, second)
    assert shown(judge_prompts(fake, before)) == expected  # re-judging


def test_the_same_question_is_recognised_through_case_punctuation_and_its_golden_id():
    corrections = [
        Correction(1, "correctness", 10, "How many passages did RAG use?", "x", 1, 4, "a", item_id="rag-1"),
        Correction(2, "correctness", 11, "What is a passage index?", "y", 2, 5, "b", item_id="rag-2"),
    ]
    chosen = relevant_corrections(corrections, "correctness", "  how many PASSAGES did rag use ", 3)
    assert [c.id for c in chosen] == [2]
    assert [c.id for c in relevant_corrections(corrections, "correctness", "RAG passages", 3, item_id="rag-2")] == [1]


def test_the_kappa_interval_is_calibrated_wider_where_a_small_skewed_sample_needs_it(monkeypatch):
    import numpy as np

    import pipeline.calibration.agreement as agreement_module

    rng = np.random.default_rng(3)
    judge = rng.choice([1, 2, 3, 4, 5], size=40, p=[0.02, 0.04, 0.09, 0.35, 0.50])
    human = np.clip(judge + rng.choice([-1, 0, 1], size=40, p=[0.25, 0.5, 0.25]), 1, 5)
    calibrated = agreement_module.qwk_interval(judge, human, seed=0)
    monkeypatch.setattr(agreement_module, "CALIBRATION_LEVELS", np.array([0.95]))
    plain = agreement_module.qwk_interval(judge, human, seed=0)
    assert calibrated[0] < plain[0] and calibrated[1] >= plain[1]
    kappa = agreement_module.qwk(judge, human)
    assert calibrated[0] < kappa < calibrated[1]
