"""Run history: filters and paging return exactly the right rows; exports round-trip; spans highlight."""

import json
import re
from datetime import datetime, timedelta, timezone

import duckdb
import pytest

from pages.views.markup import highlighted_chunk
from pipeline.answering.engine import VerifiedQueryEngine, final_result
from pipeline.answering.events import AnswerResult, Attempt
from pipeline.cli.main import main
from pipeline.history.runs import RunFilter, list_runs, load_run
from pipeline.verification.faithfulness import CheckedClaim, Passage
from store.history import count_runs, export_runs, query_runs
from store.records import AttemptRecord, ClaimRecord, RetrievalRecord, RunLog, RunRecord
from store.runs import get_run, save_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_runs(db, n=30):
    """Runs with known fields: id i has kind eval when i % 3 == 0, status flagged when i % 4 == 0, ..."""
    ids = []
    for i in range(1, n + 1):
        run = RunRecord(
            kind="eval" if i % 3 == 0 else "chat",
            question=f"question {i} about topic{i % 5}",
            status="flagged" if i % 4 == 0 else "accepted",
            started_at=T0 + timedelta(days=i),
            answer=f"answer {i} mentions Zebra" if i % 7 == 0 else f"answer {i}",
            faithfulness=i / n,
            n_attempts=1,
            final_attempt=1,
            generator_model="qwen" if i % 2 else "llama3.2",
        )
        claims = [ClaimRecord(1, 1, f"claim of run {i}", "supported", "precheck", None, None, None, None, "ok")]
        ids.append(save_run(db, RunLog(run, claims=claims)))
    return ids


def expected(ids, keep):
    return sorted([run_id for i, run_id in enumerate(ids, start=1) if keep(i)], reverse=True)


@pytest.mark.parametrize(
    "run_filter, keep",
    [
        (RunFilter(), lambda i: True),
        (RunFilter(kinds=["eval"]), lambda i: i % 3 == 0),
        (RunFilter(statuses=["flagged"], models=["qwen"]), lambda i: i % 4 == 0 and i % 2),
        (RunFilter(faithfulness_min=0.5, faithfulness_max=0.7), lambda i: 0.5 <= i / 30 <= 0.7),
        (RunFilter(since=T0 + timedelta(days=10), until=T0 + timedelta(days=13)), lambda i: 10 <= i < 13),
        (RunFilter(text="zebra"), lambda i: i % 7 == 0),
        (RunFilter(text="TOPIC3", kinds=["chat"]), lambda i: i % 5 == 3 and i % 3 != 0),
        (RunFilter(text="'; DROP TABLE runs; --"), lambda i: False),
    ],
)
@pytest.mark.slow
def test_filters_return_exactly_the_right_rows(db, run_filter, keep):
    ids = make_runs(db)
    want = expected(ids, keep)
    got = [r["id"] for r in query_runs(db, run_filter, 1, 100)]
    assert got == want and count_runs(db, run_filter) == len(want)


@pytest.mark.slow
def test_pages_partition_the_runs_newest_first(db):
    ids = make_runs(db)
    pages = [[r["id"] for r in query_runs(db, RunFilter(), p, 7)] for p in range(1, 6)]
    assert [len(p) for p in pages] == [7, 7, 7, 7, 2]
    assert sum(pages, []) == sorted(ids, reverse=True)


def test_tag_filter_uses_evaluation_items(db):
    ids = make_runs(db, 3)
    with db.cursor() as cur:
        cur.execute(
            "INSERT INTO eval_items (eval_run_id, item_id, run_id, status, question, tags) VALUES "
            "(1, 'a', ?, 'done', 'q', ['numeric', 'rag']), (1, 'b', ?, 'done', 'q', ['rag'])",
            [ids[0], ids[1]],
        )
    assert [r["id"] for r in query_runs(db, RunFilter(tags=["numeric"]))] == [ids[0]]
    assert [r["id"] for r in query_runs(db, RunFilter(tags=["rag"]))] == [ids[1], ids[0]]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
@pytest.mark.slow
def test_exports_round_trip(db, tmp_path, fmt):
    ids = make_runs(db, 10)
    path = tmp_path / f"runs.{fmt}"
    assert export_runs(db, RunFilter(statuses=["flagged"]), fmt, str(path)) == 2
    reader = {"csv": "read_csv", "parquet": "read_parquet", "jsonl": "read_json"}[fmt]
    rows = duckdb.sql(f"SELECT * FROM {reader}('{path}') ORDER BY id DESC").fetchall()
    names = duckdb.sql(f"SELECT * FROM {reader}('{path}')").columns
    by_name = [dict(zip(names, row, strict=True)) for row in rows]
    assert [r["id"] for r in by_name] == [ids[7], ids[3]]
    assert by_name[0]["question"] == "question 8 about topic3" and by_name[0]["faithfulness"] == pytest.approx(0.8)
    if fmt == "jsonl":
        first = json.loads(path.read_text().splitlines()[0])
        assert first["claims"] == [
            {
                "claim_no": 1,
                "text": "claim of run 8",
                "verdict": "supported",
                "verifier": "precheck",
                "evidence": None,
                "reason": "ok",
            }
        ]


def test_highlighted_chunk_marks_exactly_the_span():
    text = "Alpha beta. The index held 21 million passages. Gamma [1]."
    start = text.index("The index")
    end = text.index("passages.") + len("passages.")
    markdown = highlighted_chunk(text, (start, end))
    assert markdown == ("Alpha beta\\. :green-background[**The index held 21 million passages\\.**] Gamma \\[1\\]\\.")
    assert highlighted_chunk(text, None) == "Alpha beta\\. The index held 21 million passages\\. Gamma \\[1\\]\\."


