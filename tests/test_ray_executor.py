"""`eval --executor ray`: items as Ray tasks on a local Ray (127.0.0.1), the driver alone opening the store.

The resume, failure, timeout and cancel tests of the runner run for both executors (the `executor` fixture, in
test_evaluation.py and test_faults.py); these cover what only the Ray executor has."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT

from pipeline import evaluation as evaluation_package
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.cli.main import main
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation.dataset import Dataset, GoldenItem
from pipeline.evaluation.kb_snapshot import take_snapshot
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.runs import load_run
from pipeline.models.llm import LLM
from store import evals

ITEM = GoldenItem(
    id="rag-passages",
    question="How many passages were in the Wikipedia index of the RAG paper?",
    reference="The Wikipedia index had 21 million passages.",
    tags=["rag", "numeric"],
)
QUESTIONS = [
    ITEM.question,
    "What BLEU did the big Transformer score on WMT 2014 English-German?",
    "Which constant k did the Reciprocal Rank Fusion paper use?",
    "What is the capital city of Peru?",
]


def items(n: int) -> Dataset:
    rows = [GoldenItem(id=f"q{i}", question=f"{QUESTIONS[i % 4]} (item {i})", reference="21 million") for i in range(n)]
    return Dataset("g.jsonl", rows, [], "hash")


def test_the_snapshot_retrieves_exactly_what_the_store_does(fake, settings, kb_db):
    snapshot = take_snapshot(kb_db, settings.embed_model)
    llm = LLM(settings, kb_db)
    assert len(snapshot.ids) > 20 and snapshot.matrix.shape[0] == len(snapshot.ids)
    for question in QUESTIONS:
        from_store = DuckDBRetriever(llm, kb_db, settings.top_k).retrieve(question)
        from_memory = snapshot.retriever(llm, settings.top_k).retrieve(question)
        assert [(n.node.node_id, n.node.get_content(), n.node.metadata, n.score) for n in from_memory] == [
            (n.node.node_id, n.node.get_content(), n.node.metadata, n.score) for n in from_store
        ]
        assert len(from_store) == settings.top_k


def stored_item(settings, db, name: str) -> dict:
    """What an item's stored run and scores say, without ids, times and cache hits."""
    row = report(settings, db, name).items[0]
    run = load_run(db, row["run_id"])
    result = run.result
    return {
        "status": (row["item_status"], result.status),
        "answer": result.answer,
        "faithfulness": result.faithfulness,
        "retrievals": [
            (r["round"], r["rank"], r["query"], r["chunk_id"], r["score"], r["cited"]) for r in run.retrievals
        ],
        "grades": [(g["round"], g["relevant"]) for g in run.grades],
        "claims": [(c.text, c.verdict, c.evidence) for a in result.attempts for c in a.claims],
        # a Ray worker has no response cache: a call repeated within the item is a cache hit only locally
        "calls": sorted({(c["stage"], c["model"], c["prompt_hash"]) for c in run.calls}),
        "scores": sorted((s["metric"], s["value"], s["status"]) for s in run.scores),
    }


@pytest.mark.slow
def test_an_item_on_ray_is_answered_and_scored_as_on_the_local_executor(fake, settings, kb_db, ray_session):
    run_evaluation(settings, kb_db, Dataset("g.jsonl", [ITEM], [], "h"), "here", executor="local")
    run_evaluation(settings, kb_db, Dataset("g.jsonl", [ITEM], [], "h"), "there", executor="ray")
    here, there = stored_item(settings, kb_db, "here"), stored_item(settings, kb_db, "there")
    assert here == there
    assert here["status"] == ("done", "accepted") and "21 million" in here["answer"]
    assert len(here["retrievals"]) == settings.top_k and len(here["scores"]) == 10
    assert ("judge_question_rewrite", None, "not_applicable") in here["scores"]  # a single question: no rewrite
    assert ("context_recall", 1.0, "ok") in here["scores"]


