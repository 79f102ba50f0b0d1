"""CLI output in a CI log (issue 51): tables printed whole when the output is not a terminal; `--format
table|markdown|json|csv` on gate, eval, runs, show, datasets and sweep (json and csv read back); the Markdown step
summary that gate and eval append to GITHUB_STEP_SUMMARY; numbers and times through pipeline/formatting.py."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime

import numpy as np
import pytest
from conftest import ROOT
from test_ci_gate import N, store_run
from test_history import make_runs
from test_store import sample_log

from pipeline.cli.main import main
from pipeline.evaluation.registry import metric_names
from pipeline.formatting import fmt_count, fmt_time
from store.runs import save_run

FORMATS = ("table", "markdown", "json", "csv")
GATE_HEADINGS = ("metric", "slice", "baseline", "new", "change", "95% interval", "p", "Holm p", "n", "verdict")


@pytest.fixture
def gated(db):
    """Two evaluations over every registered metric (the judge's among them); in the second, faithfulness
    dropped by 0.15."""
    rng = np.random.default_rng(5)
    base = {m: rng.uniform(0.85, 0.95, N) for m in metric_names()}
    worse = {**base, "faithfulness": base["faithfulness"] - 0.15 + rng.normal(0, 0.01, N)}
    store_run(db, "base", base)
    store_run(db, "worse", worse)
    return metric_names()


def to_file(monkeypatch, tmp_path, argv: list[str], name: str = "out.log") -> tuple[int, str]:
    """Run the CLI with its standard output redirected to a file, as a CI job's log is; the terminal it would
    otherwise guess is 80 columns wide."""
    monkeypatch.setenv("COLUMNS", "80")
    path = tmp_path / name
    previous = sys.stdout
    with open(path, "w", encoding="utf-8") as log:
        monkeypatch.setattr(sys, "stdout", log)
        try:
            code = main(argv)
        finally:
            monkeypatch.setattr(sys, "stdout", previous)
    return code, path.read_text(encoding="utf-8")


def formats(capsys, argv: list[str], code: int = 0) -> dict[str, str]:
    """The command's standard output in each format."""
    shown = {}
    for fmt in FORMATS:
        assert main([*argv, "--format", fmt]) == code
        shown[fmt] = capsys.readouterr().out
    return shown


def read_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def markdown_tables(text: str) -> list[list[str]]:
    """Each GitHub table in the text: its lines, the header first (a table is lines between blank lines, starting
    with '| ' and with a '| --- |' rule as its second line)."""
    tables = []
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("**"):
            lines = lines[1:]
        if len(lines) >= 2 and lines[0].startswith("| ") and set(lines[1]) <= set("|- "):
            tables.append(lines)
    return tables


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


# ---- tables whole in a file ----


def test_the_gate_written_to_a_file_names_every_metric_and_heading_whole(gated, monkeypatch, tmp_path):
    code, text = to_file(monkeypatch, tmp_path, ["gate", "--run", "worse", "--baseline", "base"])
    assert code == 1
    assert "…" not in text
    header = next(line for line in text.splitlines() if "verdict" in line)
    assert [h.strip() for h in header.strip("┃ ").split("┃")] == list(GATE_HEADINGS)
    rows = {line.split("┃" if "┃" in line else "│")[1].strip() for line in text.splitlines() if "│" in line}
    assert set(gated) <= rows  # every metric's full name, the five judge metrics among them
    assert any(name.startswith("judge_") for name in gated)
    assert "REGRESSION (drop)" in text


def test_runs_written_to_a_file_keep_every_heading_and_a_long_question_whole(db, monkeypatch, tmp_path):
    ids = make_runs(db, 6)
    long_question = "What " + "exactly " * 20 + "did the paper measure?"
    with db.cursor() as cur:
        cur.execute("UPDATE runs SET question = ? WHERE id = ?", [long_question, ids[-1]])
    code, text = to_file(monkeypatch, tmp_path, ["runs", "--limit", "5"])
    assert code == 0 and "…" not in text
    header = next(line for line in text.splitlines() if "question" in line)
    headings = [h.strip() for h in header.strip("┃ ").split("┃")]
    assert headings[:4] == ["id", "kind", "pipeline", "status"] and headings[-1] == "question"
    assert {"faithfulness", "attempts", "model", "latency", "tokens", "started"} <= set(headings)
    assert long_question in text
    with db.cursor() as cur:
        (started,) = cur.execute("SELECT started_at FROM runs WHERE id = ?", [ids[-1]]).fetchone()
    assert fmt_time(started) in text  # 24-hour time, as every page and export writes it


# ---- --format on each command ----


def test_gate_in_each_format(gated, capsys):
    shown = formats(capsys, ["gate", "--run", "worse", "--baseline", "base"], code=1)
    payload = json.loads(shown["json"])
    assert payload["regression"] is True and payload["baseline"] == "base"
    by_key = {(c["metric"], c["slice"]): c for c in payload["comparisons"]}
    rows = read_csv(shown["csv"])
    assert len(rows) == len(payload["comparisons"]) and {r["metric"] for r in rows} == set(gated)
    for row in rows:  # csv keeps raw values: the same numbers as json, not rounded for show
        c = by_key[(row["metric"], row["slice"])]
        assert float(row["new_value"]) == c["new_value"] and row["verdict"]
        assert row["p_value"] == "" if c["p_value"] is None else float(row["p_value"]) == c["p_value"]
    [table] = markdown_tables(shown["markdown"])
    assert cells(table[0]) == list(GATE_HEADINGS)
    assert {cells(line)[0] for line in table[2:]} == set(gated)
    assert len(table) == 2 + len(rows)
    assert "REGRESSION (drop)" in shown["table"] and all(h in shown["table"] for h in GATE_HEADINGS)
    assert main(["gate", "--run", "worse", "--baseline", "base", "--json"]) == 1  # --json: the old spelling
    assert json.loads(capsys.readouterr().out) == payload


def test_runs_in_each_format_and_grouped(db, capsys):
    ids = make_runs(db, 5)
    shown = formats(capsys, ["runs"])
    payload = json.loads(shown["json"])
    assert [r["id"] for r in payload] == sorted(ids, reverse=True)
    rows = read_csv(shown["csv"])
    assert [int(r["id"]) for r in rows] == [r["id"] for r in payload]
    assert [float(r["faithfulness"]) for r in rows] == [r["faithfulness"] for r in payload]
    assert all(datetime.fromisoformat(r["started_at"]) for r in rows)  # times in ISO 8601
    [table] = markdown_tables(shown["markdown"])
    assert cells(table[0])[:2] == ["id", "kind"] and len(table) == 2 + len(ids)
    grouped = formats(capsys, ["runs", "--group-by", "model"])
    groups = json.loads(grouped["json"])
    assert sorted(r["group"] for r in read_csv(grouped["csv"])) == sorted(g["group"] for g in groups)
    assert sum(int(r["runs"]) for r in read_csv(grouped["csv"])) == len(ids)
    assert cells(markdown_tables(grouped["markdown"])[0][0])[:2] == ["model", "runs"]


def test_show_in_each_format(db, capsys):
    run_id = save_run(db, sample_log("How big was the index?"))  # one attempt, one supported claim "A."
    shown = formats(capsys, ["show", str(run_id)])
    payload = json.loads(shown["json"])
    assert payload["run_id"] == run_id and [c["claim"] for c in payload["claims"]] == ["A."]
    [claim] = read_csv(shown["csv"])
    assert (int(claim["claim_no"]), claim["verdict"], claim["claim"]) == (1, "supported", "A.")
    assert claim["verifier"] == payload["claims"][0]["verifier"]
    assert "question: How big was the index?" in shown["markdown"]
    [table] = markdown_tables(shown["markdown"])
    assert cells(table[0]) == ["#", "verdict", "claim", "evidence", "source"]
    assert cells(table[2])[:3] == ["1", "supported", "A."]
    assert "question: How big was the index?" in shown["table"] and "supported" in shown["table"]


def test_datasets_and_a_datasets_items_in_each_format(db, capsys, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join((ROOT / "data" / "eval" / "golden.jsonl").read_text().splitlines(True)[:3]))
    assert main(["datasets", "import", str(golden)]) == 0
    capsys.readouterr()
    shown = formats(capsys, ["datasets"])
    [listed] = json.loads(shown["json"])
    [row] = read_csv(shown["csv"])
    assert (
        (row["name"], int(row["items"]), int(row["latest_version"]))
        == ("golden", 3, 1)
        == (
            listed["name"],
            listed["items"],
            listed["latest_version"],
        )
    )
    assert datetime.fromisoformat(row["created_at"]) == datetime.fromisoformat(listed["created_at"])
    assert cells(markdown_tables(shown["markdown"])[0][0]) == [
        "name",
        "latest version",
        "versions",
        "items",
        "origin",
        "created",
    ]
    items = formats(capsys, ["datasets", "show", "golden"])
    ids = [item["id"] for item in json.loads(items["json"])["items"]]
    assert [r["id"] for r in read_csv(items["csv"])] == ids and len(ids) == 3
    versions, item_table = markdown_tables(items["markdown"])
    assert cells(versions[0])[0] == "version" and [cells(line)[0] for line in item_table[2:]] == ids


def test_a_count_reads_with_thousands_separators_in_table_and_markdown_and_raw_in_json_and_csv(db, capsys):
    ids = make_runs(db, 1)
    with db.cursor() as cur:
        cur.execute(
            "INSERT INTO llm_calls (run_id, stage, model, prompt_tokens, completion_tokens, latency_ms, cache_hit, "
            "started_at) VALUES (?, 'generate', 'm', 21000, 404, 5, false, ?)",
            [ids[0], datetime(2026, 1, 1)],
        )
        cur.execute("UPDATE runs SET latency_ms = 1250 WHERE id = ?", [ids[0]])
    shown = formats(capsys, ["runs"])
    assert fmt_count(21404) == "21,404"
    assert "21,404" in shown["table"] and "21,404" in shown["markdown"] and "1.2 s" in shown["markdown"]
    assert json.loads(shown["json"])[0]["tokens"] == 21404
    [row] = read_csv(shown["csv"])
    assert float(row["tokens"]) == 21404 and float(row["latency_ms"]) == 1250


# ---- the step summary ----


def test_the_gate_appends_its_summary_to_the_step_summary_each_time(gated, capsys, monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step's summary\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["gate", "--run", "worse", "--baseline", "base"]) == 1
    assert main(["gate", "--run", "base", "--format", "json"]) == 0  # no baseline: the floors only, none set
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# an earlier step's summary\n")  # appended, never overwritten
    first, second = text.split("### Gate: ")[1:]
    assert first.startswith("worse vs base") and "**2 regressions**" in first  # faithfulness: all, rag
    assert "exit 1: a regression" in first
    [table] = markdown_tables(first)
    assert cells(table[0]) == list(GATE_HEADINGS) and {cells(line)[0] for line in table[2:]} == set(gated)
    faithfulness = next(cells(line) for line in table[2:] if cells(line)[:2] == ["faithfulness", "all"])
    assert faithfulness[-1] == "REGRESSION (drop)" and faithfulness[4].startswith("-0.1")  # the change
    assert second.startswith("base vs no baseline (floors only)") and "exit 0: passed" in second
    capsys.readouterr()


@pytest.mark.slow
def test_eval_in_each_format_appends_its_summary_and_sweep_in_each_format(fake, kb_db, capsys, monkeypatch, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join((ROOT / "data" / "eval" / "golden.jsonl").read_text().splitlines(True)[:2]))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    argv = ["eval", str(golden), "--name", "nightly", "--metrics", "faithfulness,judge_correctness"]
    shown = formats(capsys, argv)  # the first run evaluates; the next three resume it: every item done
    payload = json.loads(shown["json"])
    means = {m["metric"]: m["mean"] for m in payload["metrics"]}
    assert set(means) == {"faithfulness", "judge_correctness"}
    rows = read_csv(shown["csv"])
    assert {r["metric"]: float(r["mean"]) for r in rows} == means
    assert {r["metric"]: int(r["n"]) for r in rows} == {m["metric"]: m["n"] for m in payload["metrics"]}
    table = markdown_tables(shown["markdown"])[0]
    assert cells(table[0])[:3] == ["metric", "component", "mean"]
    assert "diagnosis: " in shown["markdown"] and "judge_correctness" in shown["table"]
    text = summary.read_text(encoding="utf-8")
    assert text.count("### Evaluation nightly") == 4 and text.count("exit 0: every item finished") == 4
    assert all(name in text for name in ("faithfulness", "judge_correctness"))

    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    sweep = ["sweep", str(golden), "--name", "k", "--grid", "top_k=3,5", "--metrics", "context_recall"]
    board = formats(capsys, sweep)
    combinations = json.loads(board["json"])
    assert [c["combination"] for c in combinations] == ["top_k=3", "top_k=5"]
    rows = read_csv(board["csv"])
    assert [r["combination"] for r in rows] == ["top_k=3", "top_k=5"]
    for row, c in zip(rows, combinations, strict=True):
        recall = c["metrics"]["context_recall"]["mean"]
        assert float(row["context_recall_mean"]) == recall and int(row["calls"]) == c["calls"]
    metrics_table, costs_table = markdown_tables(board["markdown"])
    assert cells(metrics_table[0]) == ["combination", "status", "context_recall"]
    assert cells(costs_table[0])[:3] == ["combination", "items", "latency p50"]
    listed = formats(capsys, ["sweep", "--list"])
    assert [r["name"] for r in read_csv(listed["csv"])] == [s["name"] for s in json.loads(listed["json"])] == ["k"]
