"""Sweeps (`python -m pipeline sweep`): the grid and its refusals, a 2x2 sweep on the golden set, resume after a
kill, the leaderboard's statistics against scipy and statsmodels, the Pareto front, and combinations that need an
index of their own (the knowledge base unchanged, the drilldown showing the index's text)."""

import json
import os
import signal
import subprocess
import sys

import duckdb
import numpy as np
import pytest
from conftest import ROOT
from scipy import stats
from statsmodels.stats.multitest import multipletests

from pipeline.cli.main import main
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation import datasets, regression
from pipeline.evaluation.runner import run_evaluation
from pipeline.experiments import leaderboard, leaderboard_json, open_sweep, pareto_front, run_sweep
from pipeline.experiments import sweep as sweep_module
from pipeline.experiments.grid import combinations, parse_grid, sweepable_settings
from pipeline.experiments.indexes import FOLDER
from pipeline.history.runs import load_run
from store import evals, sweeps
from store.runs import get_run

GOLDEN = ROOT / "data" / "eval" / "golden.jsonl"
MODELS_GRID = ["--grid", "generator_model=llama3.2,qwen2.5:3b", "--grid", "top_k=3,5"]


def golden(db, limit):
    return datasets.resolve(db, GOLDEN).select(limit)


# -- the grid ---------------------------------------------------------------------------------------------------


def test_grid_values_are_read_with_each_settings_type_and_make_every_combination():
    axes = parse_grid(["top_k=3,05", "temperature=0,0.5", "precheck_enabled=true,off", "generator_model=a,b:3b"])
    assert [a.values for a in axes] == [(3, 5), (0.0, 0.5), (True, False), ("a", "b:3b")]
    assert all(type(v) is int for v in axes[0].values) and type(axes[1].values[0]) is float
    combos = combinations(axes, Settings())
    assert len(combos) == 16
    assert combos[0].label == "top_k=3,temperature=0.0,precheck_enabled=true,generator_model=a"
    assert combos[-1].eval_name("exp") == "exp/top_k=5,temperature=0.5,precheck_enabled=false,generator_model=b:3b"
    assert combos[1].settings == {"top_k": 3, "temperature": 0.0, "precheck_enabled": True, "generator_model": "b:3b"}
    assert combos[0].apply(Settings()).top_k == 3
    # values holding commas are separated with "|"
    assert parse_grid(["verifier_chain=precheck,minicheck_chunk|llm"])[0].values == ("precheck,minicheck_chunk", "llm")


@pytest.mark.parametrize(
    ("grid", "message", "fix"),
    [
        (["nope=1,2"], "'nope' is not a setting", "top_k"),
        (["ollama_host=a,b"], "changes no evaluation result", "generator_model"),
        (["judge_model=a,b"], "one judge pin", "top_k"),
        (["top_k=3,3.5"], "'3.5' is not a whole number", "whole number"),
        (["top_k=0,3"], "top_k=0 is out of range", "at least 1"),
        (["temperature=hot"], "'hot' is not a number", "a number"),
        (["top_k=3,5,3"], "lists 3 twice", "once"),
        (["top_k=3", "top_k=5"], "more than once", "one --grid"),
        (["top_k"], "names no setting and values", "SETTING=VALUE"),
        (["chunk_size=64,512"], "chunk_overlap = 64 is not below chunk_size", "chunk_overlap"),
    ],
)
def test_a_bad_grid_is_refused_with_the_fix(grid, message, fix):
    with pytest.raises(InputError) as caught:
        combinations(parse_grid(grid), Settings())
    assert message in caught.value.message and fix in caught.value.fix


def test_the_cli_refuses_an_unknown_setting_listing_the_valid_names(kb_db, capsys):
    assert main(["sweep", str(GOLDEN), "--name", "x", "--grid", "topk=3,5"]) == 2
    err = capsys.readouterr().err
    assert "'topk' is not a setting" in err
    assert all(name in err for name in ("top_k", "chunk_size", "generator_model"))
    assert "ollama_host" not in sweepable_settings() and "top_k" in sweepable_settings()
    assert sweeps.get_sweep(kb_db, "x") is None and not datasets.listing(kb_db)  # nothing stored


