"""Faults not tried before issue 27 (its last item): a full disk during a save, Ollama killed mid-answer and
mid-evaluation, kill -9 of `ask` and of the app during a save, the app's chat and evaluation while another process
holds the store, path-traversal file names uploaded to the app, out-of-range annotation scores. Each holds the
same promises: a computed result is never lost, the user is told what happened and what to do, nothing stored
before is damaged, untrusted text renders as text.

Nothing here waits on the clock: a child process says when it reached the point a test needs (a line on its
output, a file), the fake Ollama holds a reply until the test has done what it must (`hold`), and every wait has a
generous bound that only a broken run reaches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, TEST_ENV, reset_process_state
from test_faults import QUESTION, holding

from pipeline.cli.main import main
from store import journal

TABLES = ("runs", "attempts", "claims", "retrievals", "llm_calls", "spans", "eval_items", "scores", "ratings")


def rows_of(store: Path) -> dict:
    """What the store holds of runs, table by table (row counts of rows that belong to a run) and the runs
    themselves, read by a connection of its own (read-only: a file that cannot be opened fails here)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        counts = {
            t: con.execute(
                f"SELECT count(*) FROM {t}" + ("" if t == "runs" else " WHERE run_id IS NOT NULL")
            ).fetchone()[0]
            for t in TABLES
        }
        runs = con.execute("SELECT id, question, status, answer FROM runs ORDER BY id").fetchall()
    finally:
        con.close()
    return {"counts": counts, "runs": runs}


def child_env(store: Path, ollama_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not (k.startswith("WORKBENCH_") or k == "OLLAMA_HOST")}
    return {
        **env,
        **TEST_ENV,
        "OLLAMA_HOST": ollama_url,
        "WORKBENCH_DB": str(store),
        "WORKBENCH_CONFIG": "",
        "WORKBENCH_STATE_DIR": str(tmp_path / "state"),
        **extra,
    }


