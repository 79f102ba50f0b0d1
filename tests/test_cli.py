import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import KB, ROOT

from pipeline.cli.main import main

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"


def test_ask_prints_the_answer_steps_and_claim_table(kb_db, capsys):
    assert main(["ask", QUESTION]) == 0
    out, err = capsys.readouterr()
    assert "21 million passages" in out
    assert "accepted · faithfulness 1.00 (claims: auto) · 1 attempt" in out
    assert "supported" in out and "rag.md" in out
    assert "· retrieved 5 chunks" in err and "· claim 1: supported" in err


def test_ask_json_is_machine_readable(kb_db, capsys):
    assert main(["ask", "--json", "--quiet", QUESTION]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "accepted" and result["faithfulness"] == 1.0
    assert all(c["verdict"] == "supported" and c["evidence"] for c in result["claims"])


def test_ask_exits_non_zero_with_the_fix_when_ollama_is_down(fake, kb_db, capsys):
    fake.stop()
    assert main(["ask", QUESTION]) == 1
    out, _ = capsys.readouterr()
    assert "Ollama is not reachable" in out and "ollama serve" in out


def test_ask_refuses_an_empty_question(kb_db, capsys):
    assert main(["ask", "  "]) == 2
    assert "the question is empty" in capsys.readouterr().err


def test_doctor_prints_the_fix_for_each_problem(fake, db, capsys):
    fake.remove_model("bespoke-minicheck")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "ok   model llama3.2: pulled" in out
    assert "FAIL model bespoke-minicheck: not pulled (verifier)" in out
    assert "fix: `ollama pull bespoke-minicheck`" in out
    assert "FAIL knowledge base: no documents ingested" in out
    assert "fix: `python -m pipeline ingest data/kb`" in out


def test_doctor_when_ollama_is_down(fake, db, capsys):
    fake.stop()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL ollama: Ollama is not reachable" in out and "fix: start it with `ollama serve`" in out
    assert "ok   store:" in out


def test_doctor_all_green(kb_db, capsys):
    assert main(["doctor"]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_ingest_reports_each_file_and_skips_bad_ones(settings, db, tmp_path, capsys):
    shutil.copy(KB / "rag.md", tmp_path / "rag.md")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00\x00")
    assert main(["ingest", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "added" in out and "rag.md" in out
    assert "skipped" in out and "binary file" in out
    assert "1 file ingested or unchanged, 1 skipped" in out
    with db.cursor() as cur:
        stages = [r[0] for r in cur.execute("SELECT stage FROM llm_calls WHERE run_id IS NULL").fetchall()]
    # the command records its model calls: the chunks' embeddings, then the similarity scale measured on them
    assert sorted(stages) == ["embed_documents", "embed_queries"]
    assert main(["ingest", "--if-empty", str(tmp_path)]) == 0
    assert "nothing to do" in capsys.readouterr().out


@pytest.mark.slow
def test_python_dash_m_pipeline_runs(fake, db):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "doctor"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "knowledge base: no documents ingested" in done.stdout


def test_a_locked_store_is_an_error_that_says_what_to_do(fake, settings, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_STORE_LOCK_TIMEOUT_S", "0.5")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb, sys
        con = duckdb.connect({settings.store_path!r})
        print("locked", flush=True)
        sys.stdin.read()  # holds the lock until the test kills it (or its stdin closes), however long that takes
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["runs"]) == 1
    finally:
        holder.kill()
        holder.communicate()  # and close its pipes
    err = capsys.readouterr().err
    assert f"error: the store {settings.store_path} stayed locked by another process for 0.5 s" in err
    assert "wait for the other workbench process" in err


def test_a_store_that_cannot_be_opened_is_an_error_with_its_fix(fake, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path))
    assert main(["show", "1"]) == 1
    err = capsys.readouterr().err
    assert f"error: cannot open the store {tmp_path}" in err and "check the path in WORKBENCH_DB" in err


def test_show_json_says_which_scores_a_second_evaluation_replayed_from_the_cache(fake, kb_db, capsys, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text((ROOT / "data" / "eval" / "golden.jsonl").read_text().splitlines(True)[0])
    argv = ["eval", str(golden), "--metrics", "judge_correctness,faithfulness", "--concurrency", "1", "--json"]
    shown = {}
    for name in ("first", "second"):
        assert main([*argv, "--name", name]) == 0
        eval_run_id = json.loads(capsys.readouterr().out)["eval_run_id"]
        with kb_db.cursor() as cur:
            (run_id,) = cur.execute("SELECT run_id FROM eval_items WHERE eval_run_id = ?", [eval_run_id]).fetchone()
        assert main(["show", str(run_id), "--json"]) == 0
        shown[name] = {s["metric"]: s for s in json.loads(capsys.readouterr().out)["scores"]}
    first, second = shown["first"]["judge_correctness"], shown["second"]["judge_correctness"]
    assert first["replayed"] is False and first["first_computed_at"] is None  # the judge was asked
    assert second["replayed"] is True and second["value"] == first["value"]
    with kb_db.cursor() as cur:
        (asked_at,) = cur.execute(
            "SELECT started_at FROM llm_calls WHERE stage = 'judge_correctness' AND NOT cache_hit"
        ).fetchone()
    assert second["first_computed_at"] == str(asked_at)  # when the first evaluation's judge call was made
    # faithfulness is the verifier's, not a model call of its own: nothing links it to a replay
    assert shown["second"]["faithfulness"]["replayed"] is False


def test_fresh_sends_every_call_to_the_model_where_a_rerun_replays_them_all(fake, kb_db, capsys, tmp_path):
    from store.llm_log import calls_for_eval_run

    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join((ROOT / "data" / "eval" / "golden.jsonl").read_text().splitlines(True)[:2]))
    argv = ["eval", str(golden), "--metrics", "faithfulness", "--concurrency", "1", "--json"]

    def model_requests():
        return [r for r in fake.requests if r["path"] in ("/api/chat", "/api/generate", "/api/embed")]

    assert main([*argv, "--name", "first"]) == 0
    assert json.loads(capsys.readouterr().out)["replayed"] < 0.5  # only what its own items share
    fake.clear()
    assert main([*argv, "--name", "replayed"]) == 0
    assert json.loads(capsys.readouterr().out)["replayed"] == 1 and model_requests() == []
    assert main([*argv, "--name", "fresh", "--fresh"]) == 0
    summary = json.loads(capsys.readouterr().out)
    calls = calls_for_eval_run(kb_db, summary["eval_run_id"])
    assert summary["replayed"] == 0 and calls and not any(c["cache_hit"] for c in calls)
    assert len(model_requests()) == len(calls)  # one request to the model for every call the evaluation made
    # ask: a repeated question is replayed, and says so; with --fresh it is asked of the model again
    assert main(["ask", "--json", "--quiet", QUESTION]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["replayed"] is False and first["replayed_calls"] < first["model_calls"]
    fake.clear()
    assert main(["ask", "--json", "--quiet", QUESTION]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["replayed"] is True and replayed["replayed_calls"] == replayed["model_calls"] > 0
    assert replayed["replay"].startswith("replayed from the cache (first computed at ") and model_requests() == []
    assert main(["ask", "--json", "--quiet", "--fresh", QUESTION]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["replayed"] is False and again["replay"] is None and len(model_requests()) == again["model_calls"]
