"""The runs explorer (issue 29): filters by evaluation, latency, tokens and cost; groups with aggregates; saved
views in the store; an export with the evaluation, tags and judge scores; the same filters from the CLI."""

import json
from datetime import datetime

import duckdb
import pytest
from test_history import make_runs

from pipeline.cli.main import main
from pipeline.errors import InputError
from pipeline.history.views import delete_view, save_view, saved_views
from store.history import RunFilter, count_runs, export_runs, find_runs, group_runs, query_runs

PRICES = (1.0, 2.0)  # per 1000 prompt, completion tokens


def explored(db, n=6):
    """n runs: run i has latency 100 * i ms, one call of 10 * i prompt and i completion tokens (run 2's call
    replayed from the cache, at its original cost), runs 1-3 answer items of evaluation 'alpha' (tags rag, numeric
    on 1; rag on 2), runs 4-5 of 'beta', run 6 is a chat run; run 1 has a judge correctness 4."""
    ids = make_runs(db, n)
    with db.cursor() as cur:
        for i, run_id in enumerate(ids, start=1):
            cur.execute(
                "UPDATE runs SET latency_ms = ?, n_calls = 1, n_replayed = ? WHERE id = ?",
                [100.0 * i, int(i == 2), run_id],
            )
            cur.execute(
                "INSERT INTO llm_calls (run_id, stage, model, prompt_tokens, completion_tokens, latency_ms, "
                "cache_hit, started_at) VALUES (?, 'generate', 'm', ?, ?, 5, ?, ?)",
                [run_id, 10 * i, i, i == 2, datetime(2026, 1, 1)],
            )
        cur.execute(
            "INSERT INTO eval_runs (id, name, dataset, dataset_hash, status, config, judge_model, judge_digest, "
            "judge_prompt_version, n_items) VALUES (1, 'alpha', 'd', 'h', 'done', '{}', 'j', 'd', 'v', 3), "
            "(2, 'beta', 'd', 'h', 'done', '{}', 'j', 'd', 'v', 2)"
        )
        items = [(1, "a", ids[0], ["rag", "numeric"]), (1, "b", ids[1], ["rag"]), (1, "c", ids[2], None)]
        items += [(2, "a", ids[3], None), (2, "b", ids[4], None)]
        for eval_run, item, run_id, tags in items:
            cur.execute(
                "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags) "
                "VALUES (?, ?, ?, 'done', 'q', ?)",
                [eval_run, item, run_id, tags],
            )
        cur.execute(
            "INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status) VALUES "
            "(1, 'a', ?, 'judge_correctness', 4, 'ok')",
            [ids[0]],
        )
    return ids


def ids_of(db, run_filter):
    got = [r["id"] for r in query_runs(db, run_filter, 1, 100)]
    assert count_runs(db, run_filter) == len(got)
    return got


def test_filters_by_evaluation_latency_tokens_and_cost(db):
    ids = explored(db)
    run = dict(enumerate(ids, start=1))
    assert ids_of(db, RunFilter(evaluations=["alpha"])) == [run[3], run[2], run[1]]
    assert ids_of(db, RunFilter(evaluations=["beta", "alpha"], latency_min_ms=250)) == [run[5], run[4], run[3]]
    assert ids_of(db, RunFilter(latency_max_ms=200)) == [run[2], run[1]]
    assert ids_of(db, RunFilter(tokens_min=33, tokens_max=55)) == [run[5], run[4], run[3]]  # 11 tokens per i
    # cost = (10 i * 1 + i * 2) / 1000 = 0.012 i; run 2's call was replayed: at its original cost
    priced = RunFilter(cost_max=0.03, prices=PRICES)
    assert ids_of(db, priced) == [run[2], run[1]]
    assert ids_of(db, RunFilter(cost_min=0.03, prices=PRICES)) == [run[6], run[5], run[4], run[3]]
    assert ids_of(db, RunFilter(cost_min=0.0)) == []  # no prices: no cost to filter by


def test_listed_rows_carry_tokens_cost_and_evaluation(db):
    ids = explored(db)
    rows = {r["id"]: r for r in query_runs(db, RunFilter(prices=PRICES), 1, 100)}
    assert rows[ids[0]]["tokens"] == 11 and rows[ids[0]]["cost"] == pytest.approx(0.012)
    assert rows[ids[1]]["cost"] == pytest.approx(0.024) and rows[ids[5]]["evaluation"] is None
    assert rows[ids[1]]["replayed"] == 1 and rows[ids[0]]["replayed"] == 0  # the share of its calls replayed
    assert rows[ids[3]]["evaluation"] == "beta"
    assert query_runs(db, RunFilter(), 1, 1)[0]["cost"] is None  # no prices set


def test_groups_by_evaluation_model_and_tag_with_aggregates(db):
    explored(db)
    by_eval = {g["group"]: g for g in group_runs(db, RunFilter(prices=PRICES), "evaluation")}
    assert {k: g["runs"] for k, g in by_eval.items()} == {"alpha": 3, "beta": 2, None: 1}
    alpha = by_eval["alpha"]
    assert alpha["faithfulness"] == pytest.approx((1 + 2 + 3) / 6 / 3)
    assert alpha["p50_latency_ms"] == pytest.approx(200) and alpha["p95_latency_ms"] == pytest.approx(290)
    assert alpha["tokens"] == 66 and alpha["tokens_per_run"] == pytest.approx(22)
    assert alpha["cost"] == pytest.approx(0.012 * (1 + 2 + 3)) and alpha["replayed"] == pytest.approx(1 / 3)
    by_model = {g["group"]: g["runs"] for g in group_runs(db, RunFilter(evaluations=["alpha"]), "model")}
    assert by_model == {"qwen": 2, "llama3.2": 1}  # odd i: qwen
    by_tag = {g["group"]: g["runs"] for g in group_runs(db, RunFilter(), "tag")}
    assert by_tag == {"rag": 2, "numeric": 1, None: 4}
    with pytest.raises(ValueError, match="cannot group runs by 'colour'"):
        group_runs(db, RunFilter(), "colour")