@pytest.mark.slow
def test_a_conversation_on_ray_is_answered_turn_by_turn_as_on_the_local_executor(
    fake, settings, kb_db, ray_session, tmp_path
):
    from test_conversation_eval import TURN_IDS, golden, scores_of, stored_runs

    from pipeline.evaluation.dataset import load_dataset

    dataset = load_dataset(golden(tmp_path))
    here = run_evaluation(settings, kb_db, dataset, "talk-here", executor="local")
    there = run_evaluation(settings, kb_db, dataset, "talk-there", executor="ray")
    local, remote = stored_runs(kb_db, here.eval_run_id), stored_runs(kb_db, there.eval_run_id)
    # each turn read with the history its own evaluation produced: the same rewrites, turn numbers and answers
    for item_id in TURN_IDS:
        assert (remote[item_id]["turn_no"], remote[item_id]["standalone_question"], remote[item_id]["answer"]) == (
            local[item_id]["turn_no"],
            local[item_id]["standalone_question"],
            local[item_id]["answer"],
        )
    assert "Transformer" in remote["transformer#2"]["standalone_question"]
    assert remote["transformer#1"]["conversation_id"] != local["transformer#1"]["conversation_id"]
    values = {k: v[:2] for k, v in scores_of(kb_db, there.eval_run_id).items()}
    assert values == {k: v[:2] for k, v in scores_of(kb_db, here.eval_run_id).items()}
    assert values[("transformer#2", "judge_question_rewrite")][1] == "ok"


@pytest.mark.slow
def test_the_workers_never_open_the_store(fake, settings, kb_db, ray_session):
    # a store a worker opened would stay open (and one it could not open, held by the driver, fails the item)
    settings = dataclasses.replace(settings, store_idle_release_s=60)
    outcome = run_evaluation(settings, kb_db, items(2), "fds", concurrency=2, executor="ray")
    assert outcome.progress.done == 2, outcome.progress.errors
    workers = _our_workers()
    assert workers, "no Ray worker process found"
    store = os.path.realpath(settings.store_path)
    for pid in workers:
        assert not [f for f in _open_files(pid) if f.startswith(store)], f"Ray worker {pid} opened the store"


def items_at_the_model(fake, n: int, waiting_only: bool = True) -> set[int]:
    """The items (of items(n)) with a chat request at the fake, still unanswered if waiting_only."""
    bodies = [
        json.dumps(r["body"])
        for r in list(fake.requests)
        if r["path"] == "/api/chat" and not (waiting_only and "done" in r)
    ]
    return {i for i in range(n) if any(f"(item {i})" in b for b in bodies)}


@pytest.mark.slow
def test_items_run_concurrently_up_to_the_concurrency(fake, settings, kb_db, ray_session):
    # no reply leaves the fake before two items wait on it at once (Ray's workers import the workbench first)
    gate = fake.hold(until=lambda f: len(items_at_the_model(f, 4)) == 2, timeout_s=120)
    try:
        run_evaluation(settings, kb_db, items(4), "overlap", concurrency=2, executor="ray")
        opened = gate.released  # by `until` (a timeout counts in timed_out), not by the release below
    finally:
        gate.release()
    assert opened and gate.timed_out == 0
    spans = []
    for i in range(4):
        times = [
            (r["received"], r.get("done", r["received"]))
            for r in fake.requests
            if r["path"] == "/api/chat" and f"(item {i})" in json.dumps(r["body"])
        ]
        assert times, f"item {i} made no chat call"
        spans.append((min(t for t, _ in times), max(t for _, t in times)))
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    assert peak == 2


@pytest.mark.slow
def test_cancel_stops_the_tasks_in_flight_and_keeps_nothing_of_them(fake, settings, kb_db, ray_session):
    gate = fake.hold(timeout_s=180)  # no reply leaves the fake: both items are mid-call when the cancel comes
    cancel = threading.Event()
    seen = []

    def cancel_when_both_started() -> None:
        seen.append(fake.wait_until(lambda f: len(items_at_the_model(f, 2)) == 2, timeout_s=120))
        cancel.set()

    watcher = threading.Thread(target=cancel_when_both_started)
    watcher.start()
    try:
        outcome = run_evaluation(settings, kb_db, items(4), "stop", concurrency=2, cancel=cancel, executor="ray")
        unanswered = items_at_the_model(fake, 2)  # read before the fake lets the held calls go
    finally:
        gate.release()
        watcher.join()
    assert seen == [True], "the items never started"
    assert unanswered == {0, 1} and gate.timed_out == 0  # it did not wait for the items' model calls
    assert outcome.status == "cancelled" and outcome.progress.finished == 0
    assert evals.get_eval_run(kb_db, "stop").status == "cancelled"
    assert evals.item_statuses(kb_db, outcome.eval_run_id) == {}
    with kb_db.cursor() as cur:
        assert cur.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    resumed = run_evaluation(settings, kb_db, items(4), "stop", concurrency=2, executor="ray")
    assert resumed.status == "finished" and resumed.progress.skipped == 0 and resumed.progress.done == 4


