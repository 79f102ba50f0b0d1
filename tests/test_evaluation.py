"""The evaluation runner: results, concurrency, resume after a kill, timeouts, failures."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading

import duckdb
import pytest
from conftest import ROOT
from fake_ollama import GENERATION_PATHS

from pipeline.errors import InputError
from pipeline.evaluation.dataset import Dataset, GoldenItem, load_dataset
from pipeline.evaluation.registry import metric_names
from pipeline.evaluation.runner import report, run_evaluation
from store import evals

ITEMS = [
    GoldenItem(
        id="rag-passages",
        question="How many passages were in the Wikipedia index of the RAG paper?",
        reference="The Wikipedia index had 21 million passages.",
        tags=["rag", "numeric"],
    ),
    GoldenItem(
        id="transformer-bleu",
        question="What BLEU did the big Transformer score on WMT 2014 English-German?",
        reference="The big Transformer scored 28.4 BLEU on WMT 2014 English-German.",
        tags=["transformer"],
    ),
    GoldenItem(id="peru", question="What is the capital city of Peru?", tags=["unanswerable"]),
    GoldenItem(
        id="rrf",
        question="Which constant k did the Reciprocal Rank Fusion paper use?",
        reference="The RRF paper used the constant k = 60.",
        tags=["rag"],
    ),
]


def dataset(items=ITEMS):
    return Dataset("golden-test.jsonl", list(items), [], "hash")


@pytest.mark.slow
def test_an_evaluation_scores_every_item_and_summarises(fake, settings, kb_db, executor):
    outcome = run_evaluation(settings, kb_db, dataset(), "first", concurrency=2, executor=executor)
    assert outcome.status == "finished" and outcome.progress.done == 4 and outcome.progress.failed == 0
    result = report(settings, kb_db, "first")
    by_metric = {m["metric"]: m for m in result.metrics}
    assert (
        set(by_metric)
        == set(metric_names())
        >= {  # every registered metric, the built-ins among them
            "faithfulness",
            "answer_relevancy",
            "context_precision",
            "context_recall",
            "judge_correctness",
            "judge_helpfulness",
            "judge_faithfulness",
            "judge_grounding",
            "judge_topicality",
            "judge_question_rewrite",
        }
    )
    # single questions: no earlier turn, so nothing was rewritten
    assert by_metric["judge_question_rewrite"]["not_applicable"] == 4 and by_metric["judge_question_rewrite"]["n"] == 0
    assert by_metric["context_recall"]["n"] == 3 and by_metric["context_recall"]["not_applicable"] == 1
    assert by_metric["judge_correctness"]["n"] == 4
    assert result.judge_total == 20 and result.judge_invalid == 0  # 4 items x 5 criteria
    items = {r["item_id"]: r for r in result.items}
    assert items["peru"]["run_status"] == "abstained" and items["rag-passages"]["run_status"] == "accepted"
    assert items["rag-passages"]["context_recall"] == 1.0
    assert result.usage["prompt_tokens"] > 0 and result.usage["calls"] > 20
    assert result.eval_run.wall_s > 0 and result.diagnosis.sentence
    assert result.eval_run.judge_model == "llama3.2" and result.eval_run.judge_prompt_version == "judge-v1"


@pytest.mark.slow
def test_rerunning_the_same_name_skips_finished_items_and_costs_nothing(fake, settings, kb_db, executor):
    run_evaluation(settings, kb_db, dataset(ITEMS[:2]), "resume-me", executor=executor)
    before = len(fake.requests)
    outcome = run_evaluation(settings, kb_db, dataset(), "resume-me", executor=executor)
    assert outcome.progress.skipped == 2 and outcome.progress.done == 4
    chats = [r for r in fake.requests[before:] if r["path"] == "/api/chat"]
    assert chats and not any("Wikipedia index of the RAG paper" in json.dumps(r["body"]) for r in chats)
    assert set(evals.item_statuses(kb_db, outcome.eval_run_id).values()) == {"done"}
    assert len(evals.item_statuses(kb_db, outcome.eval_run_id)) == 4


@pytest.mark.slow
def test_an_unchanged_item_is_answered_from_the_cache_under_a_new_name(fake, settings, kb_db):
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "one")
    before = len([r for r in fake.requests if r["path"] == "/api/chat"])
    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "two")
    assert len([r for r in fake.requests if r["path"] == "/api/chat"]) == before
    assert report(settings, kb_db, "two").usage["cache_hits"] == report(settings, kb_db, "two").usage["calls"]


@pytest.mark.slow
def test_a_second_evaluation_of_the_same_set_reports_the_first_ones_latencies_and_says_it_was_replayed(
    fake, settings, kb_db
):
    from pipeline.evaluation.runner import what_it_measured
    from pipeline.regression.trends import run_costs
    from store import sweeps

    fake.set_latency(0.002, seconds_per_prompt_token=0.0002)  # model time dominates a question's latency
    first = run_evaluation(settings, kb_db, dataset(ITEMS[:3]), "first")
    second = run_evaluation(settings, kb_db, dataset(ITEMS[:3]), "second")
    latencies = [sweeps.question_latencies(kb_db, o.eval_run_id) for o in (first, second)]
    assert len(latencies[0]) == 3 and min(latencies[0]) > 50  # measured while the fake took its time
    assert latencies[1] == latencies[0]  # the replayed questions report what they cost when first computed
    costs = {row["name"]: row for row in run_costs(settings, kb_db)}
    for key in ("latency_ms", "p50_latency_ms", "p95_latency_ms", "tokens"):
        assert costs["second"][key] == pytest.approx(costs["first"][key])  # Trends draws no improvement
    # the first evaluation replays only what its own items share (a question's embedding, a repeated check)
    assert costs["first"]["replayed"] < 0.5 and costs["second"]["replayed"] == 1
    again = report(settings, kb_db, "second")
    assert again.replayed_share == 1 and report(settings, kb_db, "first").replayed_share < 0.5
    assert what_it_measured(again).startswith(f"100% of {again.usage['calls']:,} LLM calls replayed from the cache")
    assert "1 of 3 items abstained (33%)" in what_it_measured(again)  # the capital of Peru is not in the KB
    with kb_db.cursor() as cur:
        replays = cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE r.replayed_from IS NOT NULL AND r.n_replayed = r.n_calls) "
            "FROM eval_items i JOIN runs r ON r.id = i.run_id WHERE i.eval_run_id = ?",
            [second.eval_run_id],
        ).fetchone()
    assert replays == (3, 3)  # each run says it was answered wholly from the cache, and when first computed


@pytest.mark.slow
def test_a_changed_configuration_cannot_resume_under_the_same_name(fake, settings, kb_db, executor):
    import dataclasses

    run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "pinned", executor=executor)
    with pytest.raises(InputError) as caught:
        run_evaluation(dataclasses.replace(settings, top_k=3), kb_db, dataset(ITEMS[:1]), "pinned", executor=executor)
    assert "different configuration (top_k)" in caught.value.message


def items_being_answered(fake, items=ITEMS) -> set[str]:
    """The items with a chat/generate request that the fake has started to answer and not finished (so counted in
    fake.in_flight; a request only received is not yet)."""
    bodies = [
        json.dumps(r["body"])
        for r in list(fake.requests)
        if r["path"] in GENERATION_PATHS and "started" in r and "done" not in r
    ]
    return {i.id for i in items if any(json.dumps(i.question)[1:-1] in b for b in bodies)}


@pytest.mark.slow
def test_items_run_concurrently(fake, settings, kb_db):
    # every model reply waits until all four items are being answered at once: only items that run at once get there
    gate = fake.hold(until=lambda f: len(items_being_answered(f)) == 4)
    try:
        outcome = run_evaluation(settings, kb_db, dataset(), "overlap", concurrency=4)
        opened = gate.released  # by `until` (a timeout counts in timed_out), not by the release below
    finally:
        gate.release()
    assert opened and gate.timed_out == 0
    assert outcome.progress.done == 4 and fake.max_in_flight >= 4


@pytest.mark.slow
def test_a_slow_item_times_out_and_the_others_finish(fake, settings, kb_db, executor):
    fake.enqueue("The RAG index held 21 million passages [1].", match=lambda b: not b.get("format"))
    fake.inject("timeout", model="llama3.2", path="/api/chat")
    # The slow call is answered 6 s after it came in, so after its item's 5 s (counted from before the call)
    # whatever the load: the order is by construction. It must end at all: a thread that timed out keeps its
    # pool slot until then. The other item has 5 s, and no single request times out before its item does.
    fake.fault_delay_s = 6
    settings = dataclasses.replace(settings, request_timeout_s=120)
    outcome = run_evaluation(
        settings, kb_db, dataset(ITEMS[:2]), "slow", concurrency=1, item_timeout_s=5, executor=executor
    )
    items = {r["item_id"]: r for r in report(settings, kb_db, "slow").items}
    assert items["rag-passages"]["item_status"] == "timeout" and "timed out after 5 s" in items["rag-passages"]["error"]
    assert items["transformer-bleu"]["item_status"] == "done"
    assert outcome.progress.failed == 1


@pytest.mark.slow
def test_a_failed_item_is_recorded_and_retried_on_resume(fake, settings, kb_db, executor):
    fake.remove_model("bespoke-minicheck")
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "flaky", executor=executor)
    row = report(settings, kb_db, "flaky").items[0]
    assert row["item_status"] == "failed" and "bespoke-minicheck is not pulled" in row["error"]
    assert outcome.progress.failed == 1
    fake.add_model("bespoke-minicheck")
    from pipeline.models.llm import forget_digests

    forget_digests()
    outcome = run_evaluation(settings, kb_db, dataset(ITEMS[:1]), "flaky", executor=executor)
    assert outcome.progress.done == 1 and report(settings, kb_db, "flaky").items[0]["item_status"] == "done"


def test_cancel_stops_before_the_next_item(fake, settings, kb_db, executor):
    cancel = threading.Event()
    outcome = run_evaluation(
        settings,
        kb_db,
        dataset(),
        "cancelled",
        concurrency=1,
        on_progress=lambda p: cancel.set(),
        cancel=cancel,
        executor=executor,
    )
    assert outcome.status == "cancelled" and outcome.progress.done == 1
    assert evals.get_eval_run(kb_db, "cancelled").status == "cancelled"


@pytest.mark.slow
def test_a_run_killed_with_sigkill_leaves_a_valid_store_that_resumes(fake, settings, kb_db, tmp_path):
    kb_db.close()
    golden = tmp_path / "golden.jsonl"
    items = [
        GoldenItem(id=f"item-{n}", question=f"{ITEMS[n % 2].question} (variant {n})", reference=ITEMS[n % 2].reference)
        for n in range(12)
    ]
    golden.write_text("\n".join(i.model_dump_json() for i in items))
    env = {**os.environ, "COLUMNS": "200"}
    child = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "eval", str(golden), "--name", "killed", "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def faithfulness_asked(f) -> int:
        return len([r for r in f.requests if r["body"] and "Faithfulness: is every" in json.dumps(r["body"])])

    # from the second item's faithfulness judgement on, no reply leaves the fake until the child is killed
    gate = fake.hold(match=lambda body: faithfulness_asked(fake) >= 2, timeout_s=120)
    got_going = fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=120)  # a cold child imports for seconds
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    gate.release()
    assert got_going, "the child never got going"
    con = duckdb.connect(settings.store_path)
    finished_before = con.execute("SELECT count(*) FROM eval_items WHERE status = 'done'").fetchone()[0]
    assert con.execute("SELECT status FROM eval_runs WHERE name = 'killed'").fetchone()[0] == "running"
    orphans = con.execute(
        "SELECT count(*) FROM scores s LEFT JOIN eval_items i USING (eval_run_id, item_id) WHERE i.item_id IS NULL"
    ).fetchone()[0]
    con.close()
    assert 1 <= finished_before < 12 and orphans == 0
    from store.db import get_database

    # resumed with the same golden file (a different one would be refused: its content hash differs)
    outcome = run_evaluation(settings, get_database(settings), load_dataset(golden), "killed")
    assert outcome.progress.skipped == finished_before and outcome.progress.done == 12
    con = duckdb.connect(settings.store_path)
    assert con.execute("SELECT count(*), count(DISTINCT item_id) FROM eval_items").fetchone() == (12, 12)
    con.close()
