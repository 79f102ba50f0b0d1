"""Every run, filtered and paged in SQL, grouped with aggregates, under saved views; a run's drilldown by deep link
(?run_id=ID); a conversation's turns in order (?conversation=NAME); exports."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.views import run_filters
from pages.views.common import page_setup
from pages.views.conversation import conversation_picker, show_conversation
from pages.views.datasets import add_run_form
from pages.views.drilldown import open_span, show_drilldown
from pages.views.markup import escape_markdown, fmt_count, plural
from pages.views.navigation import page
from pages.views.tables import count_column, ms_column, score_column, table
from pipeline.errors import InputError
from pipeline.history.runs import (
    GROUPS,
    RunColumn,
    export_runs,
    filter_choices,
    find_runs,
    group_runs,
    listed_columns,
    load_run,
)
from pipeline.history.views import SavedView, delete_view, priced, prices, save_view, saved_views

PAGE_SIZE = 50
JUDGE_CRITERIA = ("correctness", "helpfulness", "faithfulness")  # the judges' scores listed after the run's columns
# listed columns shown only when asked for (More columns), so that the rest fit a 1280 px screen after the run's id;
# a newly declared column is shown. With prices, the cost takes the tokens' place; without, there is no cost.
ON_REQUEST = ("id", "kind", "pipeline", "n_attempts", "conversation_id", "turn_no")
NUMBER_WIDTH = 75  # px: a number column's heading and value
# the key columns sum to 815 px, within the list's 818 px at a 1280 px screen (tests/test_browser_runs.py)
WIDTHS = {
    "status": 80,
    "question": 125,
    "tokens": 65,
    "replayed": 65,
    "generator_model": 80,
    "evaluation": 80,
    "started_at": 115,
}
MOMENT = {"%Y": "YYYY", "%m": "MM", "%d": "DD", "%H": "HH", "%M": "mm", "%S": "ss"}  # strftime to momentJS


def column_config(column: RunColumn):
    """The run column's heading and format (its `fmt`: a number's format spec, or a date's strftime pattern)."""
    if column.fmt.startswith("%"):
        moment = column.fmt
        for strftime, token in MOMENT.items():
            moment = moment.replace(strftime, token)
        return st.column_config.DatetimeColumn(column.label, format=moment, width=WIDTHS.get(column.name))
    if column.fmt:
        number = "percent" if column.fmt.endswith("%") else f"%{column.fmt}"  # a share: 0.4 shown as 40%
        return st.column_config.NumberColumn(column.label, format=number, width=WIDTHS.get(column.name, NUMBER_WIDTH))
    return st.column_config.Column(column.label, width=WIDTHS.get(column.name))


RUNS = page(__file__)
settings, db = page_setup(__file__, heading=False)  # a drilldown and a conversation have their own

raw_id = st.query_params.get("run_id", "")
if raw_id:
    if st.button("← All runs"):
        del st.query_params["run_id"]
        st.rerun()
    stored = load_run(db, int(raw_id)) if raw_id.isdigit() else None
    if stored is None:
        st.title(RUNS.title)
        st.error(f"There is no run {escape_markdown(repr(raw_id))}: it may have been deleted, or the link is mistyped.")
        st.stop()
    st.title(f"Run {stored.result.run_id}")
    open_span(stored.result.run_id, st.query_params.pop("span", None))
    show_drilldown(stored, db)
    st.stop()

conversation = st.query_params.get("conversation", "")
if conversation:
    if st.button("← All runs", key="conversation_back"):
        del st.query_params["conversation"]
        st.rerun()
    st.title("Conversation")
    st.text(conversation)
    if not show_conversation(db, conversation):
        st.error(f"There is no conversation {escape_markdown(repr(conversation))}: no run is a turn of it.")
    st.stop()

st.title(RUNS.title)
opened = conversation_picker(db)
if opened is not None:
    st.query_params["conversation"] = opened
    st.rerun()
costed = priced(settings)
GROUP_NONE = "nothing"


def apply_view(view: SavedView) -> None:
    """Set the filters and the grouping to the saved view's (a callback: it runs before the widgets are drawn)."""
    run_filters.apply_view(st.session_state, view)
    st.session_state["runs_group_by"] = view.group_by or GROUP_NONE


st.session_state.setdefault("runs_group_by", GROUP_NONE)  # set here, not as its value: a saved view sets it too
views = {v.name: v for v in saved_views(settings, db)}
with st.expander(f"Saved views ({fmt_count(len(views))})", expanded=bool(views)):
    v1, v2, v3 = st.columns([3, 1, 1], vertical_alignment="bottom")
    chosen_view = v1.selectbox("Saved view", list(views), index=None, placeholder="choose a saved view")
    v2.button(
        "Apply view",
        disabled=chosen_view is None,
        on_click=lambda: apply_view(views[chosen_view]),
        width="stretch",
    )
    if v3.button("Delete view", disabled=chosen_view is None or db.read_only, width="stretch"):
        delete_view(db, chosen_view)
        st.rerun()

run_filter = run_filters.filter_panel(lambda: filter_choices(db), costed, prices(settings))

