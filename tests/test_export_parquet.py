"""`export-parquet DIR`: every table as Parquet, partitioned by day, read back with DuckDB and compared with the
store per table (row count, column types, and per column a count and an order-insensitive hash sum)."""

from __future__ import annotations

import json
import re
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from test_faults import ask

from bench.scale import sample_log
from pipeline.cli.main import main
from pipeline.evaluation.dataset import Dataset, GoldenItem
from pipeline.evaluation.runner import run_evaluation
from store.alerts import pin_baseline, replace_open_alerts
from store.annotations import save_rating
from store.runs import save_run

ITEMS = [
    GoldenItem(id="q1", question="How many passages were in the Wikipedia index of the RAG paper?", tags=["rag"]),
    GoldenItem(id="q2", question="What does MiniCheck check?", reference="claims against documents", tags=["v"]),
]


def run_days_ago(i: int, days: int):
    """A chat run as the engine logs it, dated `days` back: its calls and spans too."""
    log = sample_log(i)
    shift = timedelta(days=days)
    log.run.started_at -= shift
    log.run.finished_at -= shift
    for record in log.calls + log.spans:
        record.started_at -= shift
    return log


def fill(settings, db) -> None:
    """A store filled through the product's own save paths: a chat answer (runs, attempts, claims, retrievals,
    calls and their texts, spans, cache), runs of three earlier days, an evaluation with scores, an alert,
    a baseline pin and a rating."""
    ask(settings, db)
    for days in (1, 2, 2, 9):
        save_run(db, run_days_ago(days, days))
    outcome = run_evaluation(settings, db, Dataset("golden.jsonl", ITEMS, content_hash="h1"), "nightly", concurrency=1)
    assert outcome.progress.failed == 0
    eval_id = db_value(db, "SELECT id FROM eval_runs WHERE name = 'nightly'")
    alert = dict(
        kind="drop", metric="faithfulness", slice="all", baseline_value=0.9, new_value=0.6, delta=-0.3,
        ci_low=-0.4, ci_high=-0.2, n=2, component="generator", message="faithfulness dropped by 0.30",
        config_diff={"top_k": [5, 2]}, worst_items=[{"item": "q1", "delta": -0.5}],
    )  # fmt: skip
    replace_open_alerts(db, eval_id, None, [alert])
    pin_baseline(db, "golden.jsonl", eval_id)
    save_rating(db, 1, "ana", {"correctness": 4, "helpfulness": 5, "faithfulness": 4}, "fine", {(1, 1): "supported"})


def db_value(db, sql: str):
    with db.cursor() as cur:
        return cur.execute(sql).fetchone()[0]


def columns(con, relation: str) -> list[tuple[str, str]]:
    return [(row[0], row[1]) for row in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]


def fingerprint(con, relation: str, names: list[str]) -> tuple:
    """Rows, and per column the non-NULL count and the sum of the hashes of its values as text: equal for the
    same rows in any order, and a duplicate row counts twice (a sum, where an XOR would cancel it out)."""
    parts = ["count(*)"] + [f'count("{n}"), sum(hash("{n}"::VARCHAR)::HUGEINT)' for n in names]
    return con.execute(f"SELECT {', '.join(parts)} FROM {relation}").fetchone()


def read_back(folder: Path, table: str) -> str:
    return f"read_parquet('{folder / table}/**/*.parquet', hive_partitioning = true)"


