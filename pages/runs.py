"""Every run, filtered and paged in SQL; a run's drilldown by deep link (?run_id=ID); exports."""

import tempfile
from datetime import datetime, time, timedelta
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views.common import page_setup
from pages.views.drilldown import show_drilldown
from pages.views.markup import escape_markdown, fmt_count
from pipeline.history.runs import (
    RunColumn,
    RunFilter,
    export_runs,
    filter_choices,
    find_runs,
    listed_columns,
    load_run,
)

PAGE_SIZE = 50
JUDGE_CRITERIA = ("correctness", "helpfulness", "faithfulness")  # the judges' scores listed after the run's columns
MOMENT = {"%Y": "YYYY", "%m": "MM", "%d": "DD", "%H": "HH", "%M": "mm", "%S": "ss"}  # strftime to momentJS


def column_config(column: RunColumn):
    """The run column's heading and format (its `fmt`: a number's format spec, or a date's strftime pattern)."""
    if column.fmt.startswith("%"):
        moment = column.fmt
        for strftime, token in MOMENT.items():
            moment = moment.replace(strftime, token)
        return st.column_config.DatetimeColumn(column.label, format=moment)
    if column.fmt:
        return st.column_config.NumberColumn(column.label, format=f"%{column.fmt}")
    return st.column_config.Column(column.label)


settings, db = page_setup("Runs")

raw_id = st.query_params.get("run_id", "")
if raw_id:
    if st.button("← All runs"):
        del st.query_params["run_id"]
        st.rerun()
    stored = load_run(db, int(raw_id)) if raw_id.isdigit() else None
    if stored is None:
        st.title("Runs")
        st.error(f"There is no run {escape_markdown(repr(raw_id))}: it may have been deleted, or the link is mistyped.")
        st.stop()
    st.title(f"Run {stored.result.run_id}")
    show_drilldown(stored)
    st.stop()

st.title("Runs")
choices = filter_choices(db)
with st.expander("Filters", expanded=True):
    c1, c2, c3, c4 = st.columns(4)
    days = c1.date_input("Date range", value=(), format="YYYY-MM-DD")
    kinds = c2.multiselect("Kind", choices["kinds"])
    statuses = c3.multiselect("Status", choices["statuses"])
    models = c4.multiselect("Model", choices["models"])
    c5, c6, c7, c8 = st.columns([2, 2, 2, 3])
    low, high = c5.slider("Faithfulness", 0.0, 1.0, (0.0, 1.0), step=0.05)
    pipelines = c6.multiselect(
        "Pipeline / service",
        choices["pipelines"],
        help="An imported run's pipeline; a traced run's service (its OpenTelemetry service.name).",
    )
    tags = c7.multiselect("Tag", choices["tags"])
    text = c8.text_input("Text in question or answer")
scored_only = (low, high) != (0.0, 1.0)
run_filter = RunFilter(
    since=datetime.combine(days[0], time.min) if len(days) >= 1 else None,
    until=datetime.combine(days[-1], time.min) + timedelta(days=1) if len(days) >= 1 else None,
    kinds=kinds,
    statuses=statuses,
    models=models,
    tags=tags,
    text=text,
    pipelines=pipelines,
    faithfulness_min=low if scored_only else None,
    faithfulness_max=high if scored_only else None,
)

left, right = st.columns([1, 3])
page = left.number_input("Page", 1, None, 1)
found = find_runs(db, run_filter, int(page), PAGE_SIZE)
total, rows = found.total, found.rows
right.caption(f"{fmt_count(total)} runs match; page {page} of {max(1, -(-total // PAGE_SIZE))}.")
if not rows:
    st.info("No runs match these filters." if not total else "This page is past the last page.")
    st.stop()
frame = pd.DataFrame(rows)
judges = [f"judge {criterion}" for criterion in JUDGE_CRITERIA]
for criterion, name in zip(JUDGE_CRITERIA, judges, strict=True):
    frame[name] = frame["judge"].map(lambda j, c=criterion: j.get(c))
frame["open"] = frame["id"].map(lambda i: f"/runs?run_id={i}")
columns = listed_columns()
st.dataframe(
    frame[["open", *(c.name for c in columns), *judges]],  # the link first, on screen however wide the rest
    hide_index=True,
    width="stretch",
    column_config={
        "open": st.column_config.LinkColumn("drilldown", display_text="open"),
        **{c.name: column_config(c) for c in columns},
        **{name: st.column_config.NumberColumn(format="%.2f") for name in judges},
    },
)

left, right = st.columns([3, 1])
questions = dict(zip(frame["id"], frame["question"], strict=True))
chosen = left.selectbox("Open a run of this page", list(questions), format_func=lambda i: f"{i}: {questions[i][:90]}")
if right.button("Open drilldown"):
    st.query_params["run_id"] = str(chosen)
    st.rerun()

st.subheader("Export the filtered runs")
fmt = st.radio(
    "Format",
    ["csv", "parquet", "jsonl"],
    horizontal=True,
    help="JSONL nests each run's claims (final attempt) under 'claims'.",
)
if st.button(f"Prepare {fmt} export of {fmt_count(total)} runs"):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"runs.{fmt}"
        export_runs(db, run_filter, fmt, str(path))
        st.download_button(f"Download runs.{fmt}", path.read_bytes(), file_name=f"runs.{fmt}")
