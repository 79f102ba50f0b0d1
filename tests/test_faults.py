"""Faults of the store and of Ollama: no computed result is lost, every fault is a clear message.

A second process holds the store (DuckDB lets one process write a file at a time); read-only files and
folders are made with chmod, or `chattr +i` when the tests run as root (root ignores permission bits)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, reset_process_state

from pages.views.navigation import PAGES as NAV_PAGES
from pages.views.navigation import START_PAGE
from pipeline.answering.engine import QuestionRun, VerifiedQueryEngine, final_result
from pipeline.cli.main import main
from pipeline.config import load_settings
from pipeline.evaluation.dataset import Dataset, GoldenItem
from pipeline.evaluation.runner import report, run_evaluation
from pipeline.history.runs import RunFilter, list_runs
from pipeline.models.health import check_store
from pipeline.session import replay_journal
from store import db as store_db
from store import journal

QUESTION = "How many passages were in the Wikipedia index of the RAG paper?"


@contextmanager
def holding(path: str):
    """Another process with the store open (and so locked) until the block ends, however long it takes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import duckdb, sys
                con = duckdb.connect({path!r})
                print("locked", flush=True)
                sys.stdin.read()  # until it is killed, or its stdin closes
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.communicate()  # and close its pipes


def _immutable(path: Path, on: bool) -> bool:
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


@contextmanager
def read_only(path: Path):
    """path (a file or a folder) unwritable for this process, whoever runs the tests."""
    mode = path.stat().st_mode
    os.chmod(path, 0o555 if path.is_dir() else 0o444)
    chattr = False
    if os.access(path, os.W_OK):  # root: permission bits do not bind
        chattr = _immutable(path, True)
        if not chattr:
            os.chmod(path, mode)
            pytest.skip("cannot make a path read-only here (root without chattr)")
    try:
        yield
    finally:
        if chattr:
            _immutable(path, False)
        os.chmod(path, mode)


def ask(settings, db, question=QUESTION):
    return final_result(VerifiedQueryEngine(settings=settings, db=db).stream(question))


def count_runs(path: str) -> int:
    con = duckdb.connect(path)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    folder = tmp_path / "state"
    monkeypatch.setenv("WORKBENCH_STATE_DIR", str(folder))
    return folder


def opens_recorded(monkeypatch) -> list[tuple[float, str]]:
    """From now on, each open of a store: the lock timeout it was given and whether it got in or found the file
    locked past it (what a save waited for, read from its arguments rather than from a clock)."""
    from store.errors import StoreLocked

    opened = []
    real_open = store_db.Database._open

    def recorded(self, lock_timeout_s=None, **kwargs):
        given = self.lock_timeout_s if lock_timeout_s is None else lock_timeout_s
        try:
            con = real_open(self, lock_timeout_s, **kwargs)
        except StoreLocked:
            opened.append((given, "locked"))
            raise
        opened.append((given, "opened"))
        return con

    monkeypatch.setattr(store_db.Database, "_open", recorded)
    return opened


@pytest.mark.slow
def test_an_answer_whose_save_finds_the_store_locked_is_kept_and_saved_on_the_next_open(kb_db, settings, monkeypatch):
    settings = dataclasses.replace(settings, store_save_wait_s=0.3)
    run = QuestionRun(settings, kb_db, QUESTION, "chat")
    events = run.events()
    result = None
    for event in events:
        if event.kind == "decide":  # computed; only the final save is left
            with holding(settings.store_path), monkeypatch.context() as patch:
                opened = opens_recorded(patch)
                result = final_result(events)
            break
    assert result.status == "accepted" and "21 million" in result.answer
    assert result.run_id is None and result.journal
    entry = json.loads(Path(result.journal).read_text())
    assert entry["kind"] == "run" and entry["payload"]["log"]["run"]["question"] == QUESTION
    assert Path(result.journal).parent == Path(settings.store_path).parent / "workbench.duckdb.journal"
    assert opened and set(opened) == {(0.3, "locked")}  # waited store_save_wait_s, not the 2 s lock timeout of reads

    assert replay_journal(kb_db) == 1  # the next open (the app's next page, the CLI's next command) replays it
    rows = list_runs(kb_db, RunFilter(), 10)
    assert [r["question"] for r in rows] == [QUESTION] and rows[0]["status"] == "accepted"
    assert not Path(result.journal).exists() and kb_db.replayed == 1