# ------------------------------------------------------------------------------------------------ a. full disk


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a tmpfs of its own (8 MiB), so a test can fill it; skipped where mounting is not allowed."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield folder
    finally:
        reset_process_state()  # no connection left open on it
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> Path:
    """Take every free byte of folder's disk; the file that holds them."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 4096, 512, 1):  # down to the last partial block
            block = b"\0" * size
            try:
                while os.write(fd, block):
                    pass
            except OSError:
                continue
    finally:
        os.close(fd)
    assert os.statvfs(folder).f_bavail == 0
    return filler


@pytest.mark.slow
def test_a_full_disk_during_a_save_keeps_the_answer_names_the_disk_and_damages_nothing(
    ingested_store, fake, small_disk, tmp_path, monkeypatch, capsys
):
    store = small_disk / "workbench.duckdb"
    shutil.copy(ingested_store, store)
    monkeypatch.setenv("WORKBENCH_DB", str(store))
    monkeypatch.setenv("WORKBENCH_STATE_DIR", str(tmp_path / "state"))
    reset_process_state()
    assert main(["ask", QUESTION]) == 0
    capsys.readouterr()
    reset_process_state()
    before = rows_of(store)
    assert len(before["runs"]) == 1
    filler = fill(small_disk)

    second = f"{QUESTION} (asked on a full disk)"
    assert main(["ask", second, "--json"]) == 0
    out, err = capsys.readouterr()
    shown = json.loads(out)
    assert "21 million" in shown["answer"] and shown["run_id"] is None
    assert "the disk holding the store" in shown["kept_because"] and "is full" in shown["kept_because"]
    assert Path(shown["journal"]).is_relative_to(tmp_path / "state")  # not beside the store: that disk is full
    assert "Traceback" not in err
    reset_process_state()

    third = f"{QUESTION} (asked again on the full disk)"
    assert main(["ask", third]) == 0
    out, err = capsys.readouterr()
    assert "21 million" in out and "Traceback" not in out + err
    flat = " ".join(out.split())
    assert "is full (" in flat and "kept in the journal" in flat and "free space on that disk" in flat
    reset_process_state()

    assert rows_of(store) == before  # what was stored before is whole, and nothing half-written came in
    beside = journal.journal_dirs(str(store))[0]
    assert not beside.exists() or not list(beside.iterdir())  # no part of an entry left on the full disk
    assert len(journal.pending(str(store))) == 2

    filler.unlink()  # room again: the next command saves both runs
    assert main(["runs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(r["question"] for r in listed) == sorted([QUESTION, second, third])
    assert journal.pending(str(store)) == []
    after = rows_of(store)
    assert after["runs"][0] == before["runs"][0]


# ------------------------------------------------------------------------------- f. out-of-range annotation scores

OUT_OF_RANGE = [0, 6, 9, -1, 4.5, "3", True, None, float("nan")]


def five(**changed) -> dict:
    return {"correctness": 3, "helpfulness": 3, "faithfulness": 3, "grounding": 3, "topicality": 3, **changed}


def ratings_count(db) -> int:
    with db.cursor() as cur:
        return cur.execute("SELECT (SELECT count(*) FROM ratings) + (SELECT count(*) FROM claim_ratings)").fetchone()[0]


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=repr)
@pytest.mark.slow
def test_an_out_of_range_score_is_refused_by_the_store_and_by_the_pipeline_and_nothing_is_stored(
    kb_db, settings, value
):
    from test_faults import ask

    from pipeline.calibration import annotations
    from pipeline.errors import InputError
    from store import annotations as store_annotations
    from store.errors import RecordRefused

    run_id = ask(settings, kb_db).run_id
    with pytest.raises(InputError) as refused:
        annotations.save_rating(kb_db, run_id, "ana", five(correctness=value))
    assert "correctness must be a whole number from 1 to 5" in refused.value.message and refused.value.fix
    with pytest.raises(RecordRefused) as refused:  # the store function itself, called as another caller would
        store_annotations.save_rating(kb_db, run_id, "ana", five(correctness=value))
    assert "correctness must be a whole number from 1 to 5" in refused.value.message
    assert "nothing was saved" in refused.value.message and "from 1 to 5" in refused.value.fix
    assert ratings_count(kb_db) == 0


def test_the_store_refuses_an_unknown_criterion_or_claim_verdict(kb_db, settings):
    from test_faults import ask

    from store import annotations as store_annotations
    from store.errors import RecordRefused

    run_id = ask(settings, kb_db).run_id
    with pytest.raises(RecordRefused, match="unknown criterion"):
        store_annotations.save_rating(kb_db, run_id, "ana", five(style=4))
    with pytest.raises(RecordRefused, match="unknown claim verdict 'maybe'"):
        store_annotations.save_rating(kb_db, run_id, "ana", five(), claim_verdicts={(1, 1): "maybe"})
    assert ratings_count(kb_db) == 0
    store_annotations.save_rating(kb_db, run_id, "ana", five(), claim_verdicts={(1, 1): "supported"})
    assert ratings_count(kb_db) == 2  # in range: kept


@contextmanager
def forged_radio(monkeypatch, key: str, posted: str):
    """The browser posts `posted` as the value of the radio keyed `key`, as a hand-made request can: Streamlit
    hands a value that is none of the radio's options to the page as the string it received."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState
    from streamlit.testing.v1.element_tree import Radio

    real = Radio._widget_state

    def state(self):
        if self.key != key:
            return real.fget(self)
        forged = WidgetState()
        forged.id = self.id
        forged.string_value = posted
        return forged

    with monkeypatch.context() as patch:
        patch.setattr(Radio, "_widget_state", property(state))
        yield


