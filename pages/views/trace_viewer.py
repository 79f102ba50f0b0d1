"""The trace viewer: a run's span tree (foldable, selectable), a waterfall of its spans' starts and durations,
and a detail pane for the selected span — its attributes and its model calls with prompt and completion.

A component of its own: it takes stored spans and calls (ours or a received trace's) and a key. Untrusted text
(attributes, prompts, completions, errors) is shown as text: in tables, in code blocks, or escaped.
"""

from __future__ import annotations

from functools import partial

import altair as alt
import pandas as pd
import streamlit as st

from pages.views.charts import visible_ends
from pages.views.markup import NO_CALL_TEXT, escape_markdown, fmt_ms, plural
from pages.views.tables import ms_column, table
from pipeline.history.trace_view import (
    SpanRow,
    calls_of,
    fold_marker,
    prompt_as_text,
    trace_rows,
    tree_label,
    unlinked_calls,
    visible_rows,
)

ROW_PX = 20  # a waterfall bar's height
WATERFALL_MAX_PX = 1480  # beyond ~74 spans the bars get thinner rather than the chart taller
WATERFALL_COLOURS = {"span": "#1f77b4", "selected": "#ff7f0e", "error": "#d62728"}


def show_trace_viewer(spans: list, calls: list[dict], key: str) -> None:
    rows = trace_rows(spans, calls)
    if not rows:
        st.caption("No trace was recorded for this run.")
        return
    folded_key, span_key, depth_key = f"{key}-folded", f"{key}-span", f"{key}-depth"
    folded: list[str] = st.session_state.setdefault(folded_key, [])
    by_id = {r.span_id: r for r in rows}
    st.subheader(f"Trace ({plural(len(rows), 'span')})")
    deepest = max(r.depth for r in rows)
    max_depth = None
    if deepest:
        levels = st.columns([1, 2])[0].select_slider(
            "Levels shown", options=list(range(1, deepest + 2)), value=deepest + 1, key=depth_key
        )
        max_depth = levels - 1
    shown = visible_rows(rows, folded, max_depth)
    if st.session_state.get(span_key) not in by_id:
        st.session_state.pop(span_key, None)

    tree_column, detail_column = st.columns([1, 1])
    with tree_column:
        st.caption(
            "Select a span (the box at a row's start, or the list below) to open it; ▾/▸ marks a span with child "
            "spans, open or folded."
        )
        frame = pd.DataFrame(
            {
                "step": [tree_label(r) for r in shown],
                "sub": [fold_marker(r, folded) for r in shown],
                "start ms": [r.start_ms for r in shown],
                "ms": [r.duration_ms for r in shown],
                "calls": [r.calls for r in shown],
                "error": [r.error for r in shown],
            }
        )
        # the tree's key changes with what is shown, so a row picked before a fold never points at another span
        tree_key = f"{key}-tree-{len(shown)}-{hash(tuple(folded))}-{max_depth}"
        table(
            frame,
            hide_index=True,
            width="stretch",
            height=min(36 + 35 * len(shown), 420),
            on_select=partial(_picked_in_tree, tree_key, span_key, [r.span_id for r in shown]),
            selection_mode="single-row",
            key=tree_key,
            column_config={
                "step": st.column_config.TextColumn("step", width="medium"),
                "sub": st.column_config.TextColumn("sub", help="child spans: ▾ open, ▸ folded", width="small"),
                "start ms": ms_column("start ms", help="from the start of the trace"),
                "ms": ms_column("ms", help="the span's duration"),
                "calls": st.column_config.NumberColumn(help="model calls made in this span itself"),
            },
        )
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
            format_func=lambda span_id: f"{rows.index(by_id[span_id]) + 1}. {by_id[span_id].name}",
            key=span_key,
            help="Type to search; arrow keys move through the spans.",
        )
        show_span_detail(by_id[selected], calls, folded_key, folded)
    show_waterfall(shown, selected)