@pytest.mark.slow
def test_replay_is_idempotent_by_entry_id_also_from_two_processes_at_once(kb_db, settings, tmp_path):
    log = QuestionRun(settings, kb_db, QUESTION, "chat", persist=False)
    final_result(log.events())
    kept = journal.write_entry(settings.store_path, "run", {"log": log.log})
    copy = kept.with_name("copy-" + kept.name)
    copy.write_bytes(kept.read_bytes())  # the same entry twice, as if a replay died after its commit
    kb_db.close()
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from store.db import Database
        from pipeline.session import replay_journal
        db = Database({settings.store_path!r}, lock_timeout_s=20, idle_release_s=0)
        replay_journal(db)
        print(db.replayed)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    replayed = [int(p.communicate(timeout=60)[0].strip() or -1) for p in procs]
    assert sorted(replayed) == [0, 1]
    assert count_runs(settings.store_path) == 1
    assert journal.pending(settings.store_path) == []


@pytest.mark.slow
def test_an_evaluation_item_is_kept_when_the_store_is_locked_at_its_save(kb_db, settings, monkeypatch, executor):
    from pipeline.evaluation import runner

    settings = dataclasses.replace(settings, store_save_wait_s=0.2)
    real = journal.save_item

    def locked_save(db, *args):
        with holding(settings.store_path):
            return real(db, *args)

    monkeypatch.setattr(runner.journal, "save_item", locked_save)
    items = [GoldenItem(id="rag", question=QUESTION, reference="21 million passages", tags=["numeric"])]
    outcome = run_evaluation(
        settings, kb_db, Dataset("g.jsonl", items, [], "h"), "held", concurrency=1, executor=executor
    )
    assert outcome.progress.done == 1 and outcome.status == "finished"
    assert journal.pending(settings.store_path) == []  # replayed as the evaluation ended
    rows = report(settings, kb_db, "held").items
    assert [(r["item_id"], r["item_status"]) for r in rows] == [("rag", "done")]
    assert rows[0]["faithfulness"] == 1.0


def test_a_read_only_store_file_is_browsed_and_new_runs_wait_in_the_journal(kb_db, settings, state_dir, capsys):
    ask(settings, kb_db)
    kb_db.close()
    path = Path(settings.store_path)
    with read_only(path):
        reset_process_state()
        assert main(["runs"]) == 0
        out = capsys.readouterr().out
        assert QUESTION[:40] in out
        assert main(["show", "1"]) == 0 and "21 million" in capsys.readouterr().out
        assert main(["ask", QUESTION]) == 0
        out = capsys.readouterr().out
        assert "21 million" in out and "kept in the journal" in out
        assert [p.parent for p in journal.pending(settings.store_path)] == [Path(settings.store_path + ".journal")]
        assert store_db.get_database(settings).read_only
    reset_process_state()
    assert main(["runs", "--json"]) == 0  # writable again: the journal is replayed
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert journal.pending(settings.store_path) == []


def test_a_read_only_folder_keeps_the_store_browsable(kb_db, settings, state_dir, capsys):
    ask(settings, kb_db)
    kb_db.close()
    folder = Path(settings.store_path).parent / "ro"
    folder.mkdir()
    target = folder / "store.duckdb"
    os.replace(settings.store_path, target)
    settings = dataclasses.replace(settings, store_path=str(target))
    with read_only(folder):
        db = store_db.Database(str(target), 1, 0)
        assert len(list_runs(db, RunFilter(), 10)) == 1
        assert db.read_only_reason == "its folder is not writable"
        result = ask(settings, db)
        assert result.journal and Path(result.journal).is_relative_to(state_dir)
        db.close()


