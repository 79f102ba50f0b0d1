"""The store's faster write and read paths keep their results: rows passed per column, texts and cache keys
found in the store's in-memory indexes (store/key_index.py), cache entries written as rows of llm_texts and
grades on their run's row, call texts read by id, the Trends series grouped before the join."""

from datetime import datetime, timezone

import duckdb
import pytest

from pipeline.regression.alerts import metric_series
from store.db import Database, insert_rows
from store.evals import create_eval_run, mark_eval_run
from store.key_index import cache_key64, text_key
from store.llm_log import cache_get, cache_text, calls_for_eval_run, calls_for_run, insert_texts, save_calls, text_hash
from store.migrations import MIGRATIONS, applied, migrate
from store.records import CacheEntry, GradeRecord, LLMCallRecord, RunLog, RunRecord
from store.runs import get_run, insert_run, save_run

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def call(prompt, completion, stage="generate", eval_run_id=None):
    return LLMCallRecord(stage, "llama3.2", "d", "h", 10, 5, 12.5, False, None, NOW, "chat", "ollama", prompt,
                         completion, "span-1", eval_run_id)  # fmt: skip


def a_run() -> RunRecord:
    return RunRecord(kind="chat", question="q?", status="accepted", started_at=NOW, answer="a.")


def run_with(db, calls):
    return save_run(db, RunLog(a_run(), calls=calls))


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


def test_a_column_with_one_value_in_every_row_is_stored_in_every_row(db):
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INTEGER, run_id BIGINT, flag BOOLEAN, model VARCHAR, ts TIMESTAMP, v FLOAT[])")
        same = [7, True, None, NOW, [0.5, 1.0]]
        insert_rows(cur, "t", ["id", "run_id", "flag", "model", "ts", "v"], [[k, *same] for k in range(3)])
        insert_rows(cur, "t", ["id", "run_id", "flag", "model", "ts", "v"], [[3, 1, True, "m", NOW, []]])
        insert_rows(cur, "t", ["id", "run_id", "model"], [[6, 1, "a"], [6, 1, "b"]])
        stored = cur.execute("SELECT * FROM t ORDER BY id, model").fetchall()
    when = datetime(2025, 3, 1, 12, 0)
    assert stored == [
        (0, 7, True, None, when, [0.5, 1.0]),
        (1, 7, True, None, when, [0.5, 1.0]),
        (2, 7, True, None, when, [0.5, 1.0]),
        (3, 1, True, "m", when, []),
        (6, 1, None, "a", None, None),
        (6, 1, None, "b", None, None),
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


def stored_texts(db) -> list[tuple[str, int]]:
    with db.cursor() as cur:
        return cur.execute("SELECT text, id FROM llm_texts ORDER BY id").fetchall()


def test_texts_get_sequential_ids_and_another_connection_finds_what_was_stored(tmp_path):
    path = str(tmp_path / "texts.duckdb")
    first_db = Database(path, idle_release_s=0)
    run_with(first_db, [call("system prompt", "one")])
    first_db.close()
    second_db = Database(path, idle_release_s=0)  # a new process: its index is loaded from the store
    run = run_with(second_db, [call("system prompt", "one"), call("system prompt", "two")])
    assert [text for text, _ in stored_texts(second_db)] == ["system prompt", "one", "two"]
    assert [row_id for _, row_id in stored_texts(second_db)] == [1, 2, 3]
    run_with(first_db, [call("two", "three")])  # reopened: it reads the rows the other one added
    assert [text for text, _ in stored_texts(first_db)] == ["system prompt", "one", "two", "three"]
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(second_db, run)] == [
        ("system prompt", "one"),
        ("system prompt", "two"),
    ]


def test_a_text_whose_transaction_rolled_back_is_stored_again(db, monkeypatch):
    def fail(*args):
        raise RuntimeError("the disk filled up")

    monkeypatch.setattr("store.runs.insert_spans", fail)
    with pytest.raises(RuntimeError):
        run_with(db, [call("lost prompt", "lost reply")])
    assert stored_texts(db) == []
    monkeypatch.undo()
    run = run_with(db, [call("lost prompt", "lost reply")])
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(db, run)] == [("lost prompt", "lost reply")]