def test_a_sweep_continued_with_another_grid_or_items_is_refused_with_the_fix(settings, kb_db):
    four = golden(kb_db, 4)
    row, _ = open_sweep(settings, kb_db, four, "exp", ["top_k=3,5"])
    assert [c.label for c in row.combinations] == ["top_k=3", "top_k=5"] and row.reference == "top_k=3"
    with pytest.raises(InputError) as caught:
        open_sweep(settings, kb_db, four, "exp", ["top_k=3,8"])
    assert "another grid (--grid top_k=3,5)" in caught.value.message and "new --name" in caught.value.fix
    with pytest.raises(InputError) as caught:
        open_sweep(settings, kb_db, golden(kb_db, 3), "exp", ["top_k=3,5"])
    assert "another choice of 4 items" in caught.value.message and "--limit" in caught.value.fix
    with pytest.raises(InputError) as caught:
        open_sweep(settings, kb_db, four, "exp", ["top_k=3,5"], reference="top_k=8")
    assert "no combination" in caught.value.message and "top_k=3, top_k=5" in caught.value.fix
    row, _ = open_sweep(settings, kb_db, four, "exp", ["top_k=3,5"], reference="exp/top_k=5")  # another reference
    assert row.reference == "top_k=5"


# -- a 2x2 sweep on the golden set --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_2x2_sweep_on_the_golden_set_finishes_and_prints_its_leaderboard(fake, settings, kb_db, capsys):
    fake.add_model("qwen2.5:3b")
    argv = ["sweep", str(GOLDEN), "--name", "models", *MODELS_GRID, "--limit", "4", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    board = json.loads(out)
    labels = [
        "generator_model=llama3.2,top_k=3",
        "generator_model=llama3.2,top_k=5",
        "generator_model=qwen2.5:3b,top_k=3",
        "generator_model=qwen2.5:3b,top_k=5",
    ]
    assert [c["combination"] for c in board] == labels
    assert [c["evaluation"] for c in board] == [f"models/{label}" for label in labels]
    assert board[0]["settings"] == {"generator_model": "llama3.2", "top_k": 3} and board[0]["reference"]
    for c in board:
        assert c["status"] == "finished" and c["items_done"] == 4
        recall = c["metrics"]["context_recall"]
        assert recall["n"] == 4 and recall["ci_low"] <= recall["mean"] <= recall["ci_high"]
        assert c["calls"] > 0 and c["latency_p50_ms"] > 0 and c["latency_p95_ms"] >= c["latency_p50_ms"]
    # every combination is an ordinary evaluation of four items in the store, answered by its own settings
    for c in board:
        run = evals.get_eval_run(kb_db, c["evaluation"])
        assert run.status == "finished" and run.n_items == 4
        assert run.config["generator_model"] == c["settings"]["generator_model"]
        assert run.config["top_k"] == c["settings"]["top_k"]
    # the generator calls went to each combination's model
    generated = {r["model"] for r in fake.requests if r["path"] in ("/api/chat", "/api/generate")}
    assert {"llama3.2:latest", "qwen2.5:3b"} <= generated
    assert "sweeping" in err  # one progress bar across the combinations
    assert sweeps.get_sweep(kb_db, "models").status == "finished"
    # the same command again runs nothing: every combination finished
    fake.clear()
    assert main(argv) == 0
    assert not [r for r in fake.requests if r["path"] in ("/api/chat", "/api/generate", "/api/embed")]
    assert "finished before, not run again" in capsys.readouterr().err
    # a sweep's combination is no implicit baseline: an ordinary evaluation over the same items is not compared
    # with whichever combination ran last
    run_evaluation(settings, kb_db, golden(kb_db, 4), "nightly")
    assert regression.baseline_of(kb_db, evals.get_eval_run(kb_db, "nightly")) is None


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_continues_without_redoing_finished_combinations(
    fake, settings, kb_db, monkeypatch
):
    fake.add_model("qwen2.5:3b")
    kb_db.close()
    child = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "sweep", str(GOLDEN), "--name", "killed", *MODELS_GRID, "--limit", "3"]
        + ["--concurrency", "1"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # the third combination's first generation (qwen2.5:3b) is held until the child is killed
    gate = fake.hold(match=lambda body: str(body.get("model", "")).startswith("qwen"), timeout_s=180)
    got_going = fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=180)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    gate.release()
    assert got_going, "the child never reached the third combination"
    con = duckdb.connect(settings.store_path)
    statuses = con.execute("SELECT status FROM sweep_combinations ORDER BY position").fetchall()
    before = dict(
        con.execute(
            "SELECT e.name, count(DISTINCT c.id) FROM eval_runs e JOIN eval_items i ON i.eval_run_id = e.id "
            "JOIN llm_calls c ON c.run_id = i.run_id GROUP BY e.name"
        ).fetchall()
    )
    con.close()
    assert [s[0] for s in statuses] == ["finished", "finished", "running", "pending"]
    from store.db import get_database

    db = get_database(settings)
    evaluated = []
    real = sweep_module.run_evaluation
    monkeypatch.setattr(
        sweep_module, "run_evaluation", lambda *a, **k: evaluated.append(a[3]) or real(*a, **k), raising=True
    )
    calls = []
    outcome = run_sweep(
        settings, db, golden(db, 3), "killed", MODELS_GRID[1::2], on_progress=lambda p: calls.append(p.finished)
    )
    assert outcome.status == "finished"
    assert evaluated == ["killed/generator_model=qwen2.5:3b,top_k=3", "killed/generator_model=qwen2.5:3b,top_k=5"]
    assert outcome.skipped == ["generator_model=llama3.2,top_k=3", "generator_model=llama3.2,top_k=5"]
    assert list(outcome.ran) == ["generator_model=qwen2.5:3b,top_k=3", "generator_model=qwen2.5:3b,top_k=5"]
    assert calls[0] == 6 and calls[-1] == 12  # one progress across combinations: the finished ones counted first
    con = duckdb.connect(settings.store_path)
    after = dict(
        con.execute(
            "SELECT e.name, count(DISTINCT c.id) FROM eval_runs e JOIN eval_items i ON i.eval_run_id = e.id "
            "JOIN llm_calls c ON c.run_id = i.run_id GROUP BY e.name"
        ).fetchall()
    )
    items = dict(
        con.execute(
            "SELECT e.name, count(*) FROM eval_runs e JOIN eval_items i ON i.eval_run_id = e.id GROUP BY e.name"
        ).fetchall()
    )
    con.close()
    for label in outcome.skipped:  # not evaluated again: the same items and model calls as before the kill
        assert after[f"killed/{label}"] == before[f"killed/{label}"] and items[f"killed/{label}"] == 3
    assert all(n == 3 for n in items.values()) and len(items) == 4