def test_a_store_from_a_newer_version_is_named_and_nothing_is_lost(kb_db, settings, capsys):
    with kb_db.transaction() as cur:
        cur.execute("INSERT INTO schema_migrations (name) VALUES ('m999_from_the_future')")
    reset_process_state()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "written by a newer version of the workbench (unknown migrations: m999_from_the_future)" in out
    assert "git pull" in out and "Traceback" not in out
    assert main(["runs"]) == 1
    assert "newer version" in capsys.readouterr().err


def test_a_damaged_store_is_named_by_doctor_ask_and_runs_without_a_traceback(fake, settings, capsys):
    Path(settings.store_path).write_bytes(b"not a database" * 1000)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "is damaged" in out and ".damaged" in out
    assert main(["runs"]) == 1
    err = capsys.readouterr().err
    assert "is damaged" in err and "Traceback" not in err
    assert main(["ask", QUESTION]) == 1  # retrieval needs the store: a failed run, kept in the journal
    out = capsys.readouterr().out
    assert "is damaged" in out and "kept in the journal" in out
    assert len(journal.pending(settings.store_path)) == 1
    assert Path(settings.store_path).read_bytes().startswith(b"not a database")  # nothing written into it


def test_a_store_that_lost_its_tables_is_damaged(fake, settings):
    con = duckdb.connect(settings.store_path)
    con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    from store.migrations import MIGRATIONS

    for m in MIGRATIONS:
        con.execute("INSERT INTO schema_migrations VALUES (?, now())", [m.__name__])
    con.close()
    checks = check_store(settings, store_db.get_database(settings))
    assert not checks[0].ok and "its tables runs, claims" in checks[0].detail


def test_doctor_says_whether_the_store_is_writable(kb_db, settings, state_dir):
    checks = {c.name: c for c in check_store(settings, kb_db)}
    assert checks["store"].ok and "writable" in checks["store"].detail
    kb_db.close()
    with read_only(Path(settings.store_path)):
        reset_process_state()
        checks = {c.name: c for c in check_store(settings, store_db.get_database(load_settings()))}
        assert not checks["store"].ok and "read-only" in checks["store"].detail
        assert "writable" in checks["store"].fix


@pytest.mark.slow
def test_ollama_killed_mid_evaluation_is_not_plain_finished_and_the_cli_says_why(
    fake, kb_db, settings, capsys, monkeypatch, executor
):
    items = "".join(
        json.dumps({"id": f"q{i}", "question": f"{QUESTION} ({i})", "reference": "21 million"}) + "\n" for i in range(4)
    )
    path = Path(settings.store_path).parent / "g.jsonl"
    path.write_text(items)
    from pipeline.evaluation import runner  # Ollama goes away once the first item is saved: the rest cannot reach it

    original = runner.journal.save_item

    def then_kill(*args, **kwargs):
        saved = original(*args, **kwargs)
        fake.stop()
        return saved

    monkeypatch.setattr(runner.journal, "save_item", then_kill)
    code = main(["eval", str(path), "--name", "killed", "--concurrency", "1", "--executor", executor])
    out, err = capsys.readouterr()
    assert code == 1
    assert "evaluation 'killed' finished with 3 failures" in out
    assert "3 of 4 items failed" in err and "Ollama is not reachable" in err and "Traceback" not in err
    row = store_db.get_database(settings)
    with row.cursor() as cur:
        assert cur.execute("SELECT status FROM eval_runs WHERE name = 'killed'").fetchone()[0] == (
            "finished with 3 failures"
        )


@pytest.mark.slow
def test_a_retried_item_leaves_no_superseded_run(fake, kb_db, settings, executor):
    items = [GoldenItem(id="rag", question=QUESTION, reference="21 million passages")]
    fake.inject("500", model="llama3.2", path="/api/chat", times=1000)
    golden = Dataset("g.jsonl", items, [], "h")
    first = run_evaluation(settings, kb_db, golden, "retry", concurrency=1, executor=executor)
    assert first.status == "finished with 1 failure"
    fake.clear()
    run_evaluation(settings, kb_db, golden, "retry", concurrency=1, executor=executor)
    with kb_db.cursor() as cur:
        runs = cur.execute("SELECT id, status FROM runs").fetchall()
        linked = cur.execute("SELECT run_id FROM eval_items").fetchall()
    assert len(runs) == 1 and [r[0] for r in runs] == [linked[0][0]] and runs[0][1] == "accepted"


