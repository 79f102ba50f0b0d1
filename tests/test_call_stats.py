"""Model-call analytics: per-stage counts, tokens, percentiles and cost equal what is stored."""

import dataclasses
from datetime import datetime

import numpy as np
import pytest
from test_app import fresh_streamlit_caches  # noqa: F401 - the autouse fixture: no cached store across tests
from test_evaluation import ITEMS, dataset

from pages.views.markup import stage_label
from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.evaluation.runner import run_evaluation
from pipeline.history.call_stats import evaluation_call_stats, run_call_stats
from store import llm_log
from store.records import LLMCallRecord


def call(stage, latency_ms, prompt_tokens=100, completion_tokens=10, cache_hit=False, error=None, eval_run_id=None):
    return LLMCallRecord(
        stage,
        "llama3.2",
        "d",
        "h",
        prompt_tokens,
        completion_tokens,
        latency_ms,
        cache_hit,
        error,
        datetime.now(),
        eval_run_id=eval_run_id,
    )


def test_per_stage_counts_tokens_percentiles_and_model_time_of_a_run(db, settings):
    generate = [120.0, 80.0, 400.0, 200.0, 1000.0, 400.0]  # the last replayed: the latency first measured
    calls = [call("generate", ms) for ms in generate[:-1]]
    calls += [call("generate", 400.0, cache_hit=True), call("verify", 30.0, 50, 1), call("verify", 50.0, 50, 1)]
    calls += [call("verify", 2.0, None, None, error="timed out")]
    llm_log.save_calls(db, calls, run_id=7)
    llm_log.save_calls(db, [call("generate", 9999.0)], run_id=8)  # another run's call is not counted

    stats = run_call_stats(settings, db, 7)
    by_stage = {s.stage: s for s in stats.stages}
    assert [s.stage for s in stats.stages] == ["generate", "verify"]  # most calls first
    gen = by_stage["generate"]
    assert (gen.calls, gen.cache_hits, gen.errors) == (6, 1, 0)
    assert (gen.prompt_tokens, gen.completion_tokens) == (600, 60)  # the cached call carries its reply's tokens
    # percentiles and model time over every call at its original cost (the replayed one at the latency first
    # measured), interpolated like numpy's default; the share replayed beside them
    assert gen.p50_ms == pytest.approx(np.percentile(generate, 50)) == pytest.approx(300.0)
    assert gen.p95_ms == pytest.approx(np.percentile(generate, 95)) == pytest.approx(850.0)
    assert gen.model_s == pytest.approx(sum(generate) / 1000) and gen.replayed == pytest.approx(1 / 6)
    verify = by_stage["verify"]
    assert (verify.calls, verify.errors, verify.prompt_tokens, verify.completion_tokens) == (3, 1, 100, 2)
    assert verify.p50_ms == pytest.approx(30.0)
    total = stats.total
    assert (total.stage, total.calls, total.cache_hits, total.errors) == ("all stages", 9, 1, 1)
    assert total.model_s == pytest.approx((sum(generate) + 30 + 50 + 2) / 1000)
    assert total.p50_ms == pytest.approx(np.percentile([*generate, 30, 50, 2], 50))
    assert not stats.priced and total.cost is None and gen.cost is None


def test_a_price_gives_the_original_cost_of_every_call_replayed_ones_included(db, settings):
    llm_log.save_calls(db, [call("judge_correctness", 500.0, 1000, 200)] * 3, run_id=1)
    llm_log.save_calls(db, [call("judge_correctness", 500.0, 1000, 200, cache_hit=True)], run_id=1)
    priced = dataclasses.replace(settings, price_per_1k_prompt_tokens=0.5, price_per_1k_completion_tokens=2.0)
    stats = run_call_stats(priced, db, 1)
    assert stats.priced
    # the replayed call costs what computing its reply cost: the figure is of original costs, 25% replayed
    assert stats.total.cost == pytest.approx(4 * (1.0 * 0.5 + 0.2 * 2.0)) and stats.total.replayed == 0.25
    assert stats.stages[0].cost == stats.total.cost and stats.total.prompt_tokens == 4000


