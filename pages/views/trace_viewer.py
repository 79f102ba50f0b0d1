"""The trace viewer: a run's span tree (foldable, selectable), a waterfall of its spans' starts and durations,
and a detail pane for the selected span — its attributes and its model calls with prompt and completion.

A component of its own: it takes stored spans and calls (ours or a received trace's) and a key. Untrusted text
(attributes, prompts, completions, errors) is shown as text: in tables, in code blocks, or escaped.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pandas as pd
import streamlit as st

from pages.views.charts import visible_ends
from pages.views.markup import NO_CALL_TEXT, escape_markdown, fmt_ms, fmt_score, plural
from pages.views.plotly_charts import CONFIG, draw, safe
from pages.views.tables import ms_column, table
from pipeline.evaluation.registry import get_metric, label_of
from pipeline.history.span_search import SpanQuery
from pipeline.history.trace_view import (
    SpanDocument,
    SpanRow,
    calls_below,
    calls_of,
    fold_marker,
    picker_label,
    prompt_as_text,
    shown_attributes,
    span_documents,
    trace_rows,
    unlinked_calls,
    visible_rows,
)
from pipeline.text import short_source
from pipeline.tracing import RERANKER, RETRIEVER, SPAN_KINDS

ROW_PX = 22  # a waterfall bar's height
WATERFALL_MAX_PX = 1480  # beyond ~67 spans the bars get thinner rather than the chart taller
WATERFALL_COLOURS = {"span": "#1f77b4", "selected": "#ff7f0e", "error": "#d62728"}
# The tree's columns, in px: at 1280 px the tree's three fifths of the page are about 480 px (of 818, the sidebar
# open): the step takes what the box, the duration and the calls leave.
TREE_STEP_PX, TREE_MS_PX, TREE_CALLS_PX = 340, 56, 48
ATTRIBUTE_NAME_PX, ATTRIBUTE_VALUE_PX = 120, 185  # fit the detail pane's 318 px at a 1280 px window
DOCUMENT_SHORT = 400  # characters of a document shown whole; a longer one scrolls in its box


def show_trace_viewer(spans: list, calls: list[dict], key: str, retrievals: list[dict] = ()) -> None:
    """`retrievals`: the run's retrieved chunks, each naming the span that retrieved it (a retriever span shows
    them as its documents)."""
    rows = trace_rows(spans, calls)
    if not rows:
        st.caption("No trace was recorded for this run.")
        return
    folded_key, span_key = f"{key}-folded", selected_key(key)
    folded: list[str] = st.session_state.setdefault(folded_key, [])
    by_id = {r.span_id: r for r in rows}
    numbers = {r.span_id: n for n, r in enumerate(rows, start=1)}
    st.subheader(f"Trace ({plural(len(rows), 'span')})")
    query, max_depth = span_filter(key, max(r.depth for r in rows))
    if query.asks:  # every matching span, in tree order, whatever is folded
        shown = [r for r in rows if query.matches(r.name, r.kind, r.duration_ms, r.error)]
        st.caption(f"{plural(len(shown), 'span')} of {len(rows)} match.")
    else:
        shown = visible_rows(rows, folded, max_depth)
    if st.session_state.get(span_key) not in by_id:
        st.session_state.pop(span_key, None)

    tree_column, detail_column = st.columns([3, 2])
    with tree_column:
        st.caption(
            "Select a span (the box at a row's start, a bar of the waterfall, or the list beside) to open it; "
            "▾/▸ marks a span with child spans, open or folded."
        )
        show_tree(shown, folded, key, span_key, max_depth)
        unlinked = unlinked_calls(rows, calls)
        if unlinked:
            st.caption(
                f"{unlinked} of {plural(len(calls), 'call')} link to no span of this trace; the Calls tab lists "
                "them all."
            )
    with detail_column:
        selected = st.selectbox(
            "Span",
            options=[r.span_id for r in rows],
            format_func=lambda span_id: picker_label(by_id[span_id], numbers[span_id]),
            key=span_key,
            help="Every span in tree order, indented by depth. Type part of a name to find it; arrow keys move "
            "through the spans.",
        )
        show_span_detail(by_id[selected], rows, calls, list(retrievals), folded_key, folded)
    show_waterfall(shown, selected, f"{key}-waterfall", span_key, numbers)


def selected_key(key: str) -> str:
    """The session state key of the span selected in the trace viewer of this `key`."""
    return f"{key}-span"


def span_filter(key: str, deepest: int) -> tuple[SpanQuery, int | None]:
    """The spans of this trace to list: by name, kind, duration, failure (as the Spans page asks across runs), or
    down to a depth; (the query, the deepest level shown or None). Its widgets are drawn when the filter is opened
    (a click reruns the tabs), so a Trace tab's first click does not load five kinds of widget; closed, every span
    is listed."""
    opened = st.expander("Find and filter spans", icon=":material/filter_alt:", key=f"{key}-filter", on_change="rerun")
    if not opened.open:
        return SpanQuery(), None
    with opened:
        name_col, kind_col, ms_col, error_col = st.columns([3, 2, 2, 2], vertical_alignment="bottom")
        name = name_col.text_input("Find spans", key=f"{key}-find", placeholder="part of a span's name")
        kind = kind_col.selectbox(
            "Kind", [None, *SPAN_KINDS], format_func=lambda k: "any kind" if k is None else k, key=f"{key}-kind"
        )
        slower = ms_col.number_input("At least (ms)", min_value=0, value=None, step=100, key=f"{key}-min-ms")
        errors = error_col.checkbox("Failed only", key=f"{key}-errors")
        query = SpanQuery(name=name, kind=kind, min_ms=slower, errors=errors)
        if not deepest or query.asks:
            return query, None
        levels = st.columns([1, 2])[0].select_slider(
            "Levels shown", options=list(range(1, deepest + 2)), value=deepest + 1, key=f"{key}-depth"
        )
        return query, levels - 1


def show_tree(shown: list[SpanRow], folded: list[str], key: str, span_key: str, max_depth: int | None) -> None:
    """The span tree as a table whose columns fit beside the detail pane at 1280 px: the step (indented, its fold
    marker ahead of its name), its duration and its own model calls."""
    frame = pd.DataFrame(
        {
            "step": [step_label(r, folded) for r in shown],
            "ms": [r.duration_ms for r in shown],
            "calls": [r.calls for r in shown],
        }
    )
    # the tree's key changes with what is shown, so a row picked before a fold never points at another span
    tree_key = f"{key}-tree-{hash(tuple(r.span_id for r in shown))}-{hash(tuple(folded))}-{max_depth}"
    table(
        frame,
        hide_index=True,
        width="stretch",
        height=min(36 + 35 * len(shown), 420),
        on_select=partial(_picked_in_tree, tree_key, span_key, [r.span_id for r in shown]),
        selection_mode="single-row",
        key=tree_key,
        column_config={
            "step": st.column_config.TextColumn(
                "step", width=TREE_STEP_PX, help="▾ open, ▸ folded: the span has child spans (how many)"
            ),
            "ms": ms_column("ms", help="the span's duration", width=TREE_MS_PX),
            "calls": st.column_config.NumberColumn(
                "calls", help="model calls made in this span itself", width=TREE_CALLS_PX
            ),
        },
    )


def step_label(row: SpanRow, folded: list[str]) -> str:
    """The tree's step cell: indented by depth, the fold marker before the name, a failed span marked."""
    marker = fold_marker(row, folded)
    indent = " " * row.depth + ("└ " if row.depth else "")
    return indent + (f"{marker} " if marker else "") + row.name + (" ⚠" if row.error else "")


