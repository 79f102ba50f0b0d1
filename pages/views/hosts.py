"""The Ollama hosts table of Settings & health: reachability, models not used, load, latency, backoff."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views.markup import escape_markdown
from pages.views.tables import table
from pipeline.models.hosts import HostStatus


def show_hosts(statuses: list[HostStatus], plan: str, why: str) -> None:
    """The hosts table and the schedule a question's calls follow now (`plan`, because of `why`)."""
    st.subheader("Model hosts")
    st.caption(
        "Each Ollama host calls are spread over (setting `ollama_hosts`, else `OLLAMA_HOST` alone): a call goes to the "
        "host with the most free slots among those serving the model at its pinned digest (the digest on the "
        "first host in the list that has it). Calls in flight, latency (median of its last 200 requests) and "
        "backoff are this app process's; a host that failed is skipped until its backoff ends."
    )
    # A dataframe renders every cell as text: host names and error messages are not Markdown here.
    table(pd.DataFrame([s.row() for s in statuses]), hide_index=True, width="stretch")
    detail = {
        "sequential": "the context grade first, then the answer from the chunks it kept",
        "overlapped": "the context grade alongside the first answer",
    }[plan]
    st.markdown(
        f"**A question's calls: {plan}** ({detail}). " + escape_markdown(f"{why[:1].upper()}{why[1:]}."),
        help="Settings answer_schedule and ollama_slots_per_host; Configuration in the docs explains both.",
    )