@pytest.mark.parametrize("posted", ["9", "0", "-1", "4.5", "<b>5</b>"])
@pytest.mark.slow
def test_an_out_of_range_score_posted_to_the_annotate_page_is_refused_with_a_message(
    kb_db, settings, monkeypatch, posted
):
    """The radio offers 1-5 only; a hand-made post of another value is refused with a message and stores nothing."""
    from test_faults import ask

    from pages.views.annotate import radio_key
    from pages.views.markup import escape_markdown

    run_id = ask(settings, kb_db).run_id
    at = page("pages/annotate.py")
    at.text_input(key="annotator").set_value("ana").run()
    for criterion in ("correctness", "helpfulness", "faithfulness", "grounding", "topicality"):
        at.radio(key=radio_key(criterion, run_id)).set_value(3)
    with forged_radio(monkeypatch, radio_key("correctness", run_id), posted):
        next(b for b in at.button if b.label == "Save rating").click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    # Streamlit reads a posted value that is none of the options as no choice, so the page asks for the score; a
    # value that got through would meet save_rating's range check: either way a message that names the criterion
    said = ("Give a score for correctness before saving.", escape_markdown("correctness must be a whole number"))
    assert any(any(s in e for s in said) for e in errors), errors
    assert not any(s.value.startswith("Saved run") for s in at.success)
    assert ratings_count(kb_db) == 0


def page(name: str | None = None):
    from streamlit.testing.v1 import AppTest

    reset_process_state()
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    if name:
        at.switch_page(name)
        at.run()
    assert not at.exception, at.exception
    return at


# ------------------------------------------------------------------------------- b. Ollama killed mid-answer

OLLAMA_PROCESS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from fake_ollama import FakeOllama
    fake = FakeOllama().start()
    print(fake.url, flush=True)
    # the first streamed answer whose request holds `needle` stops after a few words, until this process is killed
    gate = fake.hold(match=lambda body: {needle!r} in json.dumps(body), after_chunks=3, times=1, timeout_s=600)
    fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=600)
    print("held", flush=True)
    sys.stdin.read()
