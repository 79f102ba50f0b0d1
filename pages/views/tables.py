"""Tables in the one format of pages/views/markup.py: every page's st.dataframe goes through `table`, which shows a
missing value as an em dash (Streamlit draws "None" otherwise), and its number columns take their format from the
column helpers below, which follow markup's formatters (fmt_score, fmt_count, fmt_ms): one column, one format."""

from __future__ import annotations

import streamlit as st

MISSING = "—"  # a missing value in a table cell


def table(data, *, where=None, **kwargs):
    """st.dataframe (or `where`.dataframe: a column, a container) with missing values as an em dash."""
    return (where or st).dataframe(data, placeholder=MISSING, **kwargs)


def score_column(label: str | None = None, **kwargs):
    """A score or metric in 0-1, or a 1-5 mean: two decimals, as fmt_score."""
    return st.column_config.NumberColumn(label, format="%.2f", **kwargs)


def delta_column(label: str | None = None, **kwargs):
    """A change of a score: two decimals with its sign."""
    return st.column_config.NumberColumn(label, format="%+.2f", **kwargs)


def count_column(label: str | None = None, **kwargs):
    """A count: a whole number with thousands separators, as fmt_count."""
    return st.column_config.NumberColumn(label, format="localized", step=1, **kwargs)


def ms_column(label: str | None = None, **kwargs):
    """A latency or duration in milliseconds (the heading says ms): a whole number."""
    return st.column_config.NumberColumn(label, format="%.0f", **kwargs)