@pytest.mark.slow
def test_an_item_whose_worker_dies_runs_again_on_another(fake, settings, kb_db, ray_session):
    gate = fake.hold(timeout_s=180)  # the item is mid-call when its worker is killed
    killed = []

    def kill_its_worker() -> None:
        try:
            if not fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=120):
                return
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:  # Ray names the process once the task runs
                running = [pid for pid in _our_workers() if _cmdline(pid).startswith("ray::_evaluate")]
                if running:
                    os.kill(running[0], signal.SIGKILL)
                    killed.append(running[0])
                else:
                    time.sleep(0.05)
        finally:
            gate.release()  # the item's next try, on another worker, is answered

    killer = threading.Thread(target=kill_its_worker)
    killer.start()
    outcome = run_evaluation(settings, kb_db, items(1), "dies", executor="ray")
    killer.join()
    assert killed, "the item's worker was never seen running it"
    assert outcome.status == "finished" and outcome.progress.done == 1
    assert report(settings, kb_db, "dies").items[0]["item_status"] == "done"


@pytest.mark.slow
def test_progress_reaches_the_callback_as_each_item_is_saved(fake, settings, kb_db, ray_session):
    first = run_evaluation(settings, kb_db, items(1), "progress", executor="ray")
    seen = []

    def on_progress(progress) -> None:
        seen.append((progress.done, progress.failed, len(evals.item_statuses(kb_db, first.eval_run_id))))

    outcome = run_evaluation(settings, kb_db, items(3), "progress", on_progress=on_progress, executor="ray")
    assert outcome.progress.skipped == 1
    assert seen == [(2, 0, 2), (3, 0, 3)]  # each call comes after its item is in the store


def test_a_local_ray_listens_on_loopback_only(ray_session):
    ray = ray_session
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    assert ray.cluster_resources()["CPU"] == 2


