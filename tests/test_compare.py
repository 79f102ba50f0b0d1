"""Comparing two evaluation runs: tiles with B − A, the item diff, judge pins, datasets, the default pair."""

import dataclasses
import json

import pytest
from streamlit.proto.Metric_pb2 import Metric as MetricProto
from test_app import fresh_streamlit_caches  # noqa: F401 - the autouse fixture: no cached store across tests
from test_regression import store_run

from pipeline.errors import InputError
from pipeline.evaluation.compare_runs import answers, compare_runs, default_pair
from pipeline.formatting import fmt_change, fmt_count, fmt_ms
from store import alerts as alert_store

A_FAITH = [1.0, 0.8, 0.5, 1.0, 0.9, 0.7]
B_FAITH = [0.5, 0.8, 0.75, 1.0, 0.9, 0.7]
A_JUDGE = [5.0, 4.0, 3.0, 5.0, 4.0, 4.0]
B_JUDGE = [5.0, 2.0, 3.0, 5.0, 5.0, 4.0]


def tiles_of(comparison):
    return {t.metric: t for t in comparison.tiles}


def test_known_scores_give_the_expected_deltas_and_item_diff(db, settings):
    store_run(db, "before", {"faithfulness": A_FAITH, "judge_correctness": A_JUDGE})
    store_run(db, "after", {"faithfulness": B_FAITH, "judge_correctness": B_JUDGE})
    result = compare_runs(settings, db, "before", "after")
    assert result.same_pin and result.same_dataset and result.shared == [f"i{k}" for k in range(6)]
    tiles = tiles_of(result)
    assert list(tiles) == ["faithfulness", "judge_correctness"]  # registry order, only what was scored
    faith, judge = tiles["faithfulness"], tiles["judge_correctness"]
    assert faith.a_mean == pytest.approx(sum(A_FAITH) / 6) and faith.b_mean == pytest.approx(sum(B_FAITH) / 6)
    assert faith.delta == pytest.approx((sum(B_FAITH) - sum(A_FAITH)) / 6) == pytest.approx(-0.25 / 6)
    assert (faith.a_n, faith.b_n) == (6, 6) and faith.higher_is_better and faith.scale == (0.0, 1.0)
    assert judge.delta == pytest.approx(-1 / 6) and judge.scale == (1.0, 5.0) and judge.comparable
    # the paired change is the regression check's own test over the six shared items
    assert faith.paired.n == 6 and faith.paired.ci_low < faith.paired.delta < faith.paired.ci_high
    worse = result.changed("faithfulness", worse=True)
    assert [(c.item_id, c.a, c.b, c.delta) for c in worse] == [("i0", 1.0, 0.5, -0.5)]
    assert [(c.item_id, c.delta) for c in result.changed("faithfulness", worse=False)] == [("i2", 0.25)]
    assert [(c.item_id, c.delta) for c in result.changed("judge_correctness", worse=True)] == [("i1", -2.0)]
    assert [(c.item_id, c.delta) for c in result.changed("judge_correctness", worse=False)] == [("i4", 1.0)]
    # each side's run of the item, for the links (store_run numbers them 1000 × evaluation id + k)
    assert (worse[0].a_run_id, worse[0].b_run_id) == (1000, 2000)


def test_judge_scores_under_different_pins_are_not_compared(db, settings):
    store_run(db, "before", {"faithfulness": A_FAITH, "judge_correctness": A_JUDGE})
    store_run(db, "after", {"faithfulness": B_FAITH, "judge_correctness": B_JUDGE}, judge_digest="other")
    result = compare_runs(settings, db, "before", "after")
    assert not result.same_pin
    judge = tiles_of(result)["judge_correctness"]
    assert not judge.comparable and judge.delta is None and judge.paired is None
    assert judge.a_mean == pytest.approx(sum(A_JUDGE) / 6) and judge.b_n == 6  # each side still shown
    assert not [c for c in result.changes if c.metric == "judge_correctness"]
    assert tiles_of(result)["faithfulness"].delta == pytest.approx(-0.25 / 6)  # other metrics still are