def test_a_run_written_outside_a_transaction_finds_stored_texts_without_the_index(db):
    run_with(db, [call("system prompt", "one")])
    with db.cursor() as cur:  # a write with a bare cursor, outside Database.transaction (the index is not used)
        cur.begin()
        run_id = insert_run(cur, RunLog(a_run(), calls=[call("system prompt", "new")]))
        cur.commit()
    assert [text for text, _ in stored_texts(db)] == ["system prompt", "one", "new"]
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(db, run_id)] == [("system prompt", "new")]


def store_before(path, migration_name: str) -> duckdb.DuckDBPyConnection:
    """A store as it was just before the named migration."""
    con = duckdb.connect(str(path))
    last = next(m for m in MIGRATIONS if m.__name__ == migration_name)
    applied(con)  # creates schema_migrations
    for migration in MIGRATIONS[: MIGRATIONS.index(last)]:
        migration(con)
        con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [migration.__name__])
    return con


def test_the_migration_numbers_texts_in_order_of_first_use_and_links_the_calls(tmp_path):
    con = store_before(tmp_path / "old.duckdb", "m016_call_texts_by_id")
    texts = {"b prompt": text_hash("b prompt"), "a reply": text_hash("a reply"), "orphan": text_hash("orphan")}
    con.execute("INSERT INTO llm_texts VALUES (?, 'orphan'), (?, 'a reply'), (?, 'b prompt')",
                [texts["orphan"], texts["a reply"], texts["b prompt"]])  # fmt: skip
    con.execute(
        "INSERT INTO llm_calls (run_id, stage, model, prompt_hash, latency_ms, cache_hit, started_at, "
        "prompt_text_hash, completion_text_hash) VALUES (7, 'generate', 'm', 'k', 1, false, now(), ?, ?), "
        "(7, 'generate', 'm', 'k', 1, false, now(), ?, NULL)",
        [texts["b prompt"], texts["a reply"], texts["b prompt"]],
    )
    migrate(con)
    assert con.execute("SELECT id, text FROM llm_texts ORDER BY id").fetchall() == [
        (1, "b prompt"),
        (2, "a reply"),
        (3, "orphan"),
    ]
    assert con.execute("SELECT prompt_text_id, completion_text_id FROM llm_calls ORDER BY id").fetchall() == [
        (1, 2),
        (1, None),
    ]
    con.close()
    db = Database(str(tmp_path / "old.duckdb"))
    run = run_with(db, [call("b prompt", "fresh")])  # the sequence goes on after the migrated ids
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(db, run)] == [("b prompt", "fresh")]
    assert stored_texts(db)[-1] == ("fresh", 4)
    db.close()


def test_the_migration_moves_cache_entries_into_the_texts_table(tmp_path):
    con = store_before(tmp_path / "old.duckdb", "m018_cache_in_texts")
    con.execute(
        "INSERT INTO llm_texts VALUES (1, ?, ?, 'a prompt')", [text_key(text_hash("a prompt")), text_hash("a prompt")]
    )
    con.execute("SELECT nextval('llm_texts_id_seq')")
    for key, response in (("k1", '{"text": "one"}'), ("k2", '{"vector": [0.5, 1.0]}')):
        con.execute(
            "INSERT INTO llm_cache (id, key64, key, model, digest, response) "
            "VALUES (nextval('llm_cache_id_seq'), ?, ?, 'm', 'd', ?)",
            [cache_key64(key), key, response],
        )
    migrate(con)
    assert con.execute("SELECT id, key, model, digest, response FROM llm_cache ORDER BY id").fetchall() == [
        (2, "k1", "m", "d", '{"text":"one"}'),
        (3, "k2", "m", "d", '{"vector":[0.5,1.0]}'),
    ]
    con.close()
    db = Database(str(tmp_path / "old.duckdb"))
    assert cache_get(db, "k1") == {"text": "one"} and cache_get(db, "k2") == {"vector": [0.5, 1.0]}
    run = run_with(db, [call("a prompt", "fresh")])  # the old text is found, the new one numbered after the entries
    assert [(c["prompt_text"], c["completion_text"]) for c in calls_for_run(db, run)] == [("a prompt", "fresh")]
    assert stored_texts(db)[-1] == ("fresh", 4) and len(stored_texts(db)) == 4
    db.close()