def test_cli_runs_and_show(fake, kb_db, capsys):
    assert main(["ask", "--quiet", "How many passages were in the Wikipedia index of the RAG paper?"]) == 0
    capsys.readouterr()
    assert main(["runs", "--json", "--status", "accepted"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["status"] == "accepted"
    assert main(["show", str(rows[0]["id"])]) == 0
    out = capsys.readouterr().out
    assert "attempt 1: accepted, faithfulness 1.00" in out and "21 million passages" in out
    assert main(["show", "--json", str(rows[0]["id"])]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "accepted" and shown["scores"] == []
    stages = [c["stage"] for c in shown["calls"]]  # in the order they finished: the grade, the generation and the
    assert stages[0] == "embed_query" and {"grade_context", "generate"} <= set(stages)  # checks run side by side
    assert main(["show", "999"]) == 2
    assert "there is no run 999" in capsys.readouterr().err


QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"
INVENTED = "The RAG index held 21 million passages [1]. The RAG paper won the best paper award at ICML 2019 [1]."


def claims_of(result: AnswerResult) -> list[tuple]:
    return [
        (
            a.record.attempt_no,
            c.claim_no,
            c.text,
            c.verdict,
            c.verifier,
            c.span,
            c.evidence,
            c.reason,
            c.passage.chunk_id if c.passage else None,
        )
        for a in result.attempts
        for c in a.claims
    ]


def test_a_stored_run_reads_back_as_the_result_the_engine_produced(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=lambda body: not body.get("format"))
    live = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    assert len(live.attempts) == 2 and live.status == "accepted"
    stored = load_run(kb_db, live.run_id)
    back = stored.result
    for name in (
        "run_id",
        "status",
        "question",
        "answer",
        "faithfulness",
        "final_attempt",
        "rewritten_query",
        "abstain_reason",
        "error",
        "kind",
        "generator_model",
        "config",
    ):
        assert getattr(back, name) == getattr(live, name), name
    assert back.latency_ms == pytest.approx(live.latency_ms)
    assert [a.record for a in back.attempts] == [a.record for a in live.attempts]
    assert claims_of(back) == claims_of(live)
    assert [(p.n, p.chunk_id, p.source, p.text) for p in back.passages] == [
        (p.n, p.chunk_id, p.source, p.text) for p in live.passages
    ]
    assert [c["stage"] for c in stored.calls].count("generate") == 2 and stored.scores == []
    assert [(g["round"], g["relevant"]) for g in stored.grades] == [(1, True)]
    assert [r["text"] for r in stored.retrievals] == [p.text for p in live.passages]


def test_the_run_row_is_derived_from_the_result(fake, settings, kb_db):
    fake.enqueue(INVENTED, model="llama3.2", match=lambda body: not body.get("format"))
    live = final_result(VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION))
    row = get_run(kb_db, live.run_id)
    final = live.attempts[-1].record
    assert (
        row["status"],
        row["answer"],
        row["faithfulness"],
        row["final_attempt"],
        row["n_attempts"],
        row["n_claims"],
        row["n_supported"],
    ) == (live.status, live.answer, live.faithfulness, 2, 2, final.n_claims, final.n_supported)
    assert [c["text"] for c in row["claims"]] == [c[2] for c in claims_of(live)]
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", live.answer)}
    assert cited and {r["rank"] for r in row["retrievals"] if r["cited"]} == cited


def test_a_run_the_consumer_abandons_is_stored_once_as_cancelled(fake, settings, kb_db):
    events = VerifiedQueryEngine(settings=settings, db=kb_db).stream(QUESTION)
    assert next(events).kind == "retrieve"
    events.close()
    rows = list_runs(kb_db, RunFilter())
    assert [(r["status"], r["n_attempts"]) for r in rows] == [("cancelled", 0)]
    stored = load_run(kb_db, rows[0]["id"])
    assert stored.result.answer is None and len(stored.retrievals) == settings.top_k


def test_to_log_marks_as_cited_only_the_final_rounds_chunks_the_answer_cites():
    passage = Passage(2, 12, "/kb/rag.md", "RAG used 21 million passages.", 0.8)
    claim = CheckedClaim(1, "RAG used 21 million passages.", "supported", "precheck", passage, (0, 29))
    attempt = Attempt(AttemptRecord(1, False, "RAG used 21 million passages [2].", "verified", 1.0, 1, 1), [claim])
    result = AnswerResult(
        kind="chat",
        status="accepted",
        question="q",
        started_at=T0,
        answer=attempt.record.answer,
        faithfulness=1.0,
        attempts=[attempt],
        final_attempt=1,
        passages=[passage],
        latency_ms=5.0,
    )
    retrievals = [
        RetrievalRecord(1, "q", 2, 11, 0.5),
        RetrievalRecord(2, "rewritten", 1, 13, 0.9),
        RetrievalRecord(2, "rewritten", 2, 12, 0.8),
    ]
    log = result.to_log([], retrievals, T0 + timedelta(seconds=1))
    assert [r.cited for r in log.retrievals] == [False, False, True]
    assert not any(r.cited for r in retrievals)  # the engine's records are left as they were
    assert (log.run.n_attempts, log.run.n_claims, log.run.n_supported, log.run.final_attempt) == (1, 1, 1, 1)
    assert log.claims == [ClaimRecord(1, 1, claim.text, "supported", "precheck", 12, 0, 29, claim.text, "")]