def _picked_in_tree(tree_key: str, span_key: str, span_ids: list[str]) -> None:
    """A row picked in the tree opens its span (the list of spans follows)."""
    picked = st.session_state[tree_key]["selection"]["rows"]
    if picked and picked[0] < len(span_ids):
        st.session_state[span_key] = span_ids[picked[0]]


def _toggle_fold(folded_key: str, span_id: str) -> None:
    folded = list(st.session_state.get(folded_key, []))
    st.session_state[folded_key] = [s for s in folded if s != span_id] if span_id in folded else [*folded, span_id]


def show_span_detail(
    row: SpanRow, rows: list[SpanRow], calls: list[dict], retrievals: list[dict], folded_key: str, folded: list[str]
) -> None:
    st.markdown(f"**{escape_markdown(row.name)}**")
    facts = [row.kind, f"starts at {fmt_ms(row.start_ms)}", f"takes {fmt_ms(row.duration_ms)}"]
    if row.duration_ms is None:
        facts[2] = "did not finish"
    linked = calls_of(row.span_id, calls)
    facts.append(plural(len(linked), "model call"))
    if row.children:
        facts.append(plural(row.children, "child span"))
    st.caption(escape_markdown(" · ".join(facts)))
    if row.children:
        is_folded = row.span_id in folded
        st.button(
            "Unfold its child spans" if is_folded else "Fold its child spans",
            icon=":material/unfold_more:" if is_folded else ":material/unfold_less:",
            key=f"{folded_key}-toggle",
            on_click=_toggle_fold,
            args=(folded_key, row.span_id),
        )
    if row.error:
        st.error(escape_markdown(row.error))
    attributes = shown_attributes(row)
    if attributes:
        table(
            pd.DataFrame({"attribute": list(attributes), "value": [attribute_text(v) for v in attributes.values()]}),
            hide_index=True,
            width="stretch",
            column_config={  # the detail pane is 2/5 of 1280 px: a long value is cut in its cell, not scrolled
                "attribute": st.column_config.TextColumn("attribute", width=ATTRIBUTE_NAME_PX),
                "value": st.column_config.TextColumn(
                    "value", width=ATTRIBUTE_VALUE_PX, help="hover a cell to read it whole"
                ),
            },
        )
    show_documents(span_documents(row, retrievals), row)
    if not linked:
        below = calls_below(row, rows, calls)
        st.caption(
            "No model call was made in this span itself"
            + (f"; its child spans made {plural(below, 'call')}." if below else ".")
        )
    for n, call in enumerate(linked, start=1):
        show_call(n, call)