def _picked_in_tree(tree_key: str, span_key: str, span_ids: list[str]) -> None:
    """A row picked in the tree opens its span (the list of spans follows)."""
    picked = st.session_state[tree_key]["selection"]["rows"]
    if picked and picked[0] < len(span_ids):
        st.session_state[span_key] = span_ids[picked[0]]


def _toggle_fold(folded_key: str, span_id: str) -> None:
    folded = list(st.session_state.get(folded_key, []))
    st.session_state[folded_key] = [s for s in folded if s != span_id] if span_id in folded else [*folded, span_id]


def show_span_detail(row: SpanRow, calls: list[dict], folded_key: str, folded: list[str]) -> None:
    st.markdown(f"**{escape_markdown(row.name)}**")
    facts = [f"starts at {fmt_ms(row.start_ms)}", f"takes {fmt_ms(row.duration_ms)}"]
    if row.duration_ms is None:
        facts[1] = "did not finish"
    linked = calls_of(row.span_id, calls)
    facts.append(plural(len(linked), "model call"))
    if row.children:
        facts.append(plural(row.children, "child span"))
    st.caption(" · ".join(facts))
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
    if row.attributes:
        table(
            pd.DataFrame(
                {
                    "attribute": list(row.attributes),
                    "value": [attribute_text(v) for v in row.attributes.values()],
                }
            ),
            hide_index=True,
            width="stretch",
        )
    if not linked:
        st.caption(
            "No model call was made in this span itself" + ("; its child spans may have some." if row.children else ".")
        )
    for n, call in enumerate(linked, start=1):
        show_call(n, call)


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


def show_waterfall(rows: list[SpanRow], selected: str | None) -> None:
    """Each shown span as a bar from its start to its end, in tree order, the selected one highlighted."""
    st.altair_chart(waterfall_chart(rows, selected), width="stretch")


def waterfall_chart(rows: list[SpanRow], selected: str | None) -> alt.Chart:
    """The waterfall as Vega-Lite: a row per span (numbered, so that two spans of one name keep a row each, and
    indented by depth), zoomable along the time axis; names are data, drawn as text."""
    starts = pd.Series([r.start_ms or 0.0 for r in rows])
    ends = starts + [max(r.duration_ms or 0.0, 0.0) for r in rows]
    frame = pd.DataFrame(
        {
            "row": [f"{n}. " + "\u00a0" * 2 * r.depth + r.name[:40] for n, r in enumerate(rows, start=1)],
            "span": [r.name for r in rows],
            "start_ms": starts,
            "end_ms": visible_ends(starts, ends),
            "starts": [fmt_ms(r.start_ms) for r in rows],
            "takes": [fmt_ms(r.duration_ms) for r in rows],
            "calls": [r.calls for r in rows],
            "state": ["error" if r.error else "selected" if r.span_id == selected else "span" for r in rows],
        }
    )
    return (
        alt.Chart(frame, title="Waterfall")
        .mark_bar()
        .encode(
            x=alt.X("start_ms:Q", title="ms from the start of the trace"),
            x2="end_ms:Q",
            y=alt.Y("row:N", sort=None, title=None, axis=alt.Axis(labelLimit=320, labelOverlap=False)),
            color=alt.Color(
                "state:N", scale=alt.Scale(domain=list(WATERFALL_COLOURS), range=list(WATERFALL_COLOURS.values()))
            ),
            tooltip=[
                alt.Tooltip("span:N"),
                alt.Tooltip("starts:N", title="starts at"),
                alt.Tooltip("takes:N"),
                alt.Tooltip("calls:Q"),
            ],
        )
        .properties(height=min(ROW_PX * len(rows), WATERFALL_MAX_PX))
        .interactive(bind_y=False)
    )


def attribute_text(value) -> str:
    """A span attribute as text: a float to three decimals (a similarity of 0.0893, not 0.08930933810770515)."""
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)