# each page, the start page as None (AppTest starts there)
PAGES = [None if p.file == START_PAGE else p.file for p in NAV_PAGES]


def _page(page):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()
    reset_process_state()
    at = AppTest.from_file(str(Path(__file__).parent.parent / "streamlit_app.py"), default_timeout=60)
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    return at


@pytest.mark.slow
def test_every_page_says_the_store_is_locked_and_keeps_its_navigation(kb_db, settings, monkeypatch):
    monkeypatch.setenv("WORKBENCH_STORE_LOCK_TIMEOUT_S", "0.3")
    kb_db.close()
    with holding(settings.store_path):
        for page in PAGES:
            at = _page(page)
            assert not at.exception, (page, at.exception)
            assert any("stayed locked by another process" in e.value for e in at.error), page
            assert len(at.sidebar.get("page_link")) == len(PAGES), page


@pytest.mark.slow
def test_every_page_browses_a_read_only_store_with_a_banner(kb_db, settings, state_dir):
    ask(settings, kb_db)
    kb_db.close()
    with read_only(Path(settings.store_path)):
        for page in PAGES:
            at = _page(page)
            assert not at.exception, (page, at.exception)
            assert any(w.value.startswith("**Read-only mode.**") for w in at.warning), (
                page,
                [w.value for w in at.warning],
                [e.value for e in at.error],
            )


@pytest.mark.slow
def test_a_file_whose_splitting_hangs_or_raises_is_skipped_and_the_rest_ingested(
    fake, db, tmp_path, monkeypatch, capsys
):
    import threading

    from pipeline.config import load_settings
    from pipeline.knowledge import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nAlpha is the first letter. It opens the alphabet.\n")
    (folder / "b-huge.md").write_text("x" * 50_000)
    (folder / "c-raises.md").write_text("# C\n\nThis one makes the splitter raise.\n")
    (folder / "d.md").write_text("# D\n\nDelta is the fourth letter.\n")
    real = ingest.split
    real("# W\n\nThe splitter is loaded before the clock. Twice.\n", load_settings())  # not on a's clock
    release, finished = threading.Event(), threading.Event()

    def pathological(text, settings):
        if text.startswith("xxx"):  # hangs, as NLTK's sentence splitter on megabytes without sentence ends
            release.wait(60)
            finished.set()
        if "splitter raise" in text:
            raise TimeoutError("nltk gave up")
        return real(text, settings)

    monkeypatch.setattr(ingest, "split", pathological)
    monkeypatch.setenv("WORKBENCH_INGEST_FILE_TIMEOUT_S", "2")
    try:
        assert main(["ingest", str(folder)]) == 0
        assert not finished.is_set()  # the command was done while the hung split still hung: it did not wait
    finally:
        release.set()
    out = capsys.readouterr().out
    assert "b-huge.md: splitting it into chunks took longer than 2 s (50,000 characters)" in out
    assert "c-raises.md: it could not be split into chunks (TimeoutError: nltk gave up)" in out
    assert "2 files ingested or unchanged, 2 skipped" in out and "Traceback" not in out


def test_a_process_waiting_for_the_store_gets_it_next(settings, tmp_path):
    db = store_db.Database(settings.store_path, lock_timeout_s=2, idle_release_s=30)
    with db.cursor() as cur:
        cur.execute("SELECT 1")
    assert db._con is not None  # nobody waits: the file stays open for the next use
    waiting = Path(settings.store_path + ".waiting")
    waiting.mkdir(exist_ok=True)
    (waiting / "999999").touch()  # another process found the file locked
    with db.cursor() as cur:
        cur.execute("SELECT 1")
    assert db._con is None  # let go at once instead of after 30 s idle
    db.close()


