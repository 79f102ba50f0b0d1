"""Widgets shared by the pages: resources, health, and showing workbench errors."""
from __future__ import annotations

import streamlit as st

from pipeline.config import Settings, load_settings
from pipeline.errors import WorkbenchError
from pipeline.health import Check, check_ollama
from store.db import Database, get_database


@st.cache_resource
def resources() -> tuple[Settings, Database]:
    settings = load_settings()
    return settings, get_database(settings)


@st.cache_data(ttl=15, show_spinner=False)
def ollama_checks(host: str, _settings: Settings) -> list[Check]:
    return check_ollama(_settings)


def show_error(exc: WorkbenchError) -> None:
    st.error(f"{exc.message}" + (f"  \nFix: {exc.fix}" if exc.fix else ""), icon="🚫")


def show_failed_checks(checks: list[Check]) -> bool:
    """Show each failed check with its fix; True when everything is fine."""
    failed = [c for c in checks if not c.ok]
    for check in failed:
        st.error(f"{check.name}: {check.detail}" + (f"  \nFix: {check.fix}" if check.fix else ""), icon="🚫")
    return not failed
