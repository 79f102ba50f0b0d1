"""Bad input and odd states, each met with a message that says what to fix (issue 27, items 5-7): no traceback,
no silent state, no setting accepted without a word."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pytest
from conftest import reset_process_state
from test_faults import QUESTION, read_only

from pipeline.cli.main import main
from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.models.health import check_store
from store import journal


def golden(folder: Path) -> Path:
    path = folder / "g.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": QUESTION, "reference": "21 million"}) + "\n")
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# 5. Tracebacks


def test_eval_on_a_read_only_store_says_so(kb_db, settings, capsys):
    data = golden(Path(settings.store_path).parent)
    kb_db.close()
    with read_only(Path(settings.store_path)):
        reset_process_state()
        assert main(["eval", str(data), "--name", "ro"]) == 1
    err = capsys.readouterr().err
    assert "is read-only" in err and "writable" in err and "Traceback" not in err


def test_runs_with_a_negative_limit_is_refused(db, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["runs", "--limit", "-1"])
    assert stopped.value.code == 2
    assert "--limit" in capsys.readouterr().err


def test_an_ollama_host_that_is_no_address_is_named(monkeypatch, capsys):
    monkeypatch.setenv("OLLAMA_HOST", "ht!tp://::::")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "OLLAMA_HOST" in caught.value.message and "ht!tp://::::" in caught.value.message
    assert "127.0.0.1:11434" in caught.value.fix
    assert main(["ask", QUESTION]) == 1
    assert "OLLAMA_HOST" in capsys.readouterr().err


# 6. Silent states


def test_unreadable_journal_entries_are_reported_with_their_folder(kb_db, settings, capsys):
    folder = journal.journal_dirs(settings.store_path)[0]
    folder.mkdir(parents=True)
    (folder / "0001-broken.json").write_text("{not json")
    assert journal.replay(kb_db) == 0
    assert journal.unreadable(settings.store_path) == [folder / "0001-broken.bad"]
    checks = {c.name: c for c in check_store(settings, kb_db)}
    bad = checks["journal entries"]
    assert not bad.ok and "1 journal entry" in bad.detail and str(folder) in bad.detail
    assert main(["doctor"]) == 1
    assert str(folder) in capsys.readouterr().out.replace("\n", "")


def test_the_sidebar_reports_unreadable_journal_entries(kb_db, settings):
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    folder = journal.journal_dirs(settings.store_path)[0]
    folder.mkdir(parents=True)
    (folder / "0001-broken.bad").write_text("{not json")
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    warnings = " ".join(w.value for w in at.sidebar.warning)
    assert "1 journal entry" in warnings and "could not be read" in warnings


def test_a_duckdb_file_of_something_else_is_refused_untouched(fake, settings, capsys):
    path = Path(settings.store_path)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE animals (name VARCHAR)")
    con.execute("INSERT INTO animals VALUES ('cat')")
    con.close()
    before = digest(path)
    assert main(["runs"]) == 1
    err = capsys.readouterr().err.replace("\n", "")
    assert "is not a workbench store" in err and "animals" in err and str(path) in err
    assert digest(path) == before
    con = duckdb.connect(str(path), read_only=True)
    assert [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()] == ["animals"]
    con.close()


def test_a_store_cut_short_is_named_damaged(kb_db, settings, capsys):
    kb_db.close()
    path = Path(settings.store_path)
    data = path.read_bytes()
    path.write_bytes(data[: min(1 << 20, len(data) // 2)])  # its first megabyte, or half of a smaller file
    reset_process_state()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out.replace("\n", "")
    assert "is damaged" in out and "permissions" not in out


# 7. Settings accepted without a word


def test_a_negative_lock_timeout_is_refused(monkeypatch):
    monkeypatch.setenv("WORKBENCH_STORE_LOCK_TIMEOUT_S", "-5")
    with pytest.raises(ConfigError, match="store_lock_timeout_s"):
        load_settings()


def test_a_verifier_chain_naming_no_registered_verifier_is_refused(monkeypatch):
    monkeypatch.setenv("WORKBENCH_VERIFIER_CHAIN", "bogus")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "verifier_chain" in caught.value.message and "bogus" in caught.value.message
    assert "minicheck_chunk" in caught.value.fix
    monkeypatch.setenv("WORKBENCH_VERIFIER_CHAIN", " llm , minicheck_context ")
    assert load_settings().verifier_chain.replace(" ", "") == "llm,minicheck_context"


def test_an_out_of_range_value_in_the_toml_names_the_file(tmp_path, monkeypatch):
    toml = tmp_path / "mine.toml"
    toml.write_text("temperature = -3.0\n")
    monkeypatch.setenv("WORKBENCH_CONFIG", str(toml))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "temperature" in caught.value.message and str(toml) in caught.value.message
    assert "temperature in" in caught.value.fix and str(toml) in caught.value.fix


def test_a_missing_config_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(tmp_path / "missing.toml") in caught.value.message and "WORKBENCH_CONFIG" in caught.value.fix
    monkeypatch.setenv("WORKBENCH_CONFIG", "")  # empty: no config file
    assert load_settings().temperature == 0.0


def test_eval_on_a_folder_says_it_is_a_folder(db, tmp_path, capsys):
    assert main(["eval", str(tmp_path), "--name", "x"]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert "is a folder" in err and "does not exist" not in err


def test_runs_with_a_faithfulness_out_of_range_is_refused(db, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["runs", "--min-faithfulness", "5"])
    assert stopped.value.code == 2
    assert "between 0 and 1" in capsys.readouterr().err
