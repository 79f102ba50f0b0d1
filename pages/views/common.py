"""Widgets shared by the pages: resources, the sidebar (navigation, Ollama health, open alerts), errors."""

from __future__ import annotations

import re
import time
from pathlib import Path

import streamlit as st

from pages.views.markup import escape_markdown, plural
from pages.views.navigation import PAGES, page
from pages.views.prefetch import prefetch_element_scripts
from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.models.health import UNREADABLE_FIX, Check, probe_model_servers, unreadable_entries
from pipeline.regression.alerts import below_floor_metrics, count_open_alerts
from pipeline.session import Database, open_workbench, replay_journal
from pipeline.settings_file import live_settings

# A local file: a Material icon as page_icon makes the browser fetch it from fonts.gstatic.com, and an emoji
# needs an emoji font.
FAVICON = str(Path(__file__).with_name("favicon.svg"))


@st.cache_resource
def resources() -> tuple[Settings, Database]:
    return open_workbench()


# A rerun of the same page (a widget changed) within this many seconds shows the health read at its load.
HEALTH_REUSE_S = 10.0


def sidebar_health(settings: Settings, page_file: str, state, probe=probe_model_servers, clock=time.monotonic):
    """The model servers' health for the sidebar, read afresh on every page load: a page opened (or reloaded, a new
    session) probes again, with the probe's own short timeout; only the same page's reruns soon after reuse the
    reading. A cache shared by every session once said "Ollama ready" for 15 s after Ollama stopped."""
    hosts = ", ".join(settings.model_hosts())
    kept = state.get("sidebar_health")
    if kept and kept["page"] == page_file and kept["hosts"] == hosts and clock() - kept["at"] < HEALTH_REUSE_S:
        return kept["checks"]
    checks = probe(settings)
    state["sidebar_health"] = {"page": page_file, "hosts": hosts, "at": clock(), "checks": checks}
    return checks


def page_setup(file: str, heading: bool = True) -> tuple[Settings, Database]:
    """Every page starts here, with its own `__file__`: page config, the shared sidebar, the page's heading (unless
    the page draws its own), and the settings and store. Label and heading come from its entry in PAGES."""
    this = page(file)
    st.set_page_config(page_title=f"{this.label} · RAG quality workbench", page_icon=FAVICON, layout="wide")
    settings, db = resources()
    settings = live_settings(settings)  # a setting changed in the file since the start that applies at once
    with st.sidebar:
        for listed in PAGES:
            st.page_link(listed.file, label=listed.label, icon=listed.icon)
        st.divider()
        hosts = ", ".join(settings.model_hosts())
        checks = sidebar_health(settings, this.file, st.session_state)
        failed = [c for c in checks if not c.ok]
        if failed:
            st.error(f"Ollama: {plural(len(failed), 'problem')}; see Settings & health", icon=":material/error:")
        else:
            st.success(f"Ollama ready at {escape_markdown(hosts)}", icon=":material/check_circle:")
    try:
        replay_journal(db)  # results kept while the store was busy are saved before the page reads it
        open_alerts, (below_floor, breaches) = count_open_alerts(db), below_floor_metrics(db)
    except WorkbenchError as exc:  # the store is locked by another process too long, or cannot be opened
        show_error(exc)
        st.stop()
    if db.read_only:
        st.warning(
            "**Read-only mode.** "
            + escape_markdown(
                f"The store {settings.store_path} cannot be written ({db.read_only_reason}). "
                "Runs, Trends and drilldowns can be browsed; writing is off: chat, evaluate and annotate cannot save "
                "here (a new answer is kept in the journal and saved once the store is writable again). A snapshot "
                "or a Parquet export is always read-only: to write, use the app on the store itself."
            ),
            icon=":material/lock:",
        )
    with st.sidebar:
        bad = unreadable_entries(settings.store_path)
        if bad:
            st.warning(escape_markdown(f"{bad}: {UNREADABLE_FIX}"), icon=":material/warning:")
        # short enough for the sidebar at 1280 px (a longer label was cut: "...: see Tre"); the link says where
        if open_alerts:
            st.page_link(
                "pages/trends.py",
                label=plural(open_alerts, "open regression alert"),
                icon=":material/notifications_active:",
                help="See them on the Trends page.",
            )
        else:
            st.caption("No open regression alerts.")
        if below_floor:  # floor breaches, apart: they are not regressions
            st.page_link(
                "pages/trends.py",
                label=f"{plural(below_floor, 'metric')} below floor",
                icon=":material/vertical_align_bottom:",
                help=f"{plural(breaches, 'open floor breach', 'open floor breaches')}: a run's metric below its "
                "floor (not a regression). See them on the Trends page.",
            )
        prefetch_element_scripts(st.session_state)  # the later pages' element scripts, on a session's first page
    if heading:
        st.title(this.title)
    return settings, db


def escape_keeping_code(text: str) -> str:
    """A fix as Markdown: its `code` spans stay code (shown literally by Markdown itself), the rest escaped."""
    return "".join(
        part if part.startswith("`") and part.endswith("`") and len(part) > 1 else escape_markdown(part)
        for part in re.split(r"(`[^`\n]*`)", text)
    )


def show_error(exc: WorkbenchError) -> None:
    """An expected failure with its fix; both escaped (a message may echo a path, a name or a URL's value)."""
    st.error(
        escape_markdown(exc.message) + (f"  \nFix: {escape_keeping_code(exc.fix)}" if exc.fix else ""),
        icon=":material/error:",
    )


def show_failed_checks(checks: list[Check]) -> bool:
    """Show each failed check with its fix; True when everything is fine."""
    failed = [c for c in checks if not c.ok]
    for check in failed:
        st.error(
            escape_markdown(f"{check.name}: {check.detail}")
            + (f"  \nFix: {escape_keeping_code(check.fix)}" if check.fix else ""),
            icon=":material/error:",
        )
    return not failed