g1, g2, g3 = st.columns([2, 2, 1], vertical_alignment="bottom")
group_by = g1.segmented_control("Group by", [GROUP_NONE, *GROUPS], key="runs_group_by", required=True)
view_name = g2.text_input("Save these filters as a view", placeholder="e.g. slow answers", key="runs_view_name")
if g3.button(
    "Save view",
    disabled=db.read_only,
    width="stretch",
    help="The store is read-only: views cannot be saved here." if db.read_only else None,
):
    try:
        saved = save_view(db, view_name, run_filter, None if group_by == GROUP_NONE else group_by)
    except InputError as exc:
        st.error(str(exc))
    else:
        st.toast(f"Saved the view {saved!r}.")
        st.rerun()

if group_by and group_by != GROUP_NONE:
    groups = pd.DataFrame(group_runs(db, run_filter, group_by))
    if groups.empty:
        st.info("No runs match these filters.")
    else:
        groups["group"] = groups["group"].map(lambda g: f"(no {group_by})" if g is None else str(g))
        table(
            groups if costed else groups.drop(columns=["cost"]),
            hide_index=True,
            width="stretch",
            column_config={
                "group": st.column_config.TextColumn(group_by),
                "runs": count_column("runs"),
                "faithfulness": score_column("mean faithfulness"),
                "p50_latency_ms": ms_column("p50 latency ms"),
                "p95_latency_ms": ms_column("p95 latency ms"),
                "replayed": st.column_config.NumberColumn(
                    "replayed", format="percent", help="the share of model calls replayed from the response cache"
                ),
                "tokens": count_column("tokens"),
                "tokens_per_run": count_column("tokens per run"),
                "cost": st.column_config.NumberColumn("cost", format="%.4f"),
            },
            key="runs_groups",
        )

columns = {c.name: c for c in listed_columns()}
left, middle, flip, right = st.columns([1, 1, 1, 2], vertical_alignment="bottom")
page = left.number_input("Page", 1, None, 1)
sort = middle.selectbox(
    "Sort by",
    list(columns),
    format_func=lambda name: columns[name].label,
    key="runs_sort",
    help="Sorts every matching run, across pages; a heading's click sorts this page only.",
)
descending = flip.toggle("Descending", value=True, key="runs_descending")
found = find_runs(db, run_filter, int(page), PAGE_SIZE, sort, descending)
total, rows = found.total, found.rows
right.caption(
    f"{plural(total, 'run')} {'matches' if total == 1 else 'match'}; page {page} of {max(1, -(-total // PAGE_SIZE))}."
)
if not rows:
    st.info("No runs match these filters." if not total else "This page is past the last page.")
    st.stop()
frame = pd.DataFrame(rows)
judges = [f"judge {criterion}" for criterion in JUDGE_CRITERIA]
for criterion, name in zip(JUDGE_CRITERIA, judges, strict=True):
    frame[name] = frame["judge"].map(lambda j, c=criterion: j.get(c))
frame["open"] = frame["id"].map(lambda i: f"/runs?run_id={i}")
hidden = (*ON_REQUEST, "tokens" if costed else "cost")
key_columns = [name for name in columns if name not in hidden]
more = st.multiselect(
    "More columns",
    [name for name in [*columns, *judges] if name not in key_columns and name != "id"],
    key="runs_more_columns",
    help="The key columns fit a 1280 px screen; click a heading to sort this page by it.",
)
table(
    frame[["open", *columns, *judges]],
    column_order=["open", *key_columns, *more],  # the run's id as the link to its drilldown, first
    hide_index=True,
    width="stretch",
    column_config={
        "open": st.column_config.LinkColumn(
            "run", display_text=r"run_id=(\d+)", width=55, help="The run's id: open its drilldown."
        ),
        **{name: column_config(c) for name, c in columns.items()},
        **{name: score_column(name) for name in judges},
        "question": st.column_config.TextColumn(
            "question",
            width=WIDTHS["question"],
            help="Cut to fit: select a cell (or open the drilldown) for the whole question.",
        ),
    },
    key="runs_list",
)

left, right = st.columns([3, 1])
questions = dict(zip(frame["id"], frame["question"], strict=True))
chosen = left.selectbox("Open a run of this page", list(questions), format_func=lambda i: f"{i}: {questions[i][:90]}")
if right.button("Open drilldown"):
    st.query_params["run_id"] = str(chosen)
    st.rerun()
with st.expander(f"Add run {chosen} to a dataset", icon=":material/dataset:"):
    add_run_form(db, int(chosen), key="runs-add")

st.subheader("Export the filtered runs")
fmt = st.radio(
    "Format",
    ["csv", "parquet", "jsonl"],
    horizontal=True,
    help="JSONL nests each run's claims (final attempt) under 'claims'.",
)
if st.button(f"Prepare {fmt} export of {plural(total, 'run')}"):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"runs.{fmt}"
        export_runs(db, run_filter, fmt, str(path))
        st.download_button(f"Download runs.{fmt}", path.read_bytes(), file_name=f"runs.{fmt}")