# -- the leaderboard's statistics ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_leaderboards_intervals_and_holm_adjusted_p_values_match_scipy_and_statsmodels(
    fake, settings, kb_db, capsys
):
    fake.add_model("qwen2.5:3b")
    metrics = ["context_recall", "judge_correctness"]
    run_sweep(settings, kb_db, golden(kb_db, 8), "stats", MODELS_GRID[1::2], metrics=metrics)
    # the fake scores every combination alike: give each item of each combination a score of its own
    rng = np.random.default_rng(7)
    with kb_db.transaction() as cur:
        rows = cur.execute("SELECT eval_run_id, item_id, metric FROM scores ORDER BY ALL").fetchall()
        for eval_run_id, item_id, metric in rows:
            value = float(rng.uniform(0, 1)) if metric == "context_recall" else float(rng.integers(1, 6))
            cur.execute(
                "UPDATE scores SET value = ?, status = 'ok' WHERE eval_run_id = ? AND item_id = ? AND metric = ?",
                [value, eval_run_id, item_id, metric],
            )
    board = leaderboard(settings, kb_db, "stats")
    values = {}  # (label, metric) -> item -> value, read back from the store
    with kb_db.cursor() as cur:
        for row in board.rows:
            for metric in metrics:
                values[row.label, metric] = dict(
                    cur.execute(
                        "SELECT item_id, value FROM scores WHERE eval_run_id = ? AND metric = ?",
                        [row.eval_run_id, metric],
                    ).fetchall()
                )
    raw, adjusted = [], []
    for row in board.rows:
        for metric in metrics:
            x = np.array(list(values[row.label, metric].values()))
            low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
            scale = (0, 1) if metric == "context_recall" else (1, 5)
            interval = row.metrics[metric]
            assert interval.n == 8 and interval.mean == pytest.approx(x.mean())
            assert interval.low == pytest.approx(max(low, scale[0])) and interval.high == pytest.approx(
                min(high, scale[1])
            )
            if row.is_reference:
                assert not row.tests
                continue
            base, new = values[board.reference, metric], values[row.label, metric]
            items = sorted(base)
            expected = stats.ttest_rel([new[i] for i in items], [base[i] for i in items])
            test = row.tests[metric]
            assert test.n == 8 and test.delta == pytest.approx(np.mean([new[i] - base[i] for i in items]))
            assert test.p_value == pytest.approx(expected.pvalue)
            raw.append(test.p_value)
            adjusted.append(test.p_adjusted)
    assert board.n_tests == 6 and len(raw) == 6
    assert adjusted == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # the JSON carries the same numbers
    data = leaderboard_json(board)
    assert data[1]["tests"]["context_recall"]["p_adjusted"] == board.rows[1].tests["context_recall"].p_adjusted
    assert data[2]["metrics"]["judge_correctness"]["ci_low"] == board.rows[2].metrics["judge_correctness"].low
    # the best per metric is the highest mean, and another reference changes the tests
    for metric in metrics:
        best = max(board.rows, key=lambda r: r.metrics[metric].mean)
        assert board.best[metric] == best.label and metric in best.best_for
    other = leaderboard(settings, kb_db, "stats", reference="generator_model=qwen2.5:3b,top_k=5")
    assert other.reference == "generator_model=qwen2.5:3b,top_k=5" and not other.rows[3].tests and other.rows[0].tests
    # the same command prints the table (nothing runs again: every combination finished)
    capsys.readouterr()
    argv = ["sweep", str(GOLDEN), "--name", "stats", *MODELS_GRID, "--limit", "8", "--metrics", ",".join(metrics)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "metrics: mean [95% t interval]" in out and "generator_model=llama3.2,top_k=3 (reference)" in out
    assert "6 paired tests against generator_model=llama3.2,top_k=3, Holm-adjusted at alpha 0.05" in out
    assert f"Pareto front of context_recall against p50 latency: {', '.join(board.pareto)}" in out


def test_the_pareto_front_keeps_the_combinations_nothing_beats_on_quality_and_latency():
    points = {
        "a": (0.90, 500.0),  # best quality
        "b": (0.80, 200.0),  # faster, worse
        "c": (0.70, 300.0),  # dominated by b
        "d": (0.80, 250.0),  # dominated by b (same quality, slower)
        "e": (0.60, 100.0),  # fastest
        "f": (0.90, 600.0),  # dominated by a
    }
    assert pareto_front(points) == ["e", "b", "a"]
    # a metric where lower is better turns the quality axis round
    assert pareto_front(points, higher_is_better=False) == ["e"]
    assert pareto_front({"only": (0.5, 10.0)}) == ["only"]


@pytest.mark.slow
def test_the_pareto_front_does_not_move_when_a_combination_is_answered_from_the_cache(fake, settings, kb_db):
    import dataclasses

    from pipeline.experiments.leaderboard import quantile

    fake.set_latency(0.001, seconds_per_prompt_token=0.001)  # a longer context (top_k=8) takes longer
    # whole chunks: under the default context budget top_k=8 and top_k=2 read nearly as many tokens, and the two
    # latencies were ordered by the machine's load (1,064 against 1,083 ms in one run)
    settings = dataclasses.replace(settings, context_budget_tokens=0)
    items, metrics = golden(kb_db, 3), ["context_recall"]
    # an evaluation with top_k=8 fills the cache, so the sweep's top_k=8 combination is answered wholly from it
    alone = run_evaluation(dataclasses.replace(settings, top_k=8), kb_db, items, "alone", metrics=metrics)
    run_sweep(settings, kb_db, items, "mixed", ["top_k=2,8"], metrics=metrics)
    run_sweep(settings, kb_db, items, "again", ["top_k=2,8"], metrics=metrics)  # every combination replayed
    mixed, again = leaderboard(settings, kb_db, "mixed"), leaderboard(settings, kb_db, "again")
    rows = {r.label: r for r in mixed.rows}
    assert rows["top_k=8"].replayed == 1 and rows["top_k=2"].replayed < 1
    # the replayed combination is placed by the latencies first measured, not by the replay's
    first_measured = sweeps.question_latencies(kb_db, alone.eval_run_id)
    assert sweeps.question_latencies(kb_db, evals.get_eval_run(kb_db, "mixed/top_k=8").id) == first_measured
    measured = {
        "top_k=2": (rows["top_k=2"].metrics["context_recall"].mean, rows["top_k=2"].latency_p50_ms),
        "top_k=8": (rows["top_k=8"].metrics["context_recall"].mean, quantile(first_measured, 0.5)),
    }
    assert mixed.pareto == pareto_front(measured) and rows["top_k=8"].latency_p50_ms > rows["top_k=2"].latency_p50_ms
    # answered wholly from the cache, the sweep again draws the same front at the same latencies
    assert all(r.replayed == 1 for r in again.rows)
    assert [r.latency_p50_ms for r in again.rows] == [r.latency_p50_ms for r in mixed.rows]
    assert again.pareto == mixed.pareto


# -- settings that need an index of their own ---------------------------------------------------------------------


def item_runs(db, eval_name):
    run = evals.get_eval_run(db, eval_name)
    with db.cursor() as cur:
        return [r for (r,) in cur.execute("SELECT run_id FROM eval_items WHERE eval_run_id = ?", [run.id]).fetchall()]


def _knowledge_base(con):
    return (
        con.execute("SELECT * FROM documents ORDER BY id").fetchall(),
        con.execute("SELECT id, document_id, ordinal, text, embedding FROM chunks ORDER BY id").fetchall(),
    )


@pytest.mark.slow
def test_a_chunk_size_sweep_leaves_the_knowledge_base_alone_and_shows_its_own_chunks(settings, kb_db, tmp_path):
    with kb_db.cursor() as cur:
        before = _knowledge_base(cur)
        main_texts = {t for (t,) in cur.execute("SELECT text FROM chunks").fetchall()}
    two = golden(kb_db, 2)
    outcome = run_sweep(settings, kb_db, two, "chunking", ["chunk_size=256,512"])
    assert outcome.status == "finished"
    with kb_db.cursor() as cur:
        assert _knowledge_base(cur) == before  # the user's knowledge base is unchanged
    # 512 is the knowledge base's own chunking: only 256 builds an index, kept next to the store
    (index,) = outcome.indexes.values()
    assert index.built > 0 and index.path.startswith(str(tmp_path / FOLDER))
    con = duckdb.connect(index.path, read_only=True)
    index_texts = {t for (t,) in con.execute("SELECT text FROM chunks").fetchall()}
    assert set(con.execute("SELECT DISTINCT chunk_size FROM documents").fetchall()) == {(256,)}
    con.close()
    row = sweeps.get_sweep(kb_db, "chunking")
    assert [c.index_fingerprint for c in row.combinations] == [index.fingerprint, None]
    # a run of the 256 combination: its retrievals show the index's chunks, never a chunk of the knowledge base
    run_ids = item_runs(kb_db, "chunking/chunk_size=256")
    shown = []
    for run_id in run_ids:
        stored = get_run(kb_db, run_id)
        assert stored["retrievals"]
        for r in stored["retrievals"]:
            assert r["chunk_id"] == -r["rank"] and r["text"] in index_texts and r["source"].endswith(".md")
            shown.append(r["text"])
        result = load_run(kb_db, run_id).result
        assert result.passages and all(p.text in index_texts for p in result.passages)
    assert any(text not in main_texts for text in shown)
    # the 512 combination retrieved the knowledge base's own chunks, as any evaluation does
    for run_id in item_runs(kb_db, "chunking/chunk_size=512"):
        assert all(r["chunk_id"] > 0 and r["text"] in main_texts for r in get_run(kb_db, run_id)["retrievals"])
    # a later sweep with the same chunking reuses the index: nothing is ingested again
    again = run_sweep(settings, kb_db, two, "chunking-again", ["chunk_size=256"])
    (reused,) = again.indexes.values()
    assert reused.fingerprint == index.fingerprint and reused.built == 0
    board = leaderboard(settings, kb_db, "chunking")
    assert [r.index for r in board.rows] == [index.fingerprint, None]