""")


@contextmanager
def ollama_to_kill(needle: str):
    """A fake Ollama in a process of its own: (its URL, a function that waits until the first streamed answer whose
    request holds `needle` is mid-stream, then kill -9s the process)."""
    process = subprocess.Popen(
        [sys.executable, "-c", OLLAMA_PROCESS.format(tests=str(ROOT / "tests"), needle=needle)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def kill_mid_answer() -> None:
        assert process.stdout.readline().strip() == "held", "no answer reached the fake Ollama"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)

    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url, kill_mid_answer
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def start_cli(args: list[str], store: Path, ollama_url: str, tmp_path: Path) -> subprocess.Popen:
    """`python -m pipeline ARGS` in a process of its own against the store and that Ollama."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", *args],
        cwd=ROOT,
        env=child_env(store, ollama_url, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_ollama_killed_mid_answer_ask_says_so_and_keeps_the_failed_run(ingested_store, tmp_path):
    store = tmp_path / "workbench.duckdb"
    shutil.copy(ingested_store, store)
    with ollama_to_kill("Wikipedia index") as (url, kill_mid_answer):
        child = start_cli(["ask", QUESTION], store, url, tmp_path)
        kill_mid_answer()
        out, err = child.communicate(timeout=300)
    assert child.returncode == 1, (out, err)
    assert "Ollama is not reachable" in out + err or "Ollama failed" in out + err, (out, err)
    assert "ollama serve" in out + err and "Traceback" not in out + err
    [(run_id, question, status, answer)] = rows_of(store)["runs"]
    assert (question, status, answer) == (QUESTION, "failed", None)  # the run is kept, with why it failed
    assert journal.pending(str(store)) == []


@pytest.mark.slow
def test_ollama_killed_mid_answer_in_the_app_chat_says_so_without_a_traceback(kb_db, settings, monkeypatch):
    with ollama_to_kill("Wikipedia index") as (url, kill_mid_answer):
        monkeypatch.setenv("OLLAMA_HOST", url)
        at = page()
        killer = threading.Thread(target=kill_mid_answer, daemon=True)
        killer.start()
        at.chat_input[0].set_value(QUESTION).run()
        killer.join(timeout=120)
    assert not killer.is_alive()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "Ollama" in errors and "ollama serve" in errors, errors
    result = at.session_state["conversation"][0]["result"]
    assert result.status == "failed" and result.run_id is not None
    assert [(r[1], r[2]) for r in rows_of(Path(settings.store_path))["runs"]] == [(QUESTION, "failed")]


@pytest.mark.slow
def test_ollama_killed_mid_evaluation_then_resume_completes_it_exactly(ingested_store, fake, tmp_path):
    store = tmp_path / "workbench.duckdb"
    shutil.copy(ingested_store, store)
    golden = tmp_path / "g.jsonl"
    golden.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"{QUESTION} ({i})", "reference": "21 million"}) + "\n"
            for i in range(4)
        )
    )
    command = ["eval", str(golden), "--name", "killed", "--concurrency", "1"]
    with ollama_to_kill(f"{QUESTION} (1)") as (url, kill_mid_answer):  # the second item, mid-answer
        child = start_cli(command, store, url, tmp_path)
        kill_mid_answer()
        out, err = child.communicate(timeout=300)
    assert child.returncode == 1, (out, err)
    assert "3 of 4 items failed; run the same command to retry them" in err and "Traceback" not in out + err
    con = duckdb.connect(str(store))
    first = dict(con.execute("SELECT item_id, run_id FROM eval_items WHERE status = 'done'").fetchall())
    con.close()
    assert list(first) == ["q0"]  # the item before the kill was done and saved

    fake.clear()
    resumed = subprocess.run(
        [sys.executable, "-m", "pipeline", *command],
        cwd=ROOT,
        env=child_env(store, fake.url, tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "3 items run now, 1 already done, 0 failed" in resumed.stdout
    asked = " ".join(json.dumps(r) for r in fake.requests)
    assert f"{QUESTION} (0)" not in asked  # the done item was not asked again
    assert all(f"{QUESTION} ({i})" in asked for i in (1, 2, 3))
    con = duckdb.connect(str(store))
    items = con.execute("SELECT item_id, status, run_id FROM eval_items ORDER BY item_id").fetchall()
    runs = con.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    status = con.execute("SELECT status FROM eval_runs WHERE name = 'killed'").fetchone()[0]
    con.close()
    assert [(i, s) for i, s, _ in items] == [(f"q{i}", "done") for i in range(4)] and status == "finished"
    assert items[0][2] == first["q0"]  # the first item's run is the one saved before the kill
    assert sorted(r for _, _, r in items) == [r for r, _ in runs]  # no run of a failed attempt left over
    assert all(s == "accepted" for _, s in runs)


# ------------------------------------------------------------------------------- c. kill -9 during a save

# Run in the process to kill, before the command: the save stops at `point` and says so (a line on stdout and, for
# a process whose output is not read, a file holding its pid), until it is killed.
PAUSE_AT = textwrap.dedent("""
    import os, sys, threading
    sys.path.insert(0, {root!r})
    from store import db as store_db, journal
    from store.errors import StoreLocked

    def pause(what):
        marker = os.environ.get("PAUSED_MARKER")
        if marker:
            with open(marker + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(marker + ".tmp", marker)
        print(what, flush=True)
        threading.Event().wait()

    point = {point!r}
    real_insert, real_replace, real_write = journal.insert_run, os.replace, journal.write_entry
    if point == "inside":  # the run's rows are written in the open transaction, not committed
        def insert_run(cur, log):
            real_insert(cur, log)
            pause(point)
        journal.insert_run = insert_run
    elif point == "committed":  # committed into the write-ahead log, the file not yet checkpointed
        store_db.Database.checkpoint = lambda self: pause(point)
    else:  # the store is busy: the run goes to the journal
        def busy(cur, log):
            raise StoreLocked(cur and "store", 0.3)
        journal.insert_run = busy
        if point == "journal-part":  # the entry written to its temporary file, not yet renamed into place
            def replace(src, dst, *args, **kwargs):
                if os.path.basename(str(src)).startswith(".entry-"):
                    pause(point)
                return real_replace(src, dst, *args, **kwargs)
            journal.os.replace = replace
        elif point == "journal-whole":  # the entry in place, nothing after it done
            def write_entry(*args, **kwargs):
                path = real_write(*args, **kwargs)
                pause(point)
                return path
            journal.write_entry = write_entry
""")


def run_counts(store: Path) -> dict:
    """Rows per table of each run (as they hang off its id), by question."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        counts = {}
        for run_id, question in con.execute("SELECT id, question FROM runs").fetchall():
            counts[question] = {
                t: con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0]
                for t in ("attempts", "claims", "retrievals", "llm_calls", "spans")
            }
        return counts
    finally:
        con.close()


@pytest.fixture(scope="module")
def whole_run(ingested_store, tmp_path_factory):
    """The rows a whole run of QUESTION leaves in a store, asked without a fault (the fake is deterministic)."""
    from fake_ollama import FakeOllama

    store = tmp_path_factory.mktemp("whole") / "workbench.duckdb"
    shutil.copy(ingested_store, store)
    with FakeOllama() as server:
        env = child_env(store, server.url, store.parent)
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "ask", QUESTION], cwd=ROOT, env=env, capture_output=True
        )
    assert done.returncode == 0, done.stderr
    [counts] = run_counts(store).values()
    assert all(counts.values()), counts
    return counts


@pytest.mark.parametrize("point", ["inside", "committed", "journal-part", "journal-whole"])
@pytest.mark.slow
def test_kill_9_of_ask_during_its_save_leaves_the_run_whole_or_absent(ingested_store, fake, tmp_path, whole_run, point):
    store = tmp_path / "workbench.duckdb"
    shutil.copy(ingested_store, store)
    before = rows_of(store)
    script = PAUSE_AT.format(root=str(ROOT), point=point) + "\nfrom pipeline.cli.main import main\nmain(sys.argv[1:])\n"
    env = child_env(store, fake.url, tmp_path, WORKBENCH_STORE_IDLE_RELEASE_S="60")  # the file stays open
    child = subprocess.Popen(
        [sys.executable, "-c", script, "ask", QUESTION, "--quiet"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        lines = iter(child.stdout.readline, "")  # the answer may be printed first ("committed": the save is done)
        assert any(line.strip() == point for line in lines), "the save never reached the point"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()

    kept = journal.pending(str(store))
    if point == "committed":
        assert run_counts(store) == {QUESTION: whole_run}  # the write-ahead log replays it whole
    else:
        assert rows_of(store) == before  # nothing half-written came in
    if point == "journal-whole":
        assert len(kept) == 1 and json.loads(kept[0].read_text())["kind"] == "run"
    else:
        assert kept == []  # a part of an entry is never taken for one
    reset_process_state()
    from store.db import Database

    db = Database(str(store), 10, 0)  # opens, migrates, replays the journal
    from pipeline.session import replay_journal

    replay_journal(db)
    db.close()
    expected = {} if point in ("inside", "journal-part") else {QUESTION: whole_run}
    assert run_counts(store) == expected
    assert journal.pending(str(store)) == []


@pytest.mark.browser
def test_kill_9_of_the_app_during_a_save_leaves_the_store_whole_and_no_half_run(kb_db, settings, tmp_path):
    from browser_server import CHROMIUM, app_env, chromium, new_page, serving

    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install -y chromium)")
    kb_db.close()
    store = Path(settings.store_path)
    before = rows_of(store)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(PAUSE_AT.format(root=str(ROOT), point="inside"))
    marker = tmp_path / "paused"
    env = app_env(
        store, settings.ollama_host, {"PYTHONPATH": f"{hooks}{os.pathsep}{ROOT}", "PAUSED_MARKER": str(marker)}
    )
    with serving(env) as url, chromium() as browser:
        page = new_page(browser)
        page.goto(url)
        box = page.get_by_test_id("stChatInputTextArea")
        box.wait_for()
        box.fill(QUESTION)
        box.press("Enter")
        paused = wait_for_file(marker, timeout_s=180)
        assert paused, "the app's save never reached the point"
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the streamlit process itself
    assert rows_of(store) == before  # opens, and no half-written run
    reset_process_state()
    from pipeline.history.runs import RunFilter, list_runs
    from store.db import Database

    db = Database(str(store), 10, 0)
    assert list_runs(db, RunFilter(), 10) == []
    db.close()


def wait_for_file(path: Path, timeout_s: float) -> bool:
    """Whether path appeared within timeout_s (a generous bound: the file is the event, the clock only a limit)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ------------------------------------------------------------------- d. the app while another process holds the store


class Holder:
    """Another process that takes the store when told and keeps it until stopped (test_faults.holding, split in
    two so that a test thread can start it at the moment it needs)."""

    def __init__(self, path: str):
        self.path, self._held = path, None

    def start(self) -> None:
        self._held = holding(self.path)
        self._held.__enter__()

    def stop(self) -> None:
        if self._held is not None:
            self._held.__exit__(None, None, None)
            self._held = None


@contextmanager
def held_once_answering(fake, path: str, needle: str):
    """The store is taken by another process the moment an answer to a question holding `needle` starts streaming
    (retrieval is done), and kept until the block ends; the answer goes on once it is taken."""
    holder = Holder(path)
    gate = fake.hold(match=lambda body: needle in json.dumps(body), after_chunks=1, times=1, timeout_s=300)

    def take_then_release() -> None:
        if fake.wait_until(lambda f: gate.waiting >= 1, timeout_s=300):
            holder.start()
        gate.release()

    taker = threading.Thread(target=take_then_release, daemon=True)
    taker.start()
    try:
        yield holder
    finally:
        gate.release()
        taker.join(timeout=300)
        holder.stop()


@pytest.mark.slow
def test_chat_in_the_app_while_another_process_holds_the_store_shows_the_answer_and_keeps_the_run(
    fake, kb_db, settings, monkeypatch
):
    monkeypatch.setenv("WORKBENCH_STORE_SAVE_WAIT_S", "0.3")
    at = page()
    with held_once_answering(fake, settings.store_path, "Wikipedia index") as holder:
        at.chat_input[0].set_value(QUESTION).run()
        assert holder._held is not None, "the store was never taken"
        assert not at.exception, at.exception
        result = at.session_state["conversation"][0]["result"]
        assert result.status == "accepted" and "21 million" in result.answer and result.run_id is None
        assert any("21 million passages" in m.value for m in at.markdown)
        notes = " ".join(i.value for i in at.info)
        assert "could not take this run just now" in notes and "stayed locked by another process" in notes, notes
        assert "kept in the local journal" in notes
        assert len(journal.pending(settings.store_path)) == 1
    at.run()  # the next run of the page, the store free again: the journal is saved
    assert not at.exception, at.exception
    assert journal.pending(settings.store_path) == []
    assert [(r[1], r[2]) for r in rows_of(Path(settings.store_path))["runs"]] == [(QUESTION, "accepted")]


@pytest.mark.slow
def test_an_evaluation_in_the_app_while_another_process_holds_the_store_keeps_every_item_and_says_so(
    fake, kb_db, settings, monkeypatch
):
    """The store is taken mid-way through the first item's answer: that item is kept in the journal; the second
    cannot retrieve (the chunks are read from the store) and is kept as failed, with why; the evaluation's status
    waits in the journal too, and the page says all that once it can read the store. Run again under its name, the
    evaluation completes without asking the done item again."""
    from test_app import open_start_form, start_evaluation, wait_for_jobs

    monkeypatch.setenv("WORKBENCH_STORE_SAVE_WAIT_S", "0.3")
    at = page("pages/evaluate.py")
    at.text_input(key="eval_name").set_value("held")
    at.number_input(key="eval_limit").set_value(2)
    at.number_input(key="eval_concurrency").set_value(1)  # the first item is held: the second starts after the take
    first, second = [
        json.loads(line)["question"] for line in (ROOT / "data/eval/golden.jsonl").read_text().splitlines()[:2]
    ]
    with held_once_answering(fake, settings.store_path, first) as holder:
        start_evaluation(at)
        wait_for_jobs(300)
        at.run()
        assert holder._held is not None, "the store was never taken"
        assert not at.exception, at.exception
        errors = [e.value for e in at.error]
        assert any("stayed locked by another process" in e for e in errors), errors  # the page cannot read it
        kept = [json.loads(p.read_text())["kind"] for p in journal.pending(settings.store_path)]
        assert kept == ["eval_item", "eval_item", "eval_status"], kept
    at.run()  # the store free again: the page's next run saves the journal and tells how the evaluation went
    assert not at.exception, at.exception
    shown = [e.value for e in at.error] + [w.value for w in at.warning] + [s.value for s in at.success]
    notices = [" ".join(s.replace("\\", "").split()) for s in shown if s.startswith("Evaluation held")]
    assert len(notices) == 1, shown
    assert "finished with 1 failure · 1 done, 1 failed of 2 items" in notices[0], notices
    assert "stayed locked by another process" in notices[0] and "kept in the journal" in notices[0], notices
    assert "run it again under the same name" in notices[0]
    assert journal.pending(settings.store_path) == []

    def stored():
        con = duckdb.connect(settings.store_path, read_only=True)
        try:
            status = con.execute("SELECT status FROM eval_runs WHERE name = 'held'").fetchone()[0]
            items = con.execute("SELECT question, status, error FROM eval_items ORDER BY question").fetchall()
            return status, {q: (s, e) for q, s, e in items}
        finally:
            con.close()

    status, items = stored()
    assert status == "finished with 1 failure"
    assert items[first] == ("done", None) and items[second][0] == "failed"
    assert "stayed locked by another process" in items[second][1]

    fake.clear()
    open_start_form(at)  # closed once an evaluation exists, and drawn afresh when opened
    at.text_input(key="eval_name").set_value("held")
    at.number_input(key="eval_limit").set_value(2)
    start_evaluation(at)  # again under its name: only the failed item runs
    wait_for_jobs(300)
    at.run()
    assert not at.exception, at.exception
    status, items = stored()
    assert status == "finished" and {s for s, _ in items.values()} == {"done"}
    asked = " ".join(json.dumps(r) for r in fake.requests)
    assert second in asked and first not in asked


# ------------------------------------------------------------------------------ e. file names uploaded to the app

HOSTILE_DOCS = [
    "../../escape-up.md",
    "..\\..\\escape-back.md",
    "/tmp/escape-absolute.md",
    "C:\\Windows\\escape-drive.txt",
    "nul\x00byte.md",
    "<img src=x onerror=alert(1)>.md",
    "**bold** [link](http://evil.example/x).md",
    "line\nbreak.md",
    "x" * 300 + ".md",
]


def streamlit_refuses(at, name: str) -> bool:
    """A name with a NUL byte never reaches the page: Streamlit refuses it as it reads the widget's state, before
    the page's script runs (so no page code can catch it), and shows its own message, which does not echo the name.
    A browser never sends such a name (no file system has one); a hand-made request can."""
    return [e.message for e in at.exception] == ["Filename cannot contain null bytes."] and name not in str(at)


def files_under(*roots: Path) -> set[Path]:
    return {p for root in roots for p in root.rglob("*") if p.is_file()}


def page_text(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("name", HOSTILE_DOCS, ids=lambda n: repr(n)[:40])
@pytest.mark.slow
def test_a_document_uploaded_under_a_hostile_name_is_kept_inside_the_uploads_folder_and_shown_as_text(
    kb_db, settings, tmp_path, monkeypatch, name
):
    from pages.views.markup import escape_markdown
    from pipeline.config import load_settings
    from pipeline.knowledge.ingest import uploads_folder

    kb = tmp_path / "kb"
    kb.mkdir()
    monkeypatch.setenv("WORKBENCH_KB_PATH", str(kb))
    uploads = uploads_folder(load_settings())
    assert uploads == tmp_path / "uploads"
    before = files_under(tmp_path)
    outside = [Path("/tmp/escape-absolute.md"), tmp_path.parent / "escape-up.md", ROOT / "escape-up.md"]
    at = page("pages/knowledge_base.py")
    at.file_uploader[0].upload(name, b"# Upload\n\nThe harbour opens at dawn.\n", "text/markdown").run()
    if "\0" in name:  # refused by Streamlit itself, before any page code runs (see streamlit_refuses)
        assert streamlit_refuses(at, name)
    else:
        next(b for b in at.button if b.label == "Ingest uploaded files").click().run()
        assert not at.exception, at.exception
    new = files_under(tmp_path) - before
    written = {p for p in new if not p.is_relative_to(tmp_path / "state") and p.suffix != ".wal"}
    assert all(p.parent == uploads for p in written), written  # nothing anywhere else
    assert not any(p.exists() for p in outside)
    text = page_text(at)
    shown = [p.name for p in written]
    unusable = len(name.encode()) > 255 or any(ch in name for ch in "\n\0")
    assert not (unusable and shown), shown  # a name no file should carry is refused, not saved
    if shown:  # the name kept is the last part of the one given, shown escaped
        [kept] = shown
        assert kept == name.replace("\\", "/").rsplit("/", 1)[-1]
        assert escape_markdown(kept) in text or escape_markdown(f"{kept}: added") in text, text
    elif "\0" not in name:  # refused with a message that says what to do
        errors = " ".join(e.value for e in at.error)
        assert "rename the file" in errors, (errors, text)
    assert "<img" not in text.replace("\\<img", "")  # no raw HTML tag reaches the page


@pytest.mark.parametrize(
    "name",
    ["../../etc/escape.jsonl", "..\\..\\escape.jsonl", "/etc/escape.jsonl", "<b>**x**</b>.jsonl", "nul\x00byte.jsonl"],
    ids=lambda n: repr(n)[:30],
)
@pytest.mark.slow
def test_a_dataset_uploaded_under_a_hostile_name_writes_no_file_and_is_shown_as_text(kb_db, settings, tmp_path, name):
    from pages.views.markup import escape_markdown

    before = files_under(tmp_path, ROOT / "data")
    at = page("pages/evaluate.py")
    at.radio[0].set_value("Upload").run()
    row = json.dumps({"id": "q1", "question": QUESTION, "reference": "21 million"}).encode() + b"\n"
    at.file_uploader[0].upload(name, row, "application/json").run()
    text = page_text(at)
    if "\0" in name:
        assert streamlit_refuses(at, name)
    else:
        assert not at.exception, at.exception
        assert escape_markdown(name) in text, text  # the name, as text
    assert "<b>" not in text.replace("\\<b\\>", "")
    assert files_under(tmp_path, ROOT / "data") - before <= {Path(settings.store_path + ".wal")}
    assert not Path("/etc/escape.jsonl").exists() and not (tmp_path.parent / "escape.jsonl").exists()


def test_journal_entries_written_in_one_second_are_replayed_in_the_order_they_were_written(tmp_path):
    """Replay takes entries in file-name order; names that began with the second alone put two entries of one
    second in the order of their random ids."""
    store = str(tmp_path / "order.duckdb")
    written = [journal.write_entry(store, "eval_item", {"n": n}) for n in range(30)]
    assert journal.pending(store) == written
