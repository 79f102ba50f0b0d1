"""Tables in the one format of pages/views/markup.py: every page's st.dataframe goes through `table`, which shows a
missing value as an em dash (Streamlit draws "None" otherwise), and its number columns take their format from the
column helpers below, which follow markup's formatters (fmt_score, fmt_count, fmt_ms): one column, one format.
A column stored under an internal name (`item_id`, `context_precision`) is headed in words, the internal name in
its tooltip."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pipeline.evaluation.registry import label_of

MISSING = "—"  # a missing value in a table cell

# Internal column names whose words are not simply the name's words.
COLUMN_LABELS = {
    "item_id": "item",
    "run_id": "run",
    "eval_run_id": "evaluation",
    "item_status": "item status",
    "run_status": "status",
    "not_applicable": "not applicable",
}


def column_label(name: str) -> str:
    """An internal column name in words: a metric by its label, 'item_id' as 'item', else its words."""
    return COLUMN_LABELS.get(name) or label_of(name)


def worded(columns, column_config: dict | None) -> dict:
    """column_config with every snake_case column headed in words (unless the page labelled it), and its internal
    name as the tooltip (unless the page wrote one)."""
    config = dict(column_config or {})
    for name in columns:
        if not isinstance(name, str) or "_" not in name or name.startswith("_"):
            continue
        given = config.get(name, {})
        if given is None or isinstance(given, str):  # hidden, or labelled by the page
            continue
        given = dict(given)
        given.setdefault("label", None)
        given["label"] = given["label"] or column_label(name)
        given["help"] = given.get("help") or f"Stored as {name}."
        config[name] = given
    return config


# The main column's width at 1280 px with the sidebar open: a full-width grid measured 818 px inside its border.
MAIN_PX = 800
HALF_PX = 390  # a table in one of two columns side by side
CHAR_PX = 7.5  # the grid's font, a character on average
PAD_PX = 20  # a cell's padding, both sides
MIN_PX = 56


def _shown(value) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:,.2f}"
    return str(value)


def natural_px(label: str, values) -> float:
    """About how wide the grid draws a column to fit its header and its (first 500) cells."""
    longest = max([len(label), *(len(_shown(v)) for v in list(values)[:500])])
    return PAD_PX + CHAR_PX * longest


NAMED_WIDTHS = {"small": 75, "medium": 200, "large": 400}  # Streamlit's named column widths, in px


def _given(config: dict, column) -> dict:
    """A column's configuration as a dict (a page may give a label alone, or nothing)."""
    given = config.get(column)
    return {"label": given} if isinstance(given, str) else dict(given or {})


def fitted(frame, config: dict, fit_px: int, with_index: bool) -> dict:
    """config with a width for every column when, at their natural widths, the columns would not fit in fit_px:
    the narrow ones keep theirs, the widest share what is left (their text cut short in the cell, whole on hover),
    so the grid never scrolls sideways at 1280 px. Unchanged when they fit."""
    shown = [c for c in frame.columns if config.get(c, {}) is not None]
    # a width in px that the page set is kept; a named one ("large") is a wish, fitted with the rest
    set_px = {c: w for c in shown if isinstance(w := _given(config, c).get("width"), int)}
    names = [c for c in shown if c not in set_px]
    natural = {
        c: NAMED_WIDTHS.get(_given(config, c).get("width"))
        or max(MIN_PX, natural_px(str(_given(config, c).get("label") or c), frame[c]))
        for c in names
    }
    budget = fit_px - sum(set_px.values())
    budget -= natural_px(str(frame.index.name or ""), frame.index) if with_index else 0
    if sum(natural.values()) <= budget or not names:
        return config
    cap, left = budget / len(names), list(names)
    while True:  # the widest columns share what the narrower ones leave
        narrow = [c for c in left if natural[c] <= cap]
        if not narrow:
            break
        budget -= sum(natural[c] for c in narrow)
        left = [c for c in left if c not in narrow]
        if not left:
            break
        cap = budget / len(left)
    out = dict(config)
    for c in names:
        given = _given(config, c)
        given["width"] = int(natural[c] if c not in left else max(MIN_PX, cap))
        out[c] = given
    return out


ID_LIKE = ("id", "#", "ordinal", "attempt", "turn", "version", "no", "number", "year")


def counted(frame, config: dict) -> dict:
    """config with every whole-number column the page left unconfigured shown as a count (thousands separators,
    as fmt_count: 21,404 on every page), an identifier or an ordinal number (run 21404, claim 3) excepted."""
    out = dict(config)
    for name in frame.columns:
        words = str(name).lower().replace("_", " ").split()
        if name in out or not words or words[-1] in ID_LIKE or not pd.api.types.is_integer_dtype(frame[name]):
            continue
        out[name] = count_column()
    return out


def table(data, *, where=None, column_config: dict | None = None, fit_px: int = MAIN_PX, **kwargs):
    """st.dataframe (or `where`.dataframe: a column, a container) with missing values as an em dash, internal
    column names in words, and columns that fit `fit_px` (the main column at 1280 px; less for a table in a column)."""
    frame = getattr(data, "data", data)  # a Styler's frame
    config = dict(column_config or {})
    if hasattr(frame, "columns"):
        config = worded(list(frame.columns), counted(frame, config))
        config = fitted(frame, config, fit_px, not kwargs.get("hide_index"))
    return (where or st).dataframe(data, placeholder=MISSING, column_config=config, **kwargs)


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