def test_saved_views_round_trip_replace_and_delete(db, settings):
    view = RunFilter(since=datetime(2026, 1, 2), evaluations=["alpha"], latency_min_ms=250.0, tokens_max=40)
    save_view(db, "  slow alpha ", view, "model")
    save_view(db, "all", RunFilter())
    assert [v.name for v in saved_views(settings, db)] == ["all", "slow alpha"]
    got = saved_views(settings, db)[1]
    assert got.run_filter == view and got.group_by == "model"
    save_view(db, "slow alpha", RunFilter(models=["qwen"]))  # the same name: replaced
    assert saved_views(settings, db)[1].run_filter == RunFilter(models=["qwen"])
    assert delete_view(db, "all") and not delete_view(db, "all")
    assert [v.name for v in saved_views(settings, db)] == ["slow alpha"]
    with pytest.raises(InputError, match="needs a name"):
        save_view(db, " ", RunFilter())


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
@pytest.mark.slow
def test_export_has_evaluation_tags_judge_scores_tokens_and_cost(db, tmp_path, fmt):
    ids = explored(db)
    with db.cursor() as cur:  # a tag a spreadsheet would run as a formula
        cur.execute("UPDATE eval_items SET tags = ['=HYPERLINK(1)'] WHERE item_id = 'c' AND eval_run_id = 1")
    path = tmp_path / f"runs.{fmt}"
    assert export_runs(db, RunFilter(evaluations=["alpha"], prices=PRICES), fmt, str(path)) == 3
    reader = {"csv": "read_csv", "parquet": "read_parquet", "jsonl": "read_json"}[fmt]
    rel = duckdb.sql(f"SELECT * FROM {reader}('{path}') ORDER BY id")
    rows = [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]
    assert [r["id"] for r in rows] == ids[:3]
    assert [r["evaluation"] for r in rows] == ["alpha"] * 3
    assert rows[0]["tags"] == "numeric, rag" and rows[1]["tags"] == "rag"
    assert rows[2]["tags"] == ("'=HYPERLINK(1)" if fmt == "csv" else "=HYPERLINK(1)")
    assert rows[0]["judge_correctness"] == 4 and rows[1]["judge_correctness"] is None
    assert {"judge_helpfulness", "judge_faithfulness"} <= set(rows[0])
    assert rows[0]["tokens"] == 11 and rows[0]["cost"] == pytest.approx(0.012)


def test_cli_runs_filters_by_evaluation_latency_and_tokens(settings, db, capsys, monkeypatch):
    ids = explored(db)
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_PROMPT_TOKENS", "1")
    monkeypatch.setenv("WORKBENCH_PRICE_PER_1K_COMPLETION_TOKENS", "2")
    assert main(["runs", "--json", "--evaluation", "alpha", "--min-latency-ms", "150", "--max-tokens", "50"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [ids[2], ids[1]]  # run 4 (beta) is as fast and as short
    assert rows[0]["evaluation"] == "alpha" and rows[0]["cost"] == pytest.approx(0.036)
    assert main(["runs", "--json", "--evaluation", "beta", "--evaluation", "alpha", "--min-latency-ms", "350"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids[4], ids[3]]
    assert main(["runs", "--json", "--max-latency-ms", "150", "--min-tokens", "5", "--max-cost", "0.02"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids[0]]
    assert main(["runs", "--json", "--sort", "latency_ms", "--ascending", "--limit", "2"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [ids[0], ids[1]]
    assert main(["runs", "--json", "--group-by", "evaluation"]) == 0
    groups = {g["group"]: g["runs"] for g in json.loads(capsys.readouterr().out)}
    assert groups == {"alpha": 3, "beta": 2, None: 1}
    assert main(["runs", "--group-by", "model", "--evaluation", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "qwen" in out and "llama3.2" in out and "p95 latency" in out


def test_sorts_every_matching_run_by_a_listed_column(db):
    ids = explored(db)
    run = dict(enumerate(ids, start=1))
    with db.cursor() as cur:  # latencies out of id order: 600, 500, 100, 400, 300, 200 ms
        for i, ms in zip(range(1, 7), (600, 500, 100, 400, 300, 200), strict=True):
            cur.execute("UPDATE runs SET latency_ms = ? WHERE id = ?", [ms, run[i]])
    pages = [find_runs(db, RunFilter(), p, 4, "latency_ms", descending=False).rows for p in (1, 2)]
    assert [r["id"] for r in pages[0] + pages[1]] == [run[3], run[6], run[5], run[4], run[2], run[1]]
    found = find_runs(db, RunFilter(text="answer"), 1, 3, "latency_ms")  # the text search's path
    assert [r["id"] for r in found.rows] == [run[1], run[2], run[4]] and found.total == 6
    by_cost = find_runs(db, RunFilter(prices=PRICES), 1, 2, "cost", descending=False).rows
    assert [r["id"] for r in by_cost] == [run[1], run[2]]  # run 2's replayed call at its original cost
    with pytest.raises(ValueError, match="cannot sort runs by 'answer'"):
        find_runs(db, RunFilter(), 1, 2, "answer")  # not a listed column


def test_a_store_without_the_views_table_has_no_saved_views(settings, db):
    """A store browsed read-only is not migrated: one written before m024 lists no views, it does not fail."""
    with db.transaction() as cur:
        cur.execute("DROP TABLE run_views")
    assert saved_views(settings, db) == []
