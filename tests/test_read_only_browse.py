"""Several processes browse read-only, from a checkpointed snapshot or from the Parquet export's browse.duckdb,
while one writer keeps the store (DuckDB lets a file be opened by one writing process or by readers, not both).

The snapshot and browse.duckdb are left read-only (mode 0444), which the store detects for other users; the
browsers here say so with WORKBENCH_STORE_READ_ONLY, which binds whoever runs them (the tests run as root in CI,
where permission bits do not)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from test_app import fresh_streamlit_caches  # noqa: F401 - the autouse fixture: no cached store across tests
from test_faults import _page, ask

from bench.scale import sample_log
from pipeline.cli.main import main
from store.runs import save_run

ROOT = Path(__file__).resolve().parent.parent

BROWSER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from pipeline.history.runs import RunFilter, list_runs, load_run
    from pipeline.session import open_workbench
    from store.db import WaitQueue

    found_locked = []  # a process joins the queue of waiters only when it found the file locked
    join = WaitQueue.join
    WaitQueue.join = lambda queue: (found_locked.append(1), join(queue))[1]
    settings, db = open_workbench()
    rows = list_runs(db, RunFilter(), 1000)
    print(json.dumps({"read_only": db.read_only, "reason": db.read_only_reason, "runs": len(rows)}), flush=True)
    while not Path(sys.argv[1]).exists():  # keep the file open (idle release 60 s) until the other browser is in
        time.sleep(0.02)
    rows = list_runs(db, RunFilter(), 1000)
    answers = [load_run(db, r["id"]).result.answer for r in rows]
    print(json.dumps({"runs": len(rows), "answers": answers, "found_locked": len(found_locked)}), flush=True)
""")

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from bench.scale import sample_log
    from pipeline.session import open_workbench
    from store.runs import save_run

    settings, db = open_workbench()
    i = 0
    while not Path(sys.argv[1]).exists():
        i += 1
        save_run(db, sample_log(1000 + i))
        print(i, flush=True)
        time.sleep(0.02)