def show_documents(documents: list[SpanDocument], row: SpanRow) -> None:
    """A retriever span's documents: rank, score, source and the whole text (wrapped, as text)."""
    if not documents:
        if row.kind in (RETRIEVER, RERANKER) and row.attributes.get("documents"):
            st.caption("Its documents were not kept (the trace was received before documents were kept on spans).")
        return
    st.markdown(f"**Documents ({len(documents)})**")
    for document in documents:
        facts = [f"{document.rank}", f"score {fmt_score(document.score)}"]
        if document.source:
            facts.append(short_source(document.source))
        st.caption(escape_markdown(" · ".join(facts)), help=escape_markdown(document.source or "") or None)
        text = document.text
        st.code(text, language=None, wrap_lines=True, height="content" if len(text) < DOCUMENT_SHORT else 180)


def show_call(n: int, call: dict) -> None:
    tokens = f"{call.get('prompt_tokens') or 0}+{call.get('completion_tokens') or 0} tokens"
    line = [
        f"Call {n}",
        call.get("stage") or "?",
        call.get("model") or "?",
        "cache hit" if call.get("cache_hit") else tokens,
        fmt_ms(call.get("latency_ms")),
    ]
    if call.get("origin"):
        line.append(f"origin {call['origin']}")
    if call.get("error"):
        line.append("failed")
    st.markdown(escape_markdown(" · ".join(line)))
    if call.get("error"):
        st.error(escape_markdown(call["error"]))
    if call.get("prompt_text") is None and call.get("completion_text") is None:
        st.caption(NO_CALL_TEXT, help="Setting: log_call_text.")
        return
    st.caption("Prompt")
    st.code(prompt_as_text(call.get("prompt_text")), language=None, wrap_lines=True, height=200)
    st.caption("Completion")
    completion = call.get("completion_text") or ""
    st.code(completion, language=None, wrap_lines=True, height="content" if completion.count("\n") < 8 else 300)


