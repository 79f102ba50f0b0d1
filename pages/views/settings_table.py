"""The settings tables of Settings & health: the essential settings first, then every other setting in an
expander per group, each with its value, where it came from, its environment variable, its valid values and its
meaning and whether a change applies at once (all from the declarations in pipeline/config.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views.tables import table
from pipeline.config import GROUPS, declarations

COLUMNS = ["setting", "value", "source", "environment variable", "valid values", "applies", "meaning"]


def _table(rows: list[dict]) -> None:
    # Every row visible at once ("auto" would show ten and scroll the rest inside the table). A dataframe renders
    # every cell as text: values and docs are not Markdown here.
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["setting"] = frame["setting"].str.replace("_", " ")  # in words; the key joins them with _
    help_ = "In words; its key in the settings file joins the words with _ (embed model: embed_model)."
    config = {"setting": st.column_config.TextColumn("setting", help=help_)}
    table(frame, hide_index=True, width="stretch", height="content", column_config=config)


def _with_declaration(rows: list[dict]) -> dict[str, dict]:
    by_name = {row["setting"]: row for row in rows}
    return {
        d.name: {**by_name[d.name], "valid values": d.valid_values(), "applies": d.applies, "meaning": d.doc}
        for d in declarations()
        if d.name in by_name
    }


def show_settings(rows: list[dict]) -> None:
    """rows: setting_sources(settings), one per setting."""
    shown = _with_declaration(rows)
    essential = [shown[d.name] for d in declarations() if d.essential and d.name in shown]
    st.markdown("**Essential settings**: the few most setups change.")
    _table(essential)
    for key, title in GROUPS.items():
        others = [shown[d.name] for d in declarations(key) if not d.essential and d.name in shown]
        if not others:
            continue
        changed = sum(row["source"] != "default" for row in others)
        label = f"{title} ({len(others)} settings" + (f", {changed} not at default)" if changed else ")")
        with st.expander(label):
            _table(others)
