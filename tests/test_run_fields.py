"""A run's fields are declared once: RunRecord's fields are the runs table's columns, written and read back by
name; RUN_COLUMNS declares what the list of runs (the Runs page, `runs`) and the exports show.

The fixture adds a column the way a newcomer would (a migration: ALTER TABLE; the field: a RunRecord subclass;
its display entry: one RunColumn more) and nothing else, and the run's new field is then stored, read back,
listed, shown in the drilldown and exported."""

from __future__ import annotations

import csv
import dataclasses
import json
from datetime import datetime, timezone

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest
from test_app import fresh_streamlit_caches  # noqa: F401 (autouse: each AppTest opens this test's store)

from pages.views.markup import escape_markdown
from pipeline.answering.events import AnswerResult
from pipeline.cli.main import main
from pipeline.history.runs import RunFilter, list_runs, load_run
from store import history
from store.history import RUN_COLUMNS, RunColumn, export_runs
from store.records import RunLog, RunRecord
from store.runs import DERIVED_RUN_COLUMNS, get_run, record_values, save_run

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CHANNEL = "=cmd|' /C calc'!A0"  # a formula, to see the CSV export neutralise the new text column


@dataclasses.dataclass
class ChannelRun(RunRecord):
    channel: str | None = None  # the new field: where the question came from


@dataclasses.dataclass(kw_only=True)
class ChannelResult(AnswerResult, ChannelRun):
    record_type = ChannelRun


@pytest.fixture
def channel_db(db, monkeypatch):
    """The store with a runs column more (the migration) and its display entry; ChannelRun has the field."""
    with db.transaction() as cur:
        cur.execute("ALTER TABLE runs ADD COLUMN channel VARCHAR")
    monkeypatch.setattr(history, "RUN_COLUMNS", (*RUN_COLUMNS, RunColumn("channel", "channel", text=True)))
    return db


def save_channel_run(db, channel: str = CHANNEL) -> int:
    run = ChannelRun(kind="chat", question="Where from?", status="accepted", started_at=T0, answer="Here.")
    run.channel = channel
    return save_run(db, RunLog(run))


def test_a_new_field_is_stored_and_read_back_by_name(channel_db):
    run_id = save_channel_run(channel_db)
    with channel_db.cursor() as cur:
        assert cur.execute("SELECT channel, question FROM runs WHERE id = ?", [run_id]).fetchone() == (
            CHANNEL,
            "Where from?",
        )
    row = get_run(channel_db, run_id)
    record = ChannelRun(**record_values(row, ChannelRun))
    assert (record.channel, record.question, record.answer, record.config) == (CHANNEL, "Where from?", "Here.", {})
    result = ChannelResult.from_stored(row)
    assert (result.run_id, result.channel, result.status) == (run_id, CHANNEL, "accepted")
    log = result.to_log([], [], T0)  # and written again from the result
    assert type(log.run) is ChannelRun and log.run.channel == CHANNEL


def test_a_new_column_is_listed_by_the_query_the_cli_and_the_page(channel_db, capsys):
    run_id = save_channel_run(channel_db, channel="slack")
    assert [(r["id"], r["channel"]) for r in list_runs(channel_db, RunFilter())] == [(run_id, "slack")]
    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["channel"] == "slack"
    assert main(["runs"]) == 0
    header, *_ = [line for line in capsys.readouterr().out.splitlines() if "question" in line]
    assert "channel" in header
    at = AppTest.from_file(f"{ROOT}/streamlit_app.py", default_timeout=60)
    at.run()
    at.switch_page("pages/runs.py")
    at.run()
    assert not at.exception, at.exception
    frame = at.dataframe[0].value
    assert list(frame["channel"]) == ["slack"]


def test_the_drilldown_shows_the_declared_columns_of_the_run(channel_db, monkeypatch):
    """The drilldown reads the run back as the engine's result: with the field on RunRecord, AnswerResult has it."""
    run_id = save_channel_run(channel_db)
    monkeypatch.setattr("pipeline.history.runs.AnswerResult", ChannelResult)
    assert load_run(channel_db, run_id).result.channel == CHANNEL
    at = AppTest.from_file(f"{ROOT}/streamlit_app.py", default_timeout=60)
    at.query_params["run_id"] = str(run_id)
    at.run()
    at.switch_page("pages/runs.py")
    at.run()
    assert not at.exception, at.exception
    header = at.markdown[0].value
    assert f"channel **{escape_markdown(CHANNEL)}**" in header and "attempts **0**" in header


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_new_column_is_exported(channel_db, tmp_path, fmt):
    save_channel_run(channel_db)
    path = tmp_path / f"runs.{fmt}"
    assert export_runs(channel_db, RunFilter(), fmt, str(path)) == 1
    if fmt == "csv":
        (row,) = csv.DictReader(path.open(newline="", encoding="utf-8"))
        assert row["channel"] == "'" + CHANNEL  # a text column: neutralised like the question
    else:
        (line,) = path.read_text().splitlines()
        assert json.loads(line)["channel"] == CHANNEL  # JSON keeps the text as stored


def test_the_runs_table_and_the_declaration_agree(db):
    """Every RunRecord field is a runs column and every runs column a field (or derived); every listed or exported
    text column is neutralised in a CSV export."""
    with db.cursor() as cur:
        types = dict(
            cur.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'runs'"
            ).fetchall()
        )
    fields = [f.name for f in dataclasses.fields(RunRecord)]
    assert set(types) == {"id", *fields, *DERIVED_RUN_COLUMNS}
    for column in RUN_COLUMNS:
        assert column.sql or column.name in types, column.name
        if column.sql is None and types[column.name] == "VARCHAR":
            assert column.text, f"{column.name} is text: declare it text=True, or a CSV export can run a formula"
