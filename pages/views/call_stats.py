"""The model-call analytics table: one row per stage and a total row."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from pages.views.common import resources
from pages.views.markup import stage_label
from pages.views.tables import count_column, ms_column, table
from pipeline.history.call_stats import CallStats, evaluation_call_stats, run_call_stats

COLUMNS = {
    "stage": st.column_config.TextColumn("stage", help="The prompt the calls were built from, in words."),
    "calls": count_column("calls"),
    "cache_hits": count_column("cache hits"),
    "errors": count_column("errors"),
    "prompt_tokens": count_column("prompt tokens"),
    "completion_tokens": count_column("completion tokens"),
    "p50_ms": ms_column("p50 ms"),
    "p95_ms": ms_column("p95 ms"),
    "model_s": st.column_config.NumberColumn("model time s", format="%.1f"),
    "cost": st.column_config.NumberColumn("cost", format="%.4f"),
}


def show_call_stats(stats: CallStats, title: str = "Model calls by stage") -> None:
    if stats.total is None:
        return
    st.subheader(title)
    rows = [dataclasses.asdict(s) for s in [*stats.stages, stats.total]]
    frame = pd.DataFrame(rows)
    frame["stage"] = frame["stage"].map(stage_label)
    if not stats.priced:
        frame = frame.drop(columns="cost")
    table(frame, hide_index=True, width="stretch", column_config=COLUMNS)
    st.caption(
        "Every figure is at original cost: a call replayed from the response cache (a cache hit) counts the latency "
        f"and tokens of the call that first computed its reply. Replayed: {stats.total.replayed:.0%} of the calls."
        + (
            " Cost: the tokens of every call × the price per 1k tokens set in Settings."
            if stats.priced
            else " Set the prices per 1,000 prompt and completion tokens for a cost estimate."
        ),
        help="Settings: `price_per_1k_prompt_tokens`, `price_per_1k_completion_tokens`.",
    )


def show_evaluation_call_stats(eval_run_id: int) -> None:
    """The Evaluate report's table: every call made for the evaluation (items' runs and judge calls)."""
    settings, db = resources()
    show_call_stats(evaluation_call_stats(settings, db, eval_run_id))


def show_run_call_stats(run_id: int) -> None:
    settings, db = resources()
    show_call_stats(run_call_stats(settings, db, run_id))
