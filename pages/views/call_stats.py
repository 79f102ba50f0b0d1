"""The model-call analytics table: one row per stage and a total row."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from pages.views.common import resources
from pipeline.history.call_stats import CallStats, evaluation_call_stats, run_call_stats

COLUMNS = {
    "stage": st.column_config.TextColumn("stage"),
    "calls": st.column_config.NumberColumn("calls", format="%d"),
    "cache_hits": st.column_config.NumberColumn("cache hits", format="%d"),
    "errors": st.column_config.NumberColumn("errors", format="%d"),
    "prompt_tokens": st.column_config.NumberColumn("prompt tokens", format="%d"),
    "completion_tokens": st.column_config.NumberColumn("completion tokens", format="%d"),
    "p50_ms": st.column_config.NumberColumn("p50 ms", format="%.0f"),
    "p95_ms": st.column_config.NumberColumn("p95 ms", format="%.0f"),
    "model_s": st.column_config.NumberColumn("model time s", format="%.1f"),
    "cost": st.column_config.NumberColumn("cost", format="%.4f"),
}


def show_call_stats(stats: CallStats, title: str = "Model calls by stage") -> None:
    if stats.total is None:
        return
    st.subheader(title)
    rows = [dataclasses.asdict(s) for s in [*stats.stages, stats.total]]
    frame = pd.DataFrame(rows)
    if not stats.priced:
        frame = frame.drop(columns="cost")
    st.dataframe(frame, hide_index=True, width="stretch", column_config=COLUMNS)
    st.caption(
        "Latency percentiles and model time count the calls that reached the model (cache hits excluded); "
        "tokens count every call."
        + (
            " Cost: the tokens of calls that reached the model × the price per 1k tokens set in Settings."
            if stats.priced
            else " Set price_per_1k_prompt_tokens / price_per_1k_completion_tokens for a cost estimate."
        )
    )


def show_evaluation_call_stats(eval_run_id: int) -> None:
    """The Evaluate report's table: every call made for the evaluation (items' runs and judge calls)."""
    settings, db = resources()
    show_call_stats(evaluation_call_stats(settings, db, eval_run_id))


def show_run_call_stats(run_id: int) -> None:
    settings, db = resources()
    show_call_stats(run_call_stats(settings, db, run_id))