def test_runs_over_different_datasets_are_marked_and_matched_by_golden_id(db, settings):
    store_run(db, "before", {"faithfulness": A_FAITH})
    store_run(db, "after", {"faithfulness": B_FAITH[:4]}, dataset_hash="h2")
    result = compare_runs(settings, db, "before", "after")
    assert not result.same_dataset and (result.a.dataset_hash, result.b.dataset_hash) == ("h", "h2")
    assert result.shared == ["i0", "i1", "i2", "i3"] and result.only_a == ["i4", "i5"] and result.only_b == []
    faith = tiles_of(result)["faithfulness"]
    assert (faith.a_n, faith.b_n) == (6, 4) and faith.paired.n == 4
    assert [c.item_id for c in result.changes] == ["i0", "i2"]


def test_the_same_content_under_another_size_is_another_dataset(db, settings):
    store_run(db, "before", {"faithfulness": A_FAITH})
    store_run(db, "after", {"faithfulness": A_FAITH[:5]})
    assert not compare_runs(settings, db, "before", "after").same_dataset


def test_unknown_names_and_one_run_twice_are_explained(db, settings):
    store_run(db, "before", {"faithfulness": A_FAITH})
    with pytest.raises(InputError, match=r"no evaluation named '<b>nope</b>' \(run B\)"):
        compare_runs(settings, db, "before", "<b>nope</b>")
    with pytest.raises(InputError, match="both 'before'"):
        compare_runs(settings, db, "before", "before")


def test_the_default_pair_is_the_newest_run_and_its_baseline(db):
    assert default_pair(db)[:2] == (None, None)
    first = store_run(db, "first", {"faithfulness": A_FAITH})
    assert default_pair(db)[:2] == (None, "first")
    store_run(db, "second", {"faithfulness": A_FAITH})
    store_run(db, "other-judge", {"faithfulness": A_FAITH}, judge_digest="d2")
    store_run(db, "third", {"faithfulness": A_FAITH})
    assert default_pair(db)[:2] == ("second", "third")  # the newest comparable clean run
    alert_store.pin_baseline(db, "golden.jsonl", first)
    assert default_pair(db)[:2] == ("first", "third")


def test_without_a_baseline_the_default_a_is_the_run_before_the_newest(db):
    store_run(db, "first", {"faithfulness": A_FAITH})
    store_run(db, "other-judge", {"faithfulness": A_FAITH}, judge_digest="d2")
    a, b, why = default_pair(db)
    assert (a, b) == ("first", "other-judge") and "has no baseline" in why


RAG_QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
WRONG = "The RAG paper's Wikipedia index held 42 million passages [1]."


def two_real_runs(fake, settings, db) -> None:
    """'before' and 'after' over the same two golden items, answered through the fake Ollama; in 'after' the
    generator answers the RAG question with a number no source holds, so that item gets worse."""
    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, db, dataset(ITEMS[:2]), "before", concurrency=1)
    fake.enqueue(
        WRONG,
        model="llama3.2",
        match=lambda body: not body.get("format") and RAG_QUESTION in json.dumps(body.get("messages")),
    )
    changed = dataclasses.replace(settings, cache_enabled=False, max_retries=0, when_unverified="show_best")
    run_evaluation(changed, db, dataset(ITEMS[:2]), "after", concurrency=1)


@pytest.mark.slow
def test_two_real_runs_show_the_worse_item_with_both_answers_and_claims(fake, settings, kb_db):
    two_real_runs(fake, settings, kb_db)
    result = compare_runs(settings, kb_db, "before", "after")
    worse = result.changed("faithfulness", worse=True)
    assert [(c.item_id, c.a, c.b) for c in worse] == [("rag-passages", 1.0, 0.0)]
    before, after = answers(kb_db, worse[0])
    assert "21 million" in before.answer and after.answer == WRONG
    assert {c.verdict for c in before.final_claims} == {"supported"}
    assert [c.verdict for c in after.final_claims] == ["unsupported"] and "42" in after.final_claims[0].text