def test_the_migration_moves_context_grades_onto_their_runs(tmp_path):
    con = store_before(tmp_path / "old.duckdb", "m019_grades_on_runs")
    for _ in range(2):  # runs 1 and 2
        con.execute("INSERT INTO runs (kind, question, status, started_at, search_text) VALUES ('chat', 'q?', "
                    "'accepted', now(), 'q?')")  # fmt: skip
    con.execute(
        "INSERT INTO context_grades VALUES (1, 2, 'rewritten', true, 'it answers'), (1, 1, 'q?', NULL, 'no JSON')"
    )
    migrate(con)
    con.close()
    db = Database(str(tmp_path / "old.duckdb"))
    assert get_run(db, 1)["grades"] == [
        {"round": 1, "query": "q?", "relevant": None, "reason": "no JSON"},
        {"round": 2, "query": "rewritten", "relevant": True, "reason": "it answers"},
    ]
    assert get_run(db, 2)["grades"] == []
    later = save_run(db, RunLog(a_run(), grades=[GradeRecord(1, "q?", False, "off")]))
    assert get_run(db, later)["grades"] == [{"round": 1, "query": "q?", "relevant": False, "reason": "off"}]
    db.close()


def test_an_evaluations_calls_have_their_texts(db):
    eval_run_id = create_eval_run(db, "e1", "golden.jsonl", "h", {}, "llama3.2", "d", "v1", 1, 1)
    save_calls(db, [call("judge prompt", "5", stage="judge", eval_run_id=eval_run_id)])
    calls = calls_for_eval_run(db, eval_run_id)
    assert [(c["stage"], c["prompt_text"], c["completion_text"]) for c in calls] == [("judge", "judge prompt", "5")]


def test_a_cache_entry_is_added_or_replaced(db):
    save_calls(db, [], [CacheEntry("k1", "m", "d", {"v": 1})])
    later = [
        CacheEntry("k1", "m", "d2", {"v": 2}),
        CacheEntry("k2", "m", "d", {"v": 3}),
        CacheEntry("k2", "m", "d", {"v": 4}),
    ]
    save_calls(db, [], later)
    assert cache_get(db, "k1") == {"v": 2} and cache_get(db, "k2") == {"v": 4}  # the newest entry of a key
    with db.cursor() as cur:
        rows = cur.execute("SELECT key, model, digest, response FROM llm_cache ORDER BY id").fetchall()
    assert rows == [("k1", "m", "d", '{"v":1}'), ("k1", "m", "d2", '{"v":2}'), ("k2", "m", "d", '{"v":4}')]