def show_waterfall(
    rows: list[SpanRow], selected: str | None, chart_key: str, span_key: str, numbers: dict[str, int]
) -> None:
    """Each shown span as a bar from its start to its end, in tree order, the selected one highlighted; a click on
    a bar opens its span."""
    chart_key = f"{chart_key}-{hash(tuple(r.span_id for r in rows))}"  # a bar's index names one span only
    st.plotly_chart(
        waterfall_figure(rows, selected, numbers),
        width="stretch",
        key=chart_key,
        on_select=partial(_picked_in_waterfall, chart_key, span_key, [r.span_id for r in rows]),
        selection_mode="points",
        config=CONFIG,
    )


def _picked_in_waterfall(chart_key: str, span_key: str, span_ids: list[str]) -> None:
    """A bar clicked in the waterfall opens its span (the span list follows). A callback, as the tree's: the span
    list above the chart is already drawn when the chart's selection arrives."""
    points = st.session_state[chart_key]["selection"]["points"]
    index = points[0].get("point_index") if points else None
    if index is not None and 0 <= index < len(span_ids):
        st.session_state[span_key] = span_ids[index]


def waterfall_figure(
    rows: list[SpanRow], selected: str | None, numbers: dict[str, int] | None = None, title: str = "Waterfall"
):
    """The waterfall as a plotly figure: one horizontal bar per span from its start to its end (numbered as the
    span list numbers them, indented by depth, in tree order from the top), zoomable along the time axis. Names
    and attributes are the application's text: escaped, so plotly shows its tags as text."""
    import plotly.graph_objects as go  # only a drilldown's Trace tab pays for plotly

    numbers = numbers or {r.span_id: n for n, r in enumerate(rows, start=1)}
    starts = pd.Series([r.start_ms or 0.0 for r in rows], dtype=float)
    ends = visible_ends(starts, starts + [max(r.duration_ms or 0.0, 0.0) for r in rows]) if rows else starts
    labels = [waterfall_label(r, numbers[r.span_id]) for r in rows]
    states = ["error" if r.error else "selected" if r.span_id == selected else "span" for r in rows]
    hover = [
        safe(f"{r.name} ({r.kind})") + f"<br>starts at {fmt_ms(r.start_ms)}<br>takes "
        f"{fmt_ms(r.duration_ms)}<br>{plural(r.calls, 'model call')}" + ("<br>failed" if r.error else "")
        for r in rows
    ]
    figure = go.Figure(
        go.Bar(
            y=labels,
            x=list(ends - starts),
            base=list(starts),
            orientation="h",
            marker_color=[WATERFALL_COLOURS[s] for s in states],
            customdata=[r.span_id for r in rows],
            hovertext=hover,
            hoverinfo="text",
        )
    )
    height = min(ROW_PX * len(rows), WATERFALL_MAX_PX) + 80
    figure.update_layout(
        title=title,
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        xaxis_title="ms from the start of the trace",
        yaxis={"autorange": "reversed", "type": "category", "automargin": True, "fixedrange": True},
        showlegend=False,
        clickmode="event+select",
        dragmode="zoom",
    )
    return figure


def show_steps(spans: list, calls: list[dict], key: str) -> None:
    """Where the run's time went, above its tabs: the trace's first two levels (the run and its steps) as a
    waterfall. It also loads the chart scripts the Trace and Calls tabs draw with, so their first click does not."""
    rows = [replace(r, name=step_words(r.name)) for r in visible_rows(trace_rows(spans, calls), max_depth=1)]
    if len(rows) > 1:
        draw(waterfall_figure(rows, None, title="Where the time went: the run's steps"), key=f"{key}-steps")


def step_words(name: str) -> str:
    """A step in the user's words where it scores a metric of an evaluation item ('metric judge_correctness' is
    'metric judge correctness', as the reports name the metric); any other span's name as it was recorded (the
    Trace tab shows them all as recorded)."""
    metric = name.removeprefix("metric ")
    return f"metric {label_of(metric)}" if metric != name and get_metric(metric) else name


def waterfall_label(row: SpanRow, number: int) -> str:
    """A bar's name: its number in the span list, indented by depth (no-break spaces: plotly keeps them), cut to
    40 characters, escaped so that a name with tags reads as it is."""
    return f"{number}. " + "\u00a0" * 2 * row.depth + safe(row.name[:40])


def attribute_text(value) -> str:
    """A span attribute as text: a float to three decimals (a similarity of 0.0893, not 0.08930933810770515)."""
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)