def open_compare(**params):
    from test_app import open_page

    return open_page("pages/compare.py", **params)


@pytest.mark.slow
def test_the_compare_page_defaults_to_the_newest_run_and_its_baseline(fake, settings, kb_db):
    two_real_runs(fake, settings, kb_db)
    at = open_compare()
    assert [s.value for s in at.selectbox[:2]] == ["before", "after"]
    tiles = {m.label: m for m in at.metric}
    assert tiles["faithfulness"].value == "0.50" and tiles["faithfulness"].delta == "-0.50"
    assert MetricProto.MetricColor.Name(tiles["faithfulness"].color) == "RED"  # a drop, and higher is better
    assert any(c.value.startswith("A 1.00 (n=2) → B 0.50 (n=2)") for c in at.caption)
    assert next(r for r in at.radio if r.label == "Show").value == "got worse (1)"
    table = next(d.value for d in at.dataframe if "B − A" in d.value.columns)
    assert list(table["item"]) == ["rag-passages"] and table["run A"].iloc[0].startswith("/runs?run_id=")
    assert not at.warning  # same dataset, same judge pin
    # latency and tokens with B − A, as the pipeline pairs them; no cost without prices
    result = compare_runs(settings, kb_db, "before", "after")
    a, b = result.a.costs.usage, result.b.costs.usage
    tokens = tiles["tokens"]
    assert tokens.value == fmt_count(b.tokens) and tokens.delta == fmt_change(b.tokens - a.tokens, fmt_count)
    assert tiles["latency p50"].value == fmt_ms(b.latency_ms) and "cost" not in tiles
    assert not [d for d in at.dataframe if "tokens B − A" in d.value.columns]  # drawn when its tab is chosen
    at.session_state["compare_tab"] = "Item by item"
    at.run()
    assert not at.exception, at.exception
    items = next(d.value for d in at.dataframe if "tokens B − A" in d.value.columns)
    assert list(items["item"]) == ["rag-passages", "transformer-bleu"]  # the item that got worse first
    assert items["tokens B − A"].iloc[0] == fmt_change(result.pairs[0].usage.tokens, fmt_count)
    assert not [r for r in at.radio if r.label == "Show"]  # the other tab is not drawn
    # the two answers' claims with their verdicts, as the drilldown shows them
    text = "\n".join(m.value for m in at.markdown)
    assert "42 million passages" in text and "21 million passages" in text
    claims = [e.label for e in at.expander if e.label.startswith("Claim ")]
    assert any("— supported" in c for c in claims) and any("42 million" in c and "— unsupported" in c for c in claims)


@pytest.mark.slow
def test_the_compare_page_explains_unknown_names_as_text_and_marks_other_pins(db):
    store_run(db, "before", {"faithfulness": A_FAITH, "judge_correctness": A_JUDGE})
    store_run(
        db, "after", {"faithfulness": B_FAITH, "judge_correctness": B_JUDGE}, judge_digest="other", dataset_hash="h2"
    )
    at = open_compare(a="[x](http://evil.example)", b="after")
    assert at.error[0].value.startswith("There is no evaluation named \\'\\[x\\]\\(http")
    assert [s.value for s in at.selectbox[:2]] == ["before", "after"]
    judge = next(m for m in at.metric if m.label == "judge correctness")
    assert judge.delta == "not comparable: judge pin differs"
    assert any("Judge pins differ" in w.value for w in at.warning)
    datasets = next(w.value for w in at.warning if w.value.startswith("**Different datasets.**"))
    assert "6 in both, 0 only in A, 0 only in B" in datasets
    assert next(m for m in at.metric if m.label == "faithfulness").delta == "-0.04"


