"""Run history: filters and paging return exactly the right rows; exports round-trip; spans highlight."""
import json
from datetime import datetime, timedelta, timezone

import duckdb
import pytest

from pipeline.cli.main import main
from pipeline.history.present import highlighted_chunk
from store.history import RunFilter, count_runs, export_runs, query_runs
from store.records import ClaimRecord, RunLog, RunRecord
from store.runs import save_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_runs(db, n=30):
    """Runs with known fields: id i has kind eval when i % 3 == 0, status flagged when i % 4 == 0, ..."""
    ids = []
    for i in range(1, n + 1):
        run = RunRecord(kind="eval" if i % 3 == 0 else "chat", question=f"question {i} about topic{i % 5}",
                        status="flagged" if i % 4 == 0 else "accepted", started_at=T0 + timedelta(days=i),
                        answer=f"answer {i} mentions Zebra" if i % 7 == 0 else f"answer {i}",
                        faithfulness=i / n, n_attempts=1, final_attempt=1,
                        generator_model="qwen" if i % 2 else "llama3.2")
        claims = [ClaimRecord(1, 1, f"claim of run {i}", "supported", "precheck", None, None, None, None, "ok")]
        ids.append(save_run(db, RunLog(run, claims=claims)))
    return ids


def expected(ids, keep):
    return sorted([run_id for i, run_id in enumerate(ids, start=1) if keep(i)], reverse=True)


@pytest.mark.parametrize("run_filter, keep", [
    (RunFilter(), lambda i: True),
    (RunFilter(kinds=["eval"]), lambda i: i % 3 == 0),
    (RunFilter(statuses=["flagged"], models=["qwen"]), lambda i: i % 4 == 0 and i % 2),
    (RunFilter(faithfulness_min=0.5, faithfulness_max=0.7), lambda i: 0.5 <= i / 30 <= 0.7),
    (RunFilter(since=T0 + timedelta(days=10), until=T0 + timedelta(days=13)), lambda i: 10 <= i < 13),
    (RunFilter(text="zebra"), lambda i: i % 7 == 0),
    (RunFilter(text="TOPIC3", kinds=["chat"]), lambda i: i % 5 == 3 and i % 3 != 0),
    (RunFilter(text="'; DROP TABLE runs; --"), lambda i: False),
])
def test_filters_return_exactly_the_right_rows(db, run_filter, keep):
    ids = make_runs(db)
    want = expected(ids, keep)
    got = [r["id"] for r in query_runs(db, run_filter, 1, 100)]
    assert got == want and count_runs(db, run_filter) == len(want)


def test_pages_partition_the_runs_newest_first(db):
    ids = make_runs(db)
    pages = [[r["id"] for r in query_runs(db, RunFilter(), p, 7)] for p in range(1, 6)]
    assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
    assert sum(pages, []) == sorted(ids, reverse=True)


def test_tag_filter_uses_evaluation_items(db):
    ids = make_runs(db, 3)
    with db.cursor() as cur:
        cur.execute("INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags) VALUES "
                    "(1, 'a', ?, 'done', 'q', ['numeric', 'rag']), (1, 'b', ?, 'done', 'q', ['rag'])",
                    [ids[0], ids[1]])
    assert [r["id"] for r in query_runs(db, RunFilter(tags=["numeric"]))] == [ids[0]]
    assert [r["id"] for r in query_runs(db, RunFilter(tags=["rag"]))] == [ids[1], ids[0]]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_exports_round_trip(db, tmp_path, fmt):
    ids = make_runs(db, 10)
    path = tmp_path / f"runs.{fmt}"
    assert export_runs(db, RunFilter(statuses=["flagged"]), fmt, str(path)) == 2
    reader = {"csv": "read_csv", "parquet": "read_parquet", "jsonl": "read_json"}[fmt]
    rows = duckdb.sql(f"SELECT * FROM {reader}('{path}') ORDER BY id DESC").fetchall()
    names = duckdb.sql(f"SELECT * FROM {reader}('{path}')").columns
    by_name = [dict(zip(names, row)) for row in rows]
    assert [r["id"] for r in by_name] == [ids[7], ids[3]]
    assert by_name[0]["question"] == "question 8 about topic3" and by_name[0]["faithfulness"] == pytest.approx(0.8)
    if fmt == "jsonl":
        first = json.loads(path.read_text().splitlines()[0])
        assert first["claims"] == [{"claim_no": 1, "text": "claim of run 8", "verdict": "supported",
                                    "verifier": "precheck", "evidence": None, "reason": "ok"}]


def test_highlighted_chunk_marks_exactly_the_span():
    text = "Alpha beta. The index held 21 million passages. Gamma [1]."
    start = text.index("The index")
    end = text.index("passages.") + len("passages.")
    markdown = highlighted_chunk(text, (start, end))
    assert markdown == ("Alpha beta\\. :green-background[**The index held 21 million passages\\.**] "
                        "Gamma \\[1\\]\\.")
    assert highlighted_chunk(text, None) == "Alpha beta\\. The index held 21 million passages\\. Gamma \\[1\\]\\."


def test_cli_runs_and_show(fake, kb_db, capsys):
    assert main(["ask", "--quiet", "How many passages were in the Wikipedia index of the RAG paper?"]) == 0
    capsys.readouterr()
    assert main(["runs", "--json", "--status", "accepted"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["status"] == "accepted"
    assert main(["show", str(rows[0]["id"])]) == 0
    out = capsys.readouterr().out
    assert "attempt 1: verified, faithfulness 1.00" in out and "21 million passages" in out
    assert main(["show", "999"]) == 2
    assert "there is no run 999" in capsys.readouterr().err