""")


def env_for(store: Path, read_only: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    return {
        **env,
        "WORKBENCH_DB": str(store),
        "WORKBENCH_STORE_READ_ONLY": "1" if read_only else "0",
        "WORKBENCH_STORE_IDLE_RELEASE_S": "60",  # each process keeps the file open between reads
        "WORKBENCH_STORE_LOCK_TIMEOUT_S": "3",
        "PYTHONPATH": str(ROOT),
    }


def start(script: str, store: Path, flag: Path, read_only: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, str(flag)],
        cwd=ROOT,
        env=env_for(store, read_only),
        stdout=subprocess.PIPE,
        text=True,
    )


def filled(settings, db) -> list[str]:
    """A chat answer through the engine and three stored runs; their answers, newest first."""
    ask(settings, db)
    for i in range(3):
        save_run(db, sample_log(i))
    with db.cursor() as cur:
        return [r[0] for r in cur.execute("SELECT answer FROM runs ORDER BY started_at DESC, id DESC").fetchall()]


def count_runs(path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def browse_at_once_while_the_writer_writes(view: Path, store: Path, tmp_path: Path) -> tuple[list[dict], int]:
    """Two browsers of view, both holding it open at once, while a writer adds runs to store: what each browser
    read, and how many runs the writer added meanwhile."""
    go, stop = tmp_path / "go", tmp_path / "stop"
    writer = start(WRITER, store, stop)
    browsers = []
    try:
        assert writer.stdout.readline().strip() == "1"  # the writer holds the store and has written
        for _ in range(2):
            browsers.append(start(BROWSER, view, go, read_only=True))
            first = json.loads(browsers[-1].stdout.readline())
            assert first["read_only"] and "WORKBENCH_STORE_READ_ONLY" in first["reason"], first
        cli = subprocess.run(  # a third reader, the command line, while both browsers hold the file
            [sys.executable, "-m", "pipeline", "runs", "--json"], cwd=ROOT, env=env_for(view, True), capture_output=True
        )
        assert cli.returncode == 0, cli.stderr
        go.touch()
        seen = [json.loads(b.stdout.readline()) for b in browsers]
        assert len(json.loads(cli.stdout)) == seen[0]["runs"]
    finally:
        go.touch()
        stop.touch()
        for process in [writer, *browsers]:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    lines = writer.stdout.read().split()
    return seen, int(lines[-1]) if lines else 1


@pytest.mark.slow
def test_two_processes_browse_a_snapshot_at_once_while_the_writer_keeps_the_store(kb_db, settings, tmp_path):
    answers = filled(settings, kb_db)
    snapshot = tmp_path / "snapshots" / "workbench.duckdb"
    snapshot.parent.mkdir()
    assert main(["snapshot", str(snapshot)]) == 0
    kb_db.close()
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o444 and not Path(f"{snapshot}.wal").exists()

    seen, written = browse_at_once_while_the_writer_writes(snapshot, Path(settings.store_path), tmp_path)
    assert [s["answers"] for s in seen] == [answers, answers]  # the snapshot, not the writer's new runs
    assert [s["found_locked"] for s in seen] == [0, 0]  # neither browser was ever kept out by the other
    assert written >= 2 and count_runs(settings.store_path) == len(answers) + written
    assert count_runs(snapshot) == len(answers)


@pytest.mark.slow
def test_two_processes_browse_the_parquet_export_while_the_writer_keeps_the_store(kb_db, settings, tmp_path):
    answers = filled(settings, kb_db)
    folder = tmp_path / "export"
    assert main(["export-parquet", str(folder)]) == 0
    kb_db.close()
    browse = folder / "browse.duckdb"

    seen, written = browse_at_once_while_the_writer_writes(browse, Path(settings.store_path), tmp_path)
    assert [s["answers"] for s in seen] == [answers, answers]
    assert written >= 2 and count_runs(settings.store_path) == len(answers) + written


@pytest.mark.parametrize("source", ["snapshot", "export-parquet"])
@pytest.mark.slow
def test_the_app_browses_a_read_only_view_and_says_writing_is_off(kb_db, settings, tmp_path, monkeypatch, source):
    filled(settings, kb_db)
    target = tmp_path / "view"
    assert main([source, str(target)]) == 0
    kb_db.close()
    view = target / "browse.duckdb" if source == "export-parquet" else target
    monkeypatch.setenv("WORKBENCH_DB", str(view))
    monkeypatch.setenv("WORKBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("WORKBENCH_STORE_READ_ONLY", "1")
    run_id = count_runs(settings.store_path)  # the newest run
    for page in ["pages/runs.py", "pages/trends.py", None]:
        at = _page(page)
        assert not at.exception, (page, at.exception)
        banner = [w.value for w in at.warning if w.value.startswith("**Read-only mode.**")]
        assert banner and "cannot be written" in banner[0], (page, [w.value for w in at.warning])
        assert "chat, evaluate and annotate cannot save here" in banner[0]
    runs = _page("pages/runs.py")
    runs.query_params["run_id"] = str(run_id)
    runs.run()
    assert not runs.exception and any(t.value == f"Run {run_id}" for t in runs.title)


def test_a_snapshot_replaces_only_an_earlier_snapshot(kb_db, settings, tmp_path, capsys):
    filled(settings, kb_db)
    snapshot = tmp_path / "snap.duckdb"
    assert main(["snapshot", str(snapshot)]) == 0
    assert "wrote a snapshot" in capsys.readouterr().out
    save_run(kb_db, sample_log(99))
    assert main(["snapshot", str(snapshot)]) == 0
    out = capsys.readouterr().out
    assert "replaced the snapshot" in out and "5 runs" in out and count_runs(snapshot) == 5

    assert main(["snapshot", settings.store_path]) == 2
    assert "is the store itself" in capsys.readouterr().err
    notes = tmp_path / "notes.duckdb"
    notes.write_text("not a database")
    assert main(["snapshot", str(notes)]) == 2
    assert "is not an earlier snapshot" in capsys.readouterr().err and notes.read_text() == "not a database"
    assert main(["snapshot", str(tmp_path / "missing" / "s.duckdb")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_snapshot_holds_the_rows_still_in_the_write_ahead_log(settings, tmp_path):
    from pipeline.history.export import snapshot
    from store.db import Database

    db = Database(settings.store_path, 2, 60)  # a writer that keeps the store open: its rows sit in the log
    for i in range(3):
        save_run(db, sample_log(i))
    assert Path(f"{settings.store_path}.wal").stat().st_size > 0
    taken = snapshot(db, tmp_path / "snap.duckdb")
    db.close()
    assert taken.rows["runs"] == 3 and count_runs(tmp_path / "snap.duckdb") == 3