def test_a_runs_cache_entries_are_written_with_its_texts_and_never_taken_for_a_text(db):
    """Cache entries are rows of llm_texts, so a saved run touches one table fewer; a text whose hash is a cache
    entry's key is still stored and read back as itself, with and without the in-memory index."""
    text = "a prompt whose hash is also a cache key"
    entry = CacheEntry(text_hash(text), "m", "d", {"text": "cached reply"})
    run_id = save_run(db, RunLog(a_run(), calls=[call("p", "c")],
                                 cache_entries=[entry]))  # fmt: skip
    assert cache_get(db, entry.key) == {"text": "cached reply"}
    run_with(db, [call(text, None)])
    with db.cursor() as cur:
        assert insert_texts(cur, [text]) == {text_hash(text): stored_texts(db)[-1][1]}  # the replay's lookup
        tables = {r[0] for r in cur.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert [c["prompt_text"] for c in calls_for_run(db, run_id + 1)] == [text]
    assert [t for t, _ in stored_texts(db)] == ["p", "c", cache_text(entry), text] and "llm_cache" not in tables


@pytest.mark.slow
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


@pytest.mark.slow
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
        texts = "SELECT hash, text, key, cache_key64 FROM llm_texts WHERE key IS {} NULL"
        sample = cur.execute(f"SELECT * FROM ({texts.format('NOT')}) USING SAMPLE 50 ROWS").fetchall()
        keys = cur.execute(f"SELECT * FROM ({texts.format('')}) USING SAMPLE 50 ROWS").fetchall()
        missing = cur.execute(
            "SELECT count(*) FROM llm_calls c LEFT JOIN llm_texts t ON t.id = c.prompt_text_id "
            "WHERE t.id IS NULL OR t.hash <> c.prompt_text_hash"
        ).fetchone()[0]
        shared = cur.execute("SELECT count(DISTINCT completion_text_hash), count(*) FROM llm_calls").fetchone()
        cached = cur.execute("SELECT count(*) FILTER (WHERE NOT cache_hit) FROM llm_calls").fetchone()[0]
        cache = cur.execute("SELECT count(*), count(DISTINCT key), min(key) FROM llm_cache").fetchone()
    assert per_run == [(15,)] and 16 <= spans[0] and spans[1] <= 30 and missing == 0
    assert all(text_hash(text) == h and text_key(h) == key for h, text, key, _ in sample)  # as the product computes
    assert len(keys) == 50 and all(cache_key64(key) == key64 for key, _, _, key64 in keys)
    assert shared[0] < shared[1] - 2000 * 7  # the verifier's verdicts are a few texts
    assert len(calls_for_run(db, 1)) == 15 and all(c["prompt_text"] for c in calls_for_run(db, 1))
    assert cache[0] == cache[1] == cached and cache_get(db, cache[2])["prompt_tokens"] > 0
    db.close()


def test_a_new_process_finds_every_text_among_many(tmp_path):
    path = str(tmp_path / "many.duckdb")
    texts = [f"prompt {n}" for n in range(500)]
    writer = Database(path)
    run_with(writer, [call(t, None) for t in texts])
    writer.close()
    reader = Database(path)  # loads the index sorted from the store; a lookup in unsorted keys would miss
    run_with(reader, [call(t, None) for t in reversed(texts)])
    assert len(stored_texts(reader)) == 500 and len(reader.indexes.texts) == 500
    reader.close()


def test_a_cache_entry_is_found_from_a_new_process_and_never_taken_for_another_key(tmp_path, monkeypatch):
    path = str(tmp_path / "cache.duckdb")
    writer = Database(path)
    save_calls(writer, [], [CacheEntry("k1", "m", "d", {"v": 1}), CacheEntry("k2", "m", "d", {"v": 2})])
    writer.close()
    reader = Database(path)  # loads the index of cache keys from the store
    assert (
        cache_get(reader, "k1") == {"v": 1} and cache_get(reader, "k2") == {"v": 2} and cache_get(reader, "k3") is None
    )
    reader.close()

    monkeypatch.setattr("store.key_index.cache_key64", lambda key: 7)  # every key collides in its first 64 bits
    colliding = Database(str(tmp_path / "colliding.duckdb"))
    save_calls(colliding, [], [CacheEntry("a", "m", "d", {"v": "a"})])
    save_calls(colliding, [], [CacheEntry("b", "m", "d", {"v": "b"})])
    assert cache_get(colliding, "b") == {"v": "b"} and cache_get(colliding, "a") is None  # a miss, not b's reply
    with colliding.cursor() as cur:
        assert cur.execute("SELECT key FROM llm_cache ORDER BY id").fetchall() == [("a",), ("b",)]
    colliding.close()


def test_entries_saved_before_the_first_lookup_leave_the_older_ones_findable(tmp_path):
    path = str(tmp_path / "cache.duckdb")
    writer = Database(path)
    save_calls(writer, [], [CacheEntry("old", "m", "d", {"v": 1})])
    writer.close()
    process = Database(path)
    save_calls(process, [], [CacheEntry("new", "m", "d", {"v": 2})])  # a save, before any cache lookup
    assert cache_get(process, "old") == {"v": 1} and cache_get(process, "new") == {"v": 2}
    process.close()


@pytest.mark.parametrize("compact_at", [100_000, 0])  # 0: every commit merges its rows into the sorted arrays
def test_a_key_stored_twice_is_found_at_its_newest_row(tmp_path, monkeypatch, compact_at):
    monkeypatch.setattr("store.key_index.COMPACT_AT", compact_at)
    path = str(tmp_path / "twice.duckdb")
    writer = Database(path)
    for value in (1, 2):  # as two processes that did not know of each other's row would store it
        with writer.transaction() as cur:
            cur.execute(
                "INSERT INTO llm_texts (id, hash, text, cache_key64) VALUES (nextval('llm_texts_id_seq'), 'k1', ?, ?)",
                [cache_text(CacheEntry("k1", "m", "d", {"v": value})), cache_key64("k1")],
            )
    writer.close()
    reader = Database(path)  # loads the index sorted from the store
    assert cache_get(reader, "k1") == {"v": 2}
    save_calls(reader, [], [CacheEntry("k2", "m", "d", {"v": 3})])  # a commit, merging at compact_at 0
    assert cache_get(reader, "k1") == {"v": 2} and cache_get(reader, "k2") == {"v": 3}
    reader.close()
