"""The span search: a form that asks for spans by name, kind, duration and failure, across runs or within one, and
the spans found, each linked to its run's drilldown. Names, errors and questions are shown in table cells (text)."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from pages.views.markup import escape_markdown, fmt_count, plural
from pages.views.tables import ms_column, table
from pipeline.errors import WorkbenchError
from pipeline.history.span_search import SpanHits, SpanQuery, search_spans
from pipeline.tracing import SPAN_KINDS

# px, so that the table fits the page's 818 px at a 1280 px screen (tests/test_browser_span_search.py)
RUN_LINKS = 10
WIDTHS = {"run": 60, "span": 220, "kind": 80, "ms": 70, "error": 160, "question": 210}


def span_query_form() -> SpanQuery | None:
    """The query the form states, or None (with the error shown) when it cannot be asked."""
    name_col, kind_col = st.columns([3, 2])
    name = name_col.text_input("Span name contains", key="span-name", placeholder="retrieve, Ollama.chat, …")
    kind = kind_col.selectbox(
        "Kind", [None, *SPAN_KINDS], format_func=lambda k: "any kind" if k is None else k, key="span-kind"
    )
    least_col, most_col, run_col, error_col = st.columns([2, 2, 2, 2], vertical_alignment="bottom")
    min_ms = least_col.number_input("Took at least (ms)", min_value=0, value=None, step=100, key="span-min-ms")
    max_ms = most_col.number_input("Took at most (ms)", min_value=0, value=None, step=100, key="span-max-ms")
    run_id = run_col.number_input("Only run", min_value=1, value=None, step=1, key="span-run", help="a run's id")
    errors = error_col.checkbox("Failed spans only", key="span-errors")
    try:
        return SpanQuery(name=name, kind=kind, min_ms=min_ms, max_ms=max_ms, errors=errors, run_id=run_id)
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)))
        return None


def show_span_hits(hits: SpanHits) -> None:
    if not hits.total:
        st.info("No span matches. Loosen a condition: a shorter duration, any kind, part of a name.")
        return
    shown = "" if len(hits.spans) == hits.total else f"; the {fmt_count(len(hits.spans))} slowest shown"
    st.markdown(f"**{plural(hits.total, 'span')} in {plural(hits.runs, 'run')}**{shown}")
    frame = pd.DataFrame(hits.spans)
    frame = pd.DataFrame(
        {
            "run": [f"/runs?{urlencode(span_link(s))}" for s in hits.spans],
            "span": frame["name"],
            "kind": frame["kind"],
            "ms": frame["latency_ms"],
            "error": frame["error"],
            "question": frame["question"],
        }
    )
    table(
        frame,
        hide_index=True,
        width="stretch",
        key="span-hits",
        column_config={
            "run": st.column_config.LinkColumn(
                "run",
                display_text=r"/runs\?run_id=(\d+)",
                width=WIDTHS["run"],
                help="open the run's drilldown at this span",
            ),
            "span": st.column_config.TextColumn("span", width=WIDTHS["span"]),
            "kind": st.column_config.TextColumn("kind", width=WIDTHS["kind"]),
            "ms": ms_column("ms", help="the span's duration", width=WIDTHS["ms"]),
            "error": st.column_config.TextColumn("error", width=WIDTHS["error"]),
            "question": st.column_config.TextColumn("question", width=WIDTHS["question"]),
        },
    )
    show_run_links(hits.spans)


def span_link(span: dict) -> dict[str, str]:
    """The query of a run's drilldown opened on its Trace tab with this span selected (pages/runs.py)."""
    return {"run_id": str(span["run_id"]), "span": str(span["span_id"])}


def show_run_links(spans: list[dict]) -> None:
    """A link to each run found (the first RUN_LINKS, in the order their spans are listed), at its first span
    listed: the slowest of that run's matching spans."""
    first = {}
    for span in spans:
        first.setdefault(span["run_id"], span)
    st.caption("Open a run at its slowest matching span (its Trace tab, the span selected).")
    for span in list(first.values())[:RUN_LINKS]:
        question = span["question"] or ""
        short = question if len(question) <= 80 else question[:79] + "…"
        st.page_link(
            "pages/runs.py",
            label=escape_markdown(f"Run {span['run_id']}" + (f": {short}" if short else "")),
            icon=":material/account_tree:",
            query_params=span_link(span),
        )


def show_span_search(db) -> None:
    query = span_query_form()
    if query is None:
        return
    show_span_hits(search_spans(db, query))