@pytest.mark.slow
def test_the_default_local_ray_ignores_a_cluster_recorded_by_ray_start(fake, settings, kb_db, tmp_path):
    """`ray start` records its cluster in Ray's temp folder (/tmp/ray/ray_current_cluster), and ray.init() without
    an address joins it, even one long gone: the default executor starts a Ray of its own all the same."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-scale.txt)")
    kb_db.close()
    record = tmp_path / "ray" / "ray_current_cluster"  # Ray's temp folder is $RAY_TMPDIR/ray
    record.parent.mkdir()
    record.write_text("127.0.0.1:9")  # nothing listens there
    golden = Path(settings.store_path).parent / "g.jsonl"
    golden.write_text(ITEM.model_dump_json() + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "eval", str(golden), "--name", "own", "--executor", "ray"],
        cwd=ROOT,
        env={**os.environ, "RAY_TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert record.read_text() == "127.0.0.1:9"


def test_an_address_where_no_cluster_listens_is_refused_at_once(fake, settings, kb_db, monkeypatch):
    from pipeline.evaluation import ray_executor

    joins = []  # ray.init would keep retrying an address nobody listens on for minutes
    monkeypatch.setattr(ray_executor.ray, "init", lambda *args, **kwargs: joins.append(kwargs))
    with pytest.raises(WorkbenchError) as caught:
        ray_executor.start("127.0.0.1:9")
    assert joins == []  # refused before Ray was asked to join it
    assert "no Ray cluster answers at 127.0.0.1:9" in caught.value.message and "ray start --head" in caught.value.fix


def test_a_ray_address_needs_the_ray_executor(fake, settings, kb_db, capsys):
    with pytest.raises(InputError) as caught:
        run_evaluation(settings, kb_db, items(1), "x", ray_address="10.0.0.5:6379")
    assert "needs the Ray executor" in caught.value.message and "--executor ray" in caught.value.fix
    golden = Path(settings.store_path).parent / "g.jsonl"
    golden.write_text(ITEM.model_dump_json() + "\n")
    assert main(["eval", str(golden), "--name", "x", "--ray-address", "10.0.0.5:6379"]) == 2
    assert "needs the Ray executor" in capsys.readouterr().err
    assert evals.get_eval_run(kb_db, "x") is None


def test_without_ray_the_ray_executor_says_how_to_install_it(fake, settings, kb_db, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as when it is not installed
    monkeypatch.delitem(sys.modules, "pipeline.evaluation.ray_executor", raising=False)
    monkeypatch.delattr(evaluation_package, "ray_executor", raising=False)
    with pytest.raises(WorkbenchError) as caught:
        run_evaluation(settings, kb_db, items(1), "no-ray", executor="ray")
    assert "needs Ray, which is not installed" in caught.value.message
    assert "pip install -r requirements-scale.txt" in caught.value.fix
    golden = Path(settings.store_path).parent / "g.jsonl"
    golden.write_text(ITEM.model_dump_json() + "\n")
    assert main(["eval", str(golden), "--name", "no-ray", "--executor", "ray"]) == 1
    err = capsys.readouterr().err
    assert "pip install -r requirements-scale.txt" in err and "items run as Ray tasks" not in err
    assert evals.get_eval_run(kb_db, "no-ray") is None  # refused before anything was stored


@pytest.mark.slow
def test_the_cli_runs_an_evaluation_on_ray(fake, settings, kb_db, ray_session, capsys):
    golden = Path(settings.store_path).parent / "g.jsonl"
    golden.write_text("".join(i.model_dump_json() + "\n" for i in items(2).items))
    assert main(["eval", str(golden), "--name", "cli", "--executor", "ray", "--concurrency", "2"]) == 0
    out, err = capsys.readouterr()
    assert "items run as Ray tasks on a local Ray" in err and "context_recall" in out
    assert set(evals.item_statuses(kb_db, evals.get_eval_run(kb_db, "cli").id).values()) == {"done"}


@pytest.mark.slow
def test_the_cli_runs_an_evaluation_on_an_existing_cluster(fake, settings, kb_db):
    """A head started apart (`ray start --head`, token authentication on: Ray's default), bound to 127.0.0.1,
    and `eval --ray-address` in another process: the job brings the workbench's code to the cluster."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-scale.txt)")
    kb_db.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    ray_cli = Path(sys.executable).parent / "ray"
    # its own temp folder, not /tmp/ray (where ray.init() would find it later); short, for Ray's socket paths
    folder = tempfile.mkdtemp(prefix="wb-ray-head-")
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false", "--block"]
        + [f"--temp-dir={folder}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not start")
        golden = Path(settings.store_path).parent / "g.jsonl"
        golden.write_text("".join(i.model_dump_json() + "\n" for i in items(2).items))
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "eval", str(golden), "--name", "cluster", "--executor", "ray"]
            + ["--ray-address", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        head.terminate()
        head.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"items run as Ray tasks on the Ray cluster at 127.0.0.1:{port}" in done.stderr
    con = duckdb.connect(settings.store_path)
    assert con.execute("SELECT status, count(*) FROM eval_items GROUP BY ALL").fetchall() == [("done", 2)]
    con.close()


@pytest.mark.slow
def test_nothing_but_the_ray_executor_imports_ray():
    allowed = {ROOT / "pipeline" / "evaluation" / "ray_executor.py"}
    offenders = []
    for folder in ("pipeline", "store", "pages", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in allowed:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[0] == "ray"]
    assert offenders == []
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, pipeline.cli.main, pipeline.evaluation.jobs, pipeline.session; print('ray' in sys.modules)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.stdout.strip().splitlines()[-1] == "False", loaded.stderr


def _our_workers() -> list[int]:
    """This test session's Ray workers (other test sessions on the machine run Rays of their own)."""
    from pipeline.evaluation import ray_executor

    folder = ray_executor._own_folders[-1]
    return [pid for pid in _processes() if _cmdline(pid).startswith("ray::") and folder in _cmdline(_parent(pid))]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _processes() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _open_files(pid: int) -> list[str]:
    try:
        return [os.path.realpath(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return []