def test_a_metric_where_lower_is_better_gets_worse_when_it_rises(db, settings):
    from pipeline.evaluation.registry import register_metric, unregister_metric

    register_metric("wrong_share", component="generator", higher_is_better=False)(lambda inputs: None)
    try:
        store_run(db, "before", {"wrong_share": [0.1, 0.5, 0.2]})
        store_run(db, "after", {"wrong_share": [0.4, 0.5, 0.0]})
        result = compare_runs(settings, db, "before", "after")
        assert not tiles_of(result)["wrong_share"].higher_is_better
        assert [c.item_id for c in result.changed("wrong_share", worse=True)] == ["i0"]
        assert [c.item_id for c in result.changed("wrong_share", worse=False)] == ["i2"]
    finally:
        unregister_metric("wrong_share")


def test_a_judge_criterion_under_another_prompt_version_of_its_own_is_not_compared(db, settings):
    store_run(
        db,
        "before",
        {"judge_grounding": A_JUDGE, "judge_correctness": A_JUDGE},
        config={"judge_prompt_versions": {"grounding": "judge-grounding-v1"}},
    )
    store_run(
        db,
        "after",
        {"judge_grounding": B_JUDGE, "judge_correctness": B_JUDGE},
        config={"judge_prompt_versions": {"grounding": "judge-grounding-v2"}},
    )
    result = compare_runs(settings, db, "before", "after")
    assert result.same_pin
    tiles = tiles_of(result)
    assert tiles["judge_grounding"].not_comparable == "not comparable: its judge prompt version differs"
    assert tiles["judge_grounding"].delta is None
    assert tiles["judge_correctness"].comparable and tiles["judge_correctness"].delta == pytest.approx(-1 / 6)
    assert {c.metric for c in result.changes} == {"judge_correctness"}


@pytest.mark.slow
def test_compare_lists_the_settings_two_runs_differ_in_such_as_the_context_budget(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "whole", concurrency=1)
    tight = dataclasses.replace(settings, context_budget_tokens=60)
    run_evaluation(tight, kb_db, dataset(ITEMS[:2]), "budget 60", concurrency=1)
    assert compare_runs(settings, kb_db, "whole", "budget 60").settings_diff == {
        "context_budget_tokens": [settings.context_budget_tokens, 60]
    }
    at = open_compare(a="whole", b="budget 60")
    (differ,) = [e for e in at.expander if e.label == "Settings that differ (1)"]
    frame = next(d.value for d in at.dataframe if "setting" in d.value.columns)
    assert frame.to_dict("records") == [{"setting": "context budget tokens", "A": "600", "B": "60"}]
    assert "faithfulness" in {m.label for m in at.metric}  # its effect, metric by metric


def test_a_side_answered_from_the_cache_shows_the_latencies_first_measured_and_says_so(fake, settings, kb_db):
    from test_evaluation import ITEMS, dataset

    from pipeline.evaluation.runner import run_evaluation

    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "measured")
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "replayed")
    result = compare_runs(settings, kb_db, "measured", "replayed")
    assert result.b.latency["p50_ms"] == result.a.latency["p50_ms"] > 0
    assert result.b.latency["p95_ms"] == result.a.latency["p95_ms"]
    assert result.a.latency["replayed"] < 0.5 and result.b.latency["replayed"] == 1  # A: only what its items share
    assert result.b.latency_text.endswith("100% of calls replayed from the cache")


def seed_answers(db, eval_run_id, latencies_ms, prompt_tokens, completion_tokens, statuses=None):
    """The question runs of store_run's items (ids 1000 × evaluation id + k), each with its latency and two model
    calls whose tokens add up to the given ones (one of them a cache hit: it still carries its original tokens)."""
    with db.cursor() as cur:
        for k, latency in enumerate(latencies_ms):
            run_id = 1000 * eval_run_id + k
            status = (statuses or ["accepted"] * len(latencies_ms))[k]
            cur.execute(
                "INSERT INTO runs (id, kind, question, status, started_at, latency_ms) "
                "VALUES (?, 'eval', 'q', ?, now(), ?)",
                [run_id, status, latency],
            )
            for share, hit in ((0.75, False), (0.25, True)):
                cur.execute(
                    "INSERT INTO llm_calls (run_id, stage, model, prompt_tokens, completion_tokens, latency_ms, "
                    "cache_hit, started_at) VALUES (?, 'generate', 'llama3.2', ?, ?, ?, ?, now())",
                    [run_id, int(prompt_tokens[k] * share), int(completion_tokens[k] * share), latency * share, hit],
                )