@pytest.mark.slow
def test_an_idle_holder_lets_another_process_in_without_being_used_again(settings):
    """The app holds the store between pages (idle_release_s, 10 s by default): a command run meanwhile still gets
    in, within its lock timeout (here 10 s, a third of this holder's idle release), though the app does nothing
    more: its idle timer sees the command's waiting marker."""
    db = store_db.Database(settings.store_path, lock_timeout_s=2, idle_release_s=30)
    with db.cursor() as cur:
        cur.execute("SELECT 1")
    assert db._con is not None
    write = textwrap.dedent("""
        import sys
        from store.db import Database
        db = Database(sys.argv[1], lock_timeout_s=10, idle_release_s=0)
        with db.transaction() as cur:
            cur.execute("CREATE TABLE written_meanwhile AS SELECT 1 AS x")
    """)
    done = subprocess.run(
        [sys.executable, "-c", write, settings.store_path], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert db._con is None  # let go for the waiter, not after 30 s
    with db.cursor() as cur:
        assert cur.execute("SELECT x FROM written_meanwhile").fetchall() == [(1,)]
    db.close()


def _descendants(pid: int) -> set[int]:
    """The processes below pid (a Ray driver's: the Ray it started), from /proc."""
    parents = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@contextmanager
def _interruptible_children():
    """Processes started inside get Ctrl-C's default action, as a command typed at a terminal does, even where
    this one ignores SIGINT: a non-interactive shell starts a background job (`make test &`, a CI script's `&`)
    with SIGINT ignored, a child inherits that, and a SIGINT sent to it then does nothing. exec() resets a signal
    this process catches to its default action, never one it ignores."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("executor", ["local", "ray"])
@pytest.mark.slow
def test_ctrl_c_stops_an_evaluation_at_once_and_keeps_what_finished(fake, kb_db, settings, executor):
    import time

    if executor == "ray":
        pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-scale.txt)")
    kb_db.close()
    items = "".join(
        json.dumps({"id": f"q{i}", "question": f"{QUESTION} ({i})", "reference": "21 million"}) + "\n" for i in range(8)
    )
    path = Path(settings.store_path).parent / "g.jsonl"
    path.write_text(items)
    gate = fake.hold(timeout_s=180)  # no model reply leaves the fake: items are mid-call when Ctrl-C comes
    env = {**os.environ, "WORKBENCH_REQUEST_TIMEOUT_S": "60"}
    with _interruptible_children():  # else, run in the background by a script, the SIGINT below is ignored
        child = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "eval", str(path), "--name", "stop", "--concurrency", "2"]
            + ["--executor", executor],
            cwd=Path(__file__).parent.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        # a Ray starts, and its workers import the workbench, first
        assert fake.wait_until(lambda f: gate.waiting >= 2, timeout_s=120), "the items never reached the model"
        helpers = _descendants(child.pid)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        unanswered = gate.waiting  # its calls are still held: it left without waiting for them
    finally:
        gate.release()
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130 and unanswered >= 2 and gate.timed_out == 0
    assert "cancelled: finished items are kept" in err and "Traceback" not in err
    assert bool(helpers) == (executor == "ray")
    alive, deadline = helpers, time.monotonic() + 60
    while alive and time.monotonic() < deadline:  # Ray's processes go down on their own, after the driver
        time.sleep(0.5)
        alive = {pid for pid in alive if Path(f"/proc/{pid}").exists()}
    assert not alive, "the local Ray outlived its driver"
    con = duckdb.connect(settings.store_path)
    assert con.execute("SELECT status FROM eval_runs WHERE name = 'stop'").fetchone()[0] == "cancelled"
    con.close()


@pytest.mark.slow
def test_a_cache_read_that_finds_the_store_locked_is_a_miss_and_the_answer_is_kept(kb_db, settings, monkeypatch):
    """Issue 27, item 2: another process takes the store from the moment retrieval ends. The response cache's
    reads wait a short bound, then miss; they never wait the lock timeout nor fail the run."""
    settings = dataclasses.replace(settings, store_save_wait_s=0.3)
    assert settings.cache_enabled and settings.store_lock_timeout_s == 2
    run = QuestionRun(settings, kb_db, QUESTION, "chat")
    events = run.events()
    result = None
    for event in events:
        if event.kind == "retrieve":  # the passages are read; every later read finds the store locked
            with holding(settings.store_path), monkeypatch.context() as patch:
                opened = opens_recorded(patch)
                result = final_result(events)
            break
    assert result.status == "accepted" and "21 million" in result.answer, (result.status, result.error)
    assert result.run_id is None and result.journal  # the save waited store_save_wait_s, then kept it
    locked = [given for given, outcome in opened if outcome == "locked"]
    assert store_db.OPTIONAL_READ_WAIT_S in locked, opened  # the cache lookups gave up after the short bound
    assert max(locked) < settings.store_lock_timeout_s, opened  # and no read (the similarity scale's) waited longer
    assert replay_journal(kb_db) == 1


@pytest.mark.slow
def test_an_answer_nothing_can_keep_is_printed_with_exactly_that_said(kb_db, settings, tmp_path, monkeypatch, capsys):
    """Issue 27, item 1: a read-only store and no writable journal folder (beside the store nor the state
    directory): `ask` still prints the answer and its --json, says it could not be kept anywhere and why, exits
    NOT_KEPT, and claims nothing about a journal."""
    from pipeline.cli.ask import NOT_KEPT

    ask(settings, kb_db)
    kb_db.close()
    monkeypatch.setenv("WORKBENCH_STATE_DIR", "/proc/nope")
    path = Path(settings.store_path)
    folder = path.parent / "ro"
    folder.mkdir()
    os.replace(path, folder / path.name)
    monkeypatch.setenv("WORKBENCH_DB", str(folder / path.name))
    with read_only(folder):
        reset_process_state()
        assert main(["ask", QUESTION]) == NOT_KEPT
        out, err = capsys.readouterr()
        assert "21 million" in out
        assert "could not be kept anywhere" in out and "read-only" in out and "/proc/nope" in out
        assert "kept in the journal" not in out + err and "Traceback" not in out + err
        reset_process_state()
        assert main(["ask", QUESTION, "--json"]) == NOT_KEPT
        out, err = capsys.readouterr()
        shown = json.loads(out)
        assert "21 million" in shown["answer"] and shown["run_id"] is None and shown["journal"] is None
        assert "could not be kept anywhere" in shown["not_kept"]
        assert "kept in the journal" not in out + err
    assert journal.pending(str(folder / path.name)) == []


@pytest.mark.slow
def test_asks_and_an_evaluation_under_contention_all_exit_0(kb_db, settings, tmp_path):
    """Issue 27, items 3 and 4: three `ask` processes and a two-item evaluation while another process takes the
    store for 1 s of every 2 s: every process exits 0 (none aborts at exit, none fails for the lock) and every
    ask prints its answer."""
    kb_db.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import duckdb, sys, threading, time
                threading.Thread(target=lambda: (sys.stdin.read(), __import__("os")._exit(0)), daemon=True).start()
                while True:
                    try:
                        con = duckdb.connect({settings.store_path!r})
                    except duckdb.Error:
                        time.sleep(0.05)
                        continue
                    time.sleep(1)
                    con.close()
                    time.sleep(1)
            """),
        ],
        stdin=subprocess.PIPE,
    )
    root = Path(__file__).parent.parent
    golden = root / "data" / "eval" / "golden.jsonl"
    commands = [["ask", f"{QUESTION} ({n})", "--json", "--quiet"] for n in range(3)]
    commands.append(["eval", str(golden), "--name", "contended", "--limit", "2", "--json"])
    env = {**os.environ, "WORKBENCH_STORE_LOCK_TIMEOUT_S": "15"}  # the default: the tests' 2 s is for waits on purpose
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "pipeline", *command],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for command in commands
        ]
        outputs = [p.communicate(timeout=300) for p in procs]
        done = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    finally:
        holder.communicate(input="")
    assert [code for code, _, _ in done] == [0, 0, 0, 0], [err[-500:] for _, _, err in done]
    for _, out, err in done[:3]:
        assert "21 million" in json.loads(out)["answer"] and "Traceback" not in err
