"""The store's faster write and read paths keep their results: rows passed per column, texts and cache entries
looked up before they are written, call texts read by hash, the Trends series grouped before the join."""

from datetime import datetime, timezone

import pytest

from pipeline.regression.alerts import metric_series
from store.db import Database, insert_rows
from store.evals import create_eval_run, mark_eval_run
from store.llm_log import cache_get, calls_for_eval_run, calls_for_run, insert_cache_entries, save_calls, text_hash
from store.records import CacheEntry, LLMCallRecord, RunLog, RunRecord
from store.runs import save_run

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def call(prompt, completion, stage="generate", eval_run_id=None):
    return LLMCallRecord(stage, "llama3.2", "d", "h", 10, 5, 12.5, False, None, NOW, "chat", "ollama", prompt,
                         completion, "span-1", eval_run_id)  # fmt: skip


def run_with(db, calls):
    return save_run(db, RunLog(RunRecord("chat", "q?", "accepted", NOW, "a."), calls=calls))


def test_rows_go_in_per_column_with_nulls_lists_json_and_timestamps(db):
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (n DOUBLE, b BOOLEAN, ts TIMESTAMP, tags VARCHAR[], j JSON, s VARCHAR)")
        rows = [
            [1, True, NOW, [], '{"a": 1}', None],
            [0.5, None, None, ["x", "y"], None, "é"],
            [None, False, datetime(2025, 1, 1), None, "[]", "it's"],
        ]
        insert_rows(cur, "t", ["n", "b", "ts", "tags", "j", "s"], rows)
        insert_rows(cur, "t", ["s"], [])
        stored = cur.execute("SELECT * FROM t").fetchall()
    assert stored == [
        (1.0, True, datetime(2025, 3, 1, 12, 0), [], '{"a": 1}', None),
        (0.5, None, None, ["x", "y"], None, "é"),
        (None, False, datetime(2025, 1, 1), None, "[]", "it's"),
    ]


def test_a_text_is_stored_once_and_every_call_reads_its_own_texts_back(db):
    first = run_with(db, [call("shared system prompt", "one"), call("shared system prompt", "two")])
    second = run_with(db, [call("shared system prompt", "one"), call("other prompt", None), call(None, None)])
    with db.cursor() as cur:
        texts = dict(cur.execute("SELECT hash, text FROM llm_texts").fetchall())
    assert texts == {text_hash(t): t for t in ("shared system prompt", "one", "two", "other prompt")}
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(db, first)] == [
        ("shared system prompt", "one"),
        ("shared system prompt", "two"),
    ]
    again = calls_for_run(db, second)
    assert [(c["prompt_text"], c["completion_text"]) for c in again] == [
        ("shared system prompt", "one"),
        ("other prompt", None),
        (None, None),
    ]
    assert "prompt_text_hash" not in again[0] and again[0]["span_id"] == "span-1"
    assert calls_for_run(db, 10**9) == []


def test_an_evaluations_calls_have_their_texts(db):
    eval_run_id = create_eval_run(db, "e1", "golden.jsonl", "h", {}, "llama3.2", "d", "v1", 1, 1)
    save_calls(db, [call("judge prompt", "5", stage="judge", eval_run_id=eval_run_id)])
    calls = calls_for_eval_run(db, eval_run_id)
    assert [(c["stage"], c["prompt_text"], c["completion_text"]) for c in calls] == [("judge", "judge prompt", "5")]


def test_a_cache_entry_is_added_or_replaced(db):
    with db.transaction() as cur:
        insert_cache_entries(cur, [CacheEntry("k1", "m", "d", {"v": 1})])
    with db.transaction() as cur:
        insert_cache_entries(
            cur,
            [
                CacheEntry("k1", "m", "d2", {"v": 2}),
                CacheEntry("k2", "m", "d", {"v": 3}),
                CacheEntry("k2", "m", "d", {"v": 4}),
            ],
        )
    assert cache_get(db, "k1") == {"v": 2} and cache_get(db, "k2") == {"v": 4}
    with db.cursor() as cur:
        assert cur.execute("SELECT key, digest FROM llm_cache ORDER BY key").fetchall() == [("k1", "d2"), ("k2", "d")]


def test_the_trends_series_means_counts_and_failed_items(db):
    def evaluation(name, values, statuses, finished=True):
        eval_run_id = create_eval_run(db, name, "golden.jsonl", "h", {"top_k": 5}, "llama3.2", "d", "v1", 3, 1)
        with db.cursor() as cur:
            for k, (value, status) in enumerate(zip(values, statuses, strict=True)):
                cur.execute(
                    "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question) VALUES (?, ?, ?, ?, 'q')",
                    [eval_run_id, f"i{k}", k, "done" if status != "failed" else "failed"],
                )
                for metric in ("faithfulness", "judge_correctness"):
                    cur.execute(
                        "INSERT INTO scores (eval_run_id, item_id, run_id, metric, value, status) VALUES (?,?,?,?,?,?)",
                        [eval_run_id, f"i{k}", k, metric, value, "invalid" if status == "invalid" else "ok"],
                    )
        if finished:
            mark_eval_run(db, eval_run_id, "finished")
        return eval_run_id

    a = evaluation("a", [1.0, 0.5, 0.0], ["ok", "ok", "invalid"])
    b = evaluation("b", [0.2, 0.4, 0.9], ["ok", "failed", "ok"])
    evaluation("running", [0.1, 0.1, 0.1], ["ok", "ok", "ok"], finished=False)
    rows = [(r["eval_run_id"], r["metric"], round(r["mean"], 6), r["n"], r["failed"]) for r in metric_series(db)]
    assert sorted(rows) == [
        (a, "faithfulness", 0.75, 2, 0),
        (a, "judge_correctness", 0.75, 2, 0),
        (b, "faithfulness", 0.5, 3, 1),
        (b, "judge_correctness", 0.5, 3, 1),
    ]
    assert metric_series(db)[0]["config"] == {"top_k": 5}


def test_the_scale_bench_store_has_the_products_shape(tmp_path):
    from bench.scale import parse_runs
    from bench.scale_data import fill

    assert parse_runs(["scale", "--runs", "100000"]) == (["scale"], 100000)
    with pytest.raises(SystemExit, match="--runs takes a whole number"):
        parse_runs(["scale", "--runs", "many"])
    db = Database(str(tmp_path / "scale.duckdb"))
    fill(db, 2000, log=lambda line: None)
    with db.cursor() as cur:
        per_run = cur.execute("SELECT DISTINCT count(*) FROM llm_calls GROUP BY run_id").fetchall()
        spans = cur.execute("SELECT min(n), max(n) FROM (SELECT count(*) AS n FROM spans GROUP BY run_id)").fetchone()
        sample = cur.execute("SELECT hash, text FROM llm_texts USING SAMPLE 50 ROWS").fetchall()
        missing = cur.execute(
            "SELECT count(*) FROM llm_calls c LEFT JOIN llm_texts t ON t.hash = c.prompt_text_hash WHERE t.hash IS NULL"
        ).fetchone()[0]
        shared = cur.execute("SELECT count(DISTINCT completion_text_hash), count(*) FROM llm_calls").fetchone()
    assert per_run == [(15,)] and 16 <= spans[0] and spans[1] <= 30 and missing == 0
    assert all(text_hash(text) == h for h, text in sample)  # what the product computes, so its writes dedupe
    assert shared[0] < shared[1] - 2000 * 7  # the verifier's verdicts are a few texts
    assert len(calls_for_run(db, 1)) == 15 and all(c["prompt_text"] for c in calls_for_run(db, 1))
    db.close()
