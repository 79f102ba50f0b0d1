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
import subprocess
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, TEST_ENV, reset_process_state
from test_faults import QUESTION

from pipeline.cli.main import main
from store import journal

TABLES = ("runs", "attempts", "claims", "retrievals", "llm_calls", "spans", "eval_items", "scores", "ratings")


def rows_of(store: Path) -> dict:
    """What the store holds, table by table (row counts) and the runs themselves, read by a connection of its own
    (read-only: a file that cannot be opened fails here)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
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
