import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import duckdb
import pytest

from store.db import Database
from store.errors import StoreError, StoreLocked, StoreUnavailable, WorkbenchError
from store.history import RunFilter, query_runs
from store.migrations import MIGRATIONS, applied, m001_knowledge_base, migrate
from store.records import AttemptRecord, ClaimRecord, RetrievalRecord, RunLog, RunRecord
from store.runs import get_run, save_run

TABLES = {
    "documents",
    "chunks",
    "runs",
    "retrievals",
    "attempts",
    "claims",
    "llm_calls",
    "llm_cache",
    "schema_migrations",
    "received_spans",
    "run_views",
    "dataset_versions",
    "dataset_items",
    "eval_runs",
    "eval_items",
    "scores",
    "detector_runs",
    "detector_results",
    "alerts",
    "baseline_pins",
    "ratings",
    "claim_ratings",
    "corrections",
    "journal_entries",
    "chunk_flags",
    "correction_sets",
    "rejudged",
    "llm_texts",
    "spans",
    "retired_documents",
    "similarity_scales",
    "synth_jobs",
    "synth_candidates",
    "sweeps",
    "sweep_combinations",
    "judge_repeats",
    "judge_prompt_versions",
    "judge_prompt_active",
    "alignment_steps",
}


def tables(con):
    return {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def test_migrating_an_empty_file_creates_every_table(tmp_path):
    con = duckdb.connect(str(tmp_path / "new.duckdb"))
    assert migrate(con) == [m.__name__ for m in MIGRATIONS]
    assert tables(con) == TABLES
    assert migrate(con) == []


def test_migrating_an_old_file_keeps_its_data(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = duckdb.connect(path)
    con.execute(
        "CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL "
        "DEFAULT current_timestamp)"
    )
    m001_knowledge_base(con)
    con.execute("INSERT INTO schema_migrations (name) VALUES ('m001_knowledge_base')")
    con.execute(
        "INSERT INTO documents (path, title, content_hash, embed_model, chunk_size, chunk_overlap, "
        "n_chunks, n_chars) VALUES ('a.md', 'A', 'h', 'm', 512, 64, 0, 10)"
    )
    con.close()
    con = duckdb.connect(path)
    assert migrate(con) == [m.__name__ for m in MIGRATIONS[1:]]
    assert con.execute("SELECT path FROM documents").fetchall() == [("a.md",)]
    assert applied(con) == [m.__name__ for m in MIGRATIONS]


def test_a_failing_migration_leaves_nothing_half_done(tmp_path, monkeypatch):
    def broken(con):
        con.execute("CREATE TABLE half (x INTEGER)")
        raise RuntimeError("boom")

    monkeypatch.setattr("store.migrations.MIGRATIONS", MIGRATIONS + [broken])
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    with pytest.raises(RuntimeError):
        migrate(con)
    assert "half" not in tables(con)
    assert "broken" not in applied(con)


def sample_log(question="q?"):
    now = datetime.now(timezone.utc)
    return RunLog(
        RunRecord(
            kind="chat",
            question=question,
            status="accepted",
            started_at=now,
            answer="A [1].",
            faithfulness=1.0,
            n_attempts=1,
            final_attempt=1,
            config={"top_k": 5},
        ),
        retrievals=[RetrievalRecord(1, question, 1, 42, 0.9, True)],
        attempts=[AttemptRecord(1, False, "A [1].", "verified", 1.0, 1, 1)],
        claims=[ClaimRecord(1, 1, "A.", "supported", "bespoke-minicheck", 42, 0, 2, "A.", "ok")],
    )


def test_a_run_round_trips(tmp_path):
    db = Database(str(tmp_path / "r.duckdb"), 1, 0)
    run_id = save_run(db, sample_log())
    run = get_run(db, run_id)
    assert run["status"] == "accepted" and run["faithfulness"] == 1.0
    assert run["retrievals"][0]["chunk_id"] == 42 and run["retrievals"][0]["cited"] is True
    assert run["claims"][0]["span_end"] == 2 and run["attempts"][0]["status"] == "verified"
    assert [r["id"] for r in query_runs(db, RunFilter())] == [run_id]
    assert get_run(db, run_id + 1) is None


def test_connection_is_released_when_idle_so_another_process_can_write(tmp_path):
    path = str(tmp_path / "shared.duckdb")
    db = Database(path, lock_timeout_s=5, idle_release_s=0)
    save_run(db, sample_log("from this process"))
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect({path!r})
        con.execute("UPDATE runs SET question = 'changed by another process'")
        con.close()
    """),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 0, other.stderr
    assert query_runs(db, RunFilter())[0]["question"] == "changed by another process"


def test_a_lock_held_too_long_gives_a_clear_message(tmp_path):
    path = str(tmp_path / "locked.duckdb")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb, sys
        con = duckdb.connect({path!r})
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
        db = Database(path, lock_timeout_s=0.5, idle_release_s=0)
        with pytest.raises(StoreLocked) as caught:
            query_runs(db, RunFilter())
        assert "stayed locked by another process for 0.5 s" in str(caught.value)
        assert "WORKBENCH_DB" in caught.value.fix
    finally:
        holder.kill()
        holder.communicate()  # and close its pipes


def test_a_store_that_cannot_be_opened_says_what_to_check(tmp_path):
    db = Database(str(tmp_path), lock_timeout_s=0.5, idle_release_s=0)  # a folder, not a file
    with pytest.raises(StoreUnavailable) as caught:
        query_runs(db, RunFilter())
    assert caught.value.message.startswith(f"cannot open the store {tmp_path}: ")
    assert caught.value.fix == "check the path in WORKBENCH_DB and its permissions"
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, WorkbenchError)


def test_the_store_errors_are_the_pipelines_error_family():
    import pipeline.errors

    assert pipeline.errors.WorkbenchError is WorkbenchError and pipeline.errors.StoreLocked is StoreLocked
    assert issubclass(StoreLocked, pipeline.errors.WorkbenchError)


@pytest.mark.slow
def test_an_optional_read_gives_up_after_a_short_wait_and_skips_for_a_while(tmp_path, monkeypatch):
    """A read the caller can do without (a response-cache lookup) waits OPTIONAL_READ_WAIT_S for a store another
    process holds, not the lock timeout; the next ones, for OPTIONAL_READ_BACKOFF_S, give up at once; and it does
    not wait behind this process's own thread that is waiting to open the store. Each wait is read from what the
    code did (the limit its StoreLocked names, its attempts to open the file, which thread finished first), not
    from a clock."""
    import threading

    from store import db as store_db
    from store.llm_log import cache_get

    path = str(tmp_path / "held.duckdb")
    Database(path, idle_release_s=0).close()
    attempts = []  # the thread of each attempt to open the store
    tried = threading.Condition()
    connect = duckdb.connect

    def counted(*args, **kwargs):
        with tried:
            attempts.append(threading.current_thread().name)
            tried.notify_all()
        return connect(*args, **kwargs)

    monkeypatch.setattr(store_db.duckdb, "connect", counted)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; con = duckdb.connect({path!r}); print('locked', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        db = Database(path, lock_timeout_s=30, idle_release_s=0)
        with pytest.raises(StoreLocked) as waited:
            cache_get(db, "some key")
        assert f"for {store_db.OPTIONAL_READ_WAIT_S:g} s" in str(waited.value) and attempts  # not the lock's 30 s
        tries = len(attempts)
        with pytest.raises(StoreLocked) as skipped:
            cache_get(db, "some key")
        assert "for 0 s" in str(skipped.value) and len(attempts) == tries  # skipped: it found the store locked
        db._skip_optional_until = 0.0
        saved = []

        def save():  # a save of this process waits for the lock, holding the handle's guard
            with db.transaction(30):
                saved.append(True)

        writer = threading.Thread(target=save, name="writer")
        writer.start()
        with tried:
            assert tried.wait_for(lambda: "writer" in attempts, timeout=30)
        tries = len(attempts)
        with pytest.raises(StoreLocked) as behind:
            cache_get(db, "some key")
        assert f"for {store_db.OPTIONAL_READ_WAIT_S:g} s" in str(behind.value)
        assert writer.is_alive() and not saved  # it gave up while the save still waited: not behind it
        assert "MainThread" not in attempts[tries:]  # nor did it try the file the save is waiting for
    finally:
        holder.kill()
        holder.communicate()
    writer.join(30)
    assert saved == [True]  # the save went on once the other process let go


@pytest.mark.slow
def test_a_connection_closing_in_the_idle_timer_at_exit_does_not_abort_the_process(tmp_path):
    """Issue 27, item 4: the idle release's timer thread (a daemon) inside DuckDB's close (here a checkpoint of a
    large write-ahead log) when the interpreter finalizes made Python end it with pthread_exit, which aborted the
    process (exit code 134, "FATAL: exception not rethrown") after the command had finished. The store closes
    every connection at exit, before finalization."""
    script = textwrap.dedent("""
        import sys, time
        from store.db import Database
        db = Database(sys.argv[1], idle_release_s=float(sys.argv[2]))
        with db.transaction() as cur:
            cur.execute("CREATE TABLE filler AS SELECT range AS x, md5(range::varchar) AS y FROM range(3000000)")
        time.sleep(float(sys.argv[2]) + 0.005)  # the timer has begun closing: the process exits meanwhile
    """)
    root = str(__import__("pathlib").Path(__file__).resolve().parent.parent)
    codes = []
    for n, delay in enumerate(["0.01", "0.05"]):
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / f"exit{n}.duckdb"), delay],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=120,
        )
        codes.append((done.returncode, done.stderr[-300:]))
    assert codes == [(0, ""), (0, "")]