def mismatches(store_path: str, folder: Path) -> dict[str, str]:
    """Per table that does not round-trip, what differs."""
    bad = {}
    con = duckdb.connect(store_path, read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        exported = sorted(p.name for p in folder.iterdir() if p.is_dir())
        if exported != tables:
            bad["*"] = f"tables {exported} != {tables}"
        for table in tables:
            stored = columns(con, f'"{table}"')
            names = [n for n, _ in stored]
            try:
                back = [c for c in columns(con, read_back(folder, table)) if c[0] != "day"]
                if back != stored:
                    bad[table] = f"columns {back} != {stored}"
                elif fingerprint(con, read_back(folder, table), names) != fingerprint(con, f'"{table}"', names):
                    bad[table] = "rows or values differ"
            except duckdb.Error as exc:
                bad[table] = str(exc).splitlines()[0]
    finally:
        con.close()
    return bad


@pytest.mark.slow
def test_every_table_round_trips_through_parquet_partitioned_by_day(kb_db, settings, tmp_path, capsys):
    fill(settings, kb_db)
    folder = tmp_path / "export"
    assert main(["export-parquet", str(folder)]) == 0
    out = capsys.readouterr().out
    kb_db.close()

    assert mismatches(settings.store_path, folder) == {}
    con = duckdb.connect(settings.store_path, read_only=True)
    counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in ("runs", "scores", "llm_texts")}
    con.close()
    assert counts["runs"] == 1 + 4 + len(ITEMS) and counts["scores"] > 0 and counts["llm_texts"] > 0
    assert sorted(p.name for p in (folder / "runs").iterdir()) == sorted(
        f"day={d}" for d in {r.run.started_at.date().isoformat() for r in map(run_days_ago, (0, 1, 2, 9), (0, 1, 2, 9))}
    )
    # every row lies in the partition of its own day
    wrong_day = (
        duckdb.connect()
        .execute(
            f"SELECT count(*) FROM {read_back(folder, 'runs')} WHERE day IS DISTINCT FROM CAST(started_at AS DATE)"
        )
        .fetchone()[0]
    )
    assert wrong_day == 0
    assert (folder / "claims" / "data_0.parquet").is_file()  # no timestamp: one file, said in the output
    assert (folder / "chunk_flags" / "data_0.parquet").is_file()  # empty: a file that keeps the columns
    manifest = {t["table"]: t for t in json.loads((folder / "export.json").read_text())["tables"]}
    assert manifest["runs"]["day_of"] == "started_at" and manifest["runs"]["rows"] == counts["runs"]
    assert manifest["scores"]["day_of"] == "created_at" and manifest["claims"]["day_of"] is None
    assert re.search(rf"runs +│ {counts['runs']} +│ day of started_at +│ 4 days", out)
    assert "unpartitioned (no timestamp column)" in out and "unpartitioned (no rows)" in out
    assert "one consistent state of the store" in out

    # the comparison sees a lost partition and a lost column
    shutil.rmtree(sorted((folder / "runs").iterdir())[0])
    claims = folder / "claims" / "data_0.parquet"
    duckdb.connect().execute(
        f"COPY (SELECT * EXCLUDE (reason) FROM '{claims}') TO '{tmp_path}/c.parquet' (FORMAT parquet)"
    )
    shutil.move(tmp_path / "c.parquet", claims)
    assert set(mismatches(settings.store_path, folder)) == {"runs", "claims"}


def test_an_empty_store_exports_every_table_without_rows(settings, tmp_path, capsys):
    folder = tmp_path / "export"
    assert main(["export-parquet", str(folder)]) == 0
    assert mismatches(settings.store_path, folder) == {}
    out = capsys.readouterr().out
    assert "runs" in out and "unpartitioned (no rows)" in out


def test_a_folder_that_is_not_empty_is_refused_and_left_as_it_was(settings, tmp_path, capsys):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    assert main(["export-parquet", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "is not empty; nothing was written" in err and "new or empty folder" in err
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


def test_a_failed_export_says_why_and_leaves_no_half_written_folder(settings, tmp_path, monkeypatch, capsys):
    from store import export

    real = export._copy

    def disk_full_at_runs(cur, query, target, partitioned):
        if "runs" in target.parts:
            raise duckdb.IOException('IO Error: Could not write file "x": No space left on device')
        return real(cur, query, target, partitioned)

    monkeypatch.setattr(export, "_copy", disk_full_at_runs)
    folder = tmp_path / "export"
    assert main(["export-parquet", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "the Parquet export stopped at table runs" in err and "No space left on device" in err
    assert not folder.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export-parquet", str(empty)]) == 1
    assert empty.is_dir() and not any(empty.iterdir())


def test_the_export_is_one_state_of_the_store_while_a_run_is_saved_midway(kb_db, settings, tmp_path, monkeypatch):
    from pipeline.history.export import export_parquet
    from store import export

    save_run(kb_db, sample_log(1))
    real = export.export_table

    def saving_midway(cur, table, folder):
        if table == "llm_calls":  # tables go in name order: llm_calls, then runs and spans
            save_run(kb_db, sample_log(2))
        return real(cur, table, folder)

    monkeypatch.setattr(export, "export_table", saving_midway)
    rows = {t.table: t.rows for t in export_parquet(kb_db, tmp_path / "export").tables}
    log = sample_log(1)
    assert (rows["runs"], rows["llm_calls"], rows["spans"]) == (1, len(log.calls), len(log.spans))
    assert db_value(kb_db, "SELECT count(*) FROM runs") == 2  # saved, after the export's snapshot began