def test_latency_token_and_cost_deltas_per_run_and_per_item_from_a_seeded_store(db, settings):
    priced = dataclasses.replace(settings, price_per_1k_prompt_tokens=0.002, price_per_1k_completion_tokens=0.004)
    a_id = store_run(db, "before", {"faithfulness": [1.0, 0.8, 0.5]})
    b_id = store_run(db, "after", {"faithfulness": [0.5, 0.8, 0.75]})
    seed_answers(db, a_id, [1000, 2000, 3000], [400, 800, 1200], [40, 80, 120])
    seed_answers(db, b_id, [1600, 1000, 3000], [800, 400, 1200], [40, 40, 0], ["flagged", "accepted", "abstained"])
    result = compare_runs(priced, db, "before", "after")
    # per run: latency p50 and p95 over the items, tokens and cost of all their model calls
    a, b = result.a.costs, result.b.costs
    assert (a.usage.latency_ms, b.usage.latency_ms) == (2000, 1600) and a.items == b.items == 3
    assert (a.usage.prompt_tokens, a.usage.completion_tokens, b.usage.tokens) == (2400, 240, 2480)
    assert a.usage.cost == pytest.approx((2400 * 0.002 + 240 * 0.004) / 1000)
    assert b.usage.cost == pytest.approx((2400 * 0.002 + 80 * 0.004) / 1000)
    assert a.p95_ms == pytest.approx(2900) and b.p95_ms == pytest.approx(2860)
    # per item, paired by golden id: the item that got worse first, then the better one, then the unchanged one
    pairs = result.pairs
    assert [(p.item_id, p.a_status, p.b_status) for p in pairs] == [
        ("i0", "accepted", "flagged"),
        ("i2", "accepted", "abstained"),
        ("i1", "accepted", "accepted"),
    ]
    i0, i2, i1 = (p.usage for p in pairs)
    assert (i0.latency_ms, i0.tokens) == (600, 400) and i0.cost == pytest.approx(400 * 0.002 / 1000)
    assert (i1.latency_ms, i1.tokens) == (-1000, -440)
    assert i1.cost == pytest.approx(-(400 * 0.002 + 40 * 0.004) / 1000)
    assert (i2.latency_ms, i2.tokens, i2.b.completion_tokens) == (0, -120, 0)
    assert (pairs[0].a_run_id, pairs[0].b_run_id) == (1000 * a_id, 1000 * b_id)
    # the items' figures add up to the run's
    assert sum(p.usage.b.tokens for p in pairs) == b.usage.tokens
    # without prices: tokens and latency, no cost
    unpriced = compare_runs(settings, db, "before", "after")
    assert unpriced.a.costs.usage.cost is None and unpriced.pairs[0].usage.cost is None
    assert unpriced.pairs[0].usage.tokens == 400


def test_item_by_item_opens_on_the_first_item_of_the_diff_as_chosen_in_the_other_tab(db, settings):
    from pages.views.compare import preferred_change

    store_run(db, "before", {"faithfulness": [0.1, 0.5, 0.9], "judge_correctness": [2, 3, 3]})
    store_run(db, "after", {"faithfulness": [0.4, 0.5, 0.2], "judge_correctness": [2, 3, 5]})
    result = compare_runs(settings, db, "before", "after")
    assert preferred_change(result, {}).item_id == "i2"  # the first metric's items that got worse
    assert preferred_change(result, {"compare_way": "got better (1)"}).item_id == "i0"
    better = preferred_change(result, {"compare_metric": "judge_correctness", "compare_way": "got better (1)"})
    assert (better.item_id, better.metric) == ("i2", "judge_correctness")
    assert preferred_change(result, {"compare_metric": "judge_correctness"}) is None  # none got worse on it
    assert preferred_change(result, {"compare_metric": "gone"}).metric == "faithfulness"  # not in these runs
