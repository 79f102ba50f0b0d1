"""The Runs page's filters: a panel whose widgets are drawn while it is open, the values kept in session state
while it is closed (and set there by a saved view), and the RunFilter they make."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, time, timedelta

import streamlit as st

from pages.views.kept import keep_widget_values
from pipeline.history.runs import RunFilter
from pipeline.history.views import SavedView

OPEN = "runs_filters_open"  # session state: whether the panel is open
FIELD_KEYS = {  # a RunFilter field -> its widget's key
    "kinds": "runs_kinds",
    "statuses": "runs_statuses",
    "models": "runs_models",
    "pipelines": "runs_pipelines",
    "tags": "runs_tags",
    "evaluations": "runs_evaluations",
    "text": "runs_text",
    "latency_min_ms": "runs_latency_min",
    "latency_max_ms": "runs_latency_max",
    "tokens_min": "runs_tokens_min",
    "tokens_max": "runs_tokens_max",
    "cost_min": "runs_cost_min",
    "cost_max": "runs_cost_max",
}
MULTI_KEYS = ("runs_kinds", "runs_statuses", "runs_models", "runs_pipelines", "runs_tags", "runs_evaluations")
DAYS, FAITHFULNESS, TEXT = "runs_days", "runs_faithfulness", "runs_text"
UNFILTERED = {  # each widget's key and the value that filters nothing
    DAYS: (),
    FAITHFULNESS: (0.0, 1.0),
    TEXT: "",
    **dict.fromkeys(MULTI_KEYS, []),
    **{key: None for key in FIELD_KEYS.values() if key not in (*MULTI_KEYS, TEXT)},
}
NAMES = {  # what the panel's title calls each filter
    DAYS: "date",
    FAITHFULNESS: "faithfulness",
    TEXT: "text",
    "runs_evaluations": "evaluation",
    "runs_statuses": "status",
    "runs_models": "model",
    "runs_kinds": "kind",
    "runs_tags": "tag",
    "runs_pipelines": "pipeline",
    "runs_latency_min": "latency",
    "runs_latency_max": "latency",
    "runs_tokens_min": "tokens",
    "runs_tokens_max": "tokens",
    "runs_cost_min": "cost",
    "runs_cost_max": "cost",
}


def apply_view(state, view: SavedView) -> None:
    """Set the filters to the saved view's (a callback: it runs before the widgets are drawn)."""
    f = view.run_filter
    for name, key in FIELD_KEYS.items():
        value = getattr(f, name)
        state[key] = list(value) if key in MULTI_KEYS else value
    state[DAYS] = (f.since.date(), (f.until - timedelta(days=1)).date()) if f.since and f.until else ()
    state[FAITHFULNESS] = (
        0.0 if f.faithfulness_min is None else f.faithfulness_min,
        1.0 if f.faithfulness_max is None else f.faithfulness_max,
    )


def keep_values(state) -> None:
    """The filters' values, kept while the panel is closed. The date range and the faithfulness range start as
    ranges (set here, not as the widgets' values: a saved view sets them too)."""
    for key in (DAYS, FAITHFULNESS):
        state.setdefault(key, UNFILTERED[key])
    keep_widget_values(state, UNFILTERED)


def values(state, costed: bool) -> dict:
    """Each filter's value by its key (a cost filter is off without prices)."""
    value = {key: none if state.get(key) is None else state[key] for key, none in UNFILTERED.items()}
    if not costed:
        value["runs_cost_min"] = value["runs_cost_max"] = None
    return value


def filtered_on(value: dict) -> list[str]:
    """The names of the filters set, each once."""
    return list(dict.fromkeys(NAMES[key] for key, none in UNFILTERED.items() if value[key] not in (none, None)))


def run_filter(value: dict, prices) -> RunFilter:
    days, (low, high) = value[DAYS], value[FAITHFULNESS]
    scored_only = (low, high) != (0.0, 1.0)
    return RunFilter(
        since=datetime.combine(days[0], time.min) if len(days) >= 1 else None,
        until=datetime.combine(days[-1], time.min) + timedelta(days=1) if len(days) >= 1 else None,
        faithfulness_min=low if scored_only else None,
        faithfulness_max=high if scored_only else None,
        prices=prices,
        **{name: value[key] for name, key in FIELD_KEYS.items()},
    )


def widgets(choices: dict, costed: bool) -> None:
    """The filters' widgets, each keeping its value in session state under its key."""
    c1, c2, c3, c4 = st.columns(4)
    c1.date_input("Date range", format="YYYY-MM-DD", key=DAYS)
    c2.multiselect(
        "Evaluation", choices["evaluations"], key="runs_evaluations", help="Runs that answered this evaluation's items."
    )
    c3.multiselect("Status", choices["statuses"], key="runs_statuses")
    c4.multiselect("Model", choices["models"], key="runs_models")
    c5, c6, c7, c8 = st.columns(4)
    c5.slider("Faithfulness", 0.0, 1.0, step=0.05, key=FAITHFULNESS)
    c6.multiselect("Kind", choices["kinds"], key="runs_kinds")
    c7.multiselect("Tag", choices["tags"], key="runs_tags")
    c8.multiselect(
        "Pipeline / service",
        choices["pipelines"],
        key="runs_pipelines",
        help="An imported run's pipeline; a traced run's service (its OpenTelemetry service.name).",
    )
    n1, n2, n3, n4, n5, n6 = st.columns(6)
    n1.number_input("Latency ≥ ms", 0.0, None, None, step=100.0, key="runs_latency_min")
    n2.number_input("Latency ≤ ms", 0.0, None, None, step=100.0, key="runs_latency_max")
    n3.number_input("Tokens ≥", 0, None, None, step=100, key="runs_tokens_min")
    n4.number_input("Tokens ≤", 0, None, None, step=100, key="runs_tokens_max")
    cost_help = None if costed else "Set the prices per 1000 tokens on the Settings page to estimate a run's cost."
    for column, label, key in ((n5, "Cost ≥", "runs_cost_min"), (n6, "Cost ≤", "runs_cost_max")):
        column.number_input(
            label, 0.0, None, None, step=0.01, format="%.4f", key=key, disabled=not costed, help=cost_help
        )
    st.text_input("Text in question or answer", key=TEXT)


def filter_panel(choices: Callable[[], dict], costed: bool, prices) -> RunFilter:
    """The panel, and the runs it lets through (choices: each multiselect's options, read when the panel opens).
    Its widgets are drawn while it is open (a click reruns the page), so a first render does not load the date
    input's, the multiselect's, the slider's and the number input's scripts for filters most visits leave alone.
    Closed, the filters set still apply, and a line names them. (Not in the panel's title: a changed title is
    another expander to Streamlit, which would close under the user's hand.)"""
    keep_values(st.session_state)
    panel = st.expander("Filters", icon=":material/filter_alt:", key=OPEN, on_change="rerun")
    if panel.open:
        with panel:
            widgets(choices(), costed)
    value = values(st.session_state, costed)
    names = filtered_on(value)
    if names and not panel.open:
        st.caption(f"Filtered on {', '.join(names)}: open Filters to change them.")
    return run_filter(value, prices)
