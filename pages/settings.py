"""Settings, changed here or read with where each value comes from, the doctor's checks, and each Ollama host's
state."""

import streamlit as st

from pages.views.common import escape_keeping_code, page_setup
from pages.views.hosts import show_hosts
from pages.views.markup import escape_markdown
from pages.views.settings_editor import show_editor
from pages.views.settings_table import show_settings
from pages.views.tables import table
from pipeline.collect.summary import traces_in
from pipeline.config import setting_sources
from pipeline.knowledge.health import health
from pipeline.knowledge.similarity_scale import scale_rows
from pipeline.models.slots import schedule
from pipeline.settings_file import waiting_for_restart

settings, db = page_setup(__file__)

st.subheader("Health")
if st.button("Check again"):
    st.cache_data.clear()
checks, hosts = health(settings, db, probe=True)  # as the sidebar: a short wait for a silent host
for check in checks:
    line = f"**{escape_markdown(check.name)}**: {escape_markdown(check.detail)}"
    if check.ok:
        st.success(line, icon=":material/check_circle:")
    else:
        st.error(line + (f"  \nFix: {escape_keeping_code(check.fix)}" if check.fix else ""), icon=":material/error:")

st.subheader("Settings")
st.caption(
    "Each value comes from its default, from workbench.toml (or the file WORKBENCH_CONFIG names), or from its "
    "environment variable, which wins over the file. A change made here is checked as a start checks it and written "
    "to the file; most apply at once, and those marked *after a restart* wait for the app to start again. Keys are "
    "hidden. Every setting, its valid values and its meaning: `docs/reference/settings.md`."
)
show_editor(settings)
for name, running, in_file in waiting_for_restart(settings):
    st.warning(
        escape_markdown(f"{name}: {in_file} in the file, {running} running until the app starts again."),
        icon=":material/restart_alt:",
    )
show_settings(setting_sources(settings))

st.subheader("Similarity scale")
st.caption(
    "How similar each embedding model finds text that has nothing to do with the knowledge base: everyday "
    "questions compared with every chunk, measured once per model (and digest) and knowledge base, again after "
    "an ingest changes it. The on-topic check and answer relevancy read similarities relative to the unrelated "
    "median; the retrieval floor abstains when the best chunk is no more similar than that quantile of unrelated "
    "pairs (`retrieval_floor`). See `docs/relevancy.md`."
)
scales = scale_rows(settings, db)
if scales:
    table(scales, hide_index=True)
else:
    st.info("No scale measured yet: it is measured on the first question, or after an ingest.")

show_hosts(hosts, *schedule(settings))

st.subheader("Traces in")
st.caption(
    "Traces another application sends with OpenTelemetry to `python -m pipeline collect` (OTLP/HTTP on "
    f"{settings.collect_host}:{settings.collect_port}); its online worker verifies each ended question-and-answer "
    "trace into a run of kind traced. See `docs/traces-in.md`."
)
received = traces_in(db)
if received is None:
    st.info("The store cannot be read now; the counts show again once it can.")
elif received.traces:
    st.markdown(escape_markdown(received.line()))
else:
    st.info("No traces received yet. Start `python -m pipeline collect` and point your exporter at it.")
