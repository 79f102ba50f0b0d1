"""The trace viewer: a run's span tree (foldable, selectable), a waterfall of its spans' starts and durations,
and a detail pane for the selected span — its attributes and its model calls with prompt and completion.

A component of its own: it takes stored spans and calls (ours or a received trace's) and a key. Untrusted text
(attributes, prompts, completions, errors) is shown as text: in tables, in code blocks, or escaped.
"""

from __future__ import annotations

from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

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
    positions = list(range(len(rows)))
    colours = ["#d62728" if r.error else "#ff7f0e" if r.span_id == selected else "#1f77b4" for r in rows]
    chart = go.Figure(
        go.Bar(
            orientation="h",
            y=positions,
            base=[r.start_ms for r in rows],
            x=[max(r.duration_ms or 0.0, 0.0) for r in rows],
            marker_color=colours,
            customdata=[[_plain(r.name), fmt_ms(r.start_ms), fmt_ms(r.duration_ms), r.calls] for r in rows],
            hovertemplate="%{customdata[0]}<br>starts at %{customdata[1]} · takes %{customdata[2]} · "
            "%{customdata[3]} calls<extra></extra>",
        )
    )
    chart.update_yaxes(
        tickvals=positions,
        ticktext=[_plain("\u00a0" * 2 * r.depth + r.name[:40]) for r in rows],  # plotly trims plain spaces
        autorange="reversed",
    )
    chart.update_xaxes(title_text="ms from the start of the trace")
    chart.update_layout(
        title_text="Waterfall", height=min(120 + ROW_PX * len(rows), 1600), margin={"t": 40, "b": 40}, showlegend=False
    )
    st.plotly_chart(chart, width="stretch", key=None)


def attribute_text(value) -> str:
    """A span attribute as text: a float to three decimals (a similarity of 0.0893, not 0.08930933810770515)."""
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _plain(text: str) -> str:
    """Text for a Plotly label, which reads a few HTML tags (links among them): its brackets as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