def test_a_run_without_calls_has_no_stats(db, settings):
    stats = run_call_stats(settings, db, 12345)
    assert stats.stages == [] and stats.total is None


def test_prices_are_settings_and_must_not_be_negative(monkeypatch, fake):
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_PROMPT_TOKENS", "0.15")
    assert load_settings().price_per_1k_prompt_tokens == 0.15
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_COMPLETION_TOKENS", "-1")
    with pytest.raises(ConfigError, match="price_per_1k_completion_tokens"):
        load_settings()


@pytest.mark.slow
def test_an_evaluation_counts_its_items_runs_and_judge_calls(fake, settings, kb_db):
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "analytics", concurrency=1)
    run_evaluation(settings, kb_db, dataset(ITEMS[2:3]), "other", concurrency=1)  # not counted
    stored = llm_log.calls_for_eval_run(kb_db, outcome.eval_run_id)
    stats = evaluation_call_stats(settings, kb_db, outcome.eval_run_id)
    by_stage = {s.stage: s for s in stats.stages}
    assert stats.total.calls == len(stored) > 20
    for stage in {c["stage"] for c in stored}:
        mine = [c for c in stored if c["stage"] == stage]
        latencies = [c["latency_ms"] for c in mine]  # a replayed call's: the latency first measured
        assert by_stage[stage].calls == len(mine)
        assert by_stage[stage].cache_hits == sum(bool(c["cache_hit"]) for c in mine)
        assert by_stage[stage].prompt_tokens == sum(c["prompt_tokens"] or 0 for c in mine)
        assert by_stage[stage].p95_ms == pytest.approx(np.percentile(latencies, 95))
    # the judge's calls are there, three criteria for each of the two items
    assert {"judge_correctness", "judge_helpfulness", "judge_faithfulness"} <= set(by_stage)
    assert by_stage["judge_correctness"].calls == 2


@pytest.mark.slow
def test_a_retried_items_earlier_attempt_still_counts_for_its_evaluation(fake, settings, kb_db):
    """Retrying an item replaces its question run; the calls the failed attempt made were still made for the
    evaluation (they keep its id) and count in its analytics."""
    from pipeline.models.llm import forget_digests

    fake.remove_model("bespoke-minicheck")
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "flaky")
    fake.add_model("bespoke-minicheck")
    forget_digests()
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "flaky")
    stored = llm_log.calls_for_eval_run(kb_db, outcome.eval_run_id)
    orphaned = [c for c in stored if c["run_id"] is None]
    assert orphaned and {c["stage"] for c in orphaned} >= {"embed_query", "generate"}
    total = evaluation_call_stats(settings, kb_db, outcome.eval_run_id).total
    assert total.calls == len(stored) > len(orphaned)


def stage_table(at):
    return next(d.value for d in at.dataframe if "p95_ms" in d.value.columns)


@pytest.mark.slow
def test_the_evaluate_report_and_the_drilldown_show_the_analytics(fake, settings, kb_db, monkeypatch):
    from test_app import app, open_runs_page

    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "shown", concurrency=1)
    at = app("pages/evaluate.py")
    table = stage_table(at)
    stats = evaluation_call_stats(settings, kb_db, outcome.eval_run_id)
    assert list(table["stage"]) == [stage_label(s.stage) for s in stats.stages] + ["all stages"]  # in words
    assert table["calls"].iloc[-1] == stats.total.calls and "cost" not in table.columns
    assert any("cost estimate" in c.value for c in at.caption)

    run_id = llm_log.calls_for_eval_run(kb_db, outcome.eval_run_id)[-1]["run_id"]
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_PROMPT_TOKENS", "1")
    import streamlit as st

    st.cache_resource.clear()  # the settings are read once per process
    at = open_runs_page(str(run_id), tab="Calls")
    table = stage_table(at)
    run_stats = run_call_stats(load_settings(), kb_db, run_id)
    assert table["calls"].iloc[-1] == run_stats.total.calls == len(llm_log.calls_for_run(kb_db, run_id))
    assert table["cost"].iloc[-1] == pytest.approx(run_stats.total.cost) and run_stats.total.cost > 0
