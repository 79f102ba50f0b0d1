"""What a page's progress fragment shows of background jobs (pipeline.jobs): each running job, and how the jobs this
session watched ended, kept as notices until dismissed. Jobs live in the process, shared by every browser session;
what a session watched and the notices it keeps are its own (session state under the keys a page gives)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import streamlit as st

from pipeline.jobs import Job


def follow_jobs(
    all_jobs: Iterable[Job],
    watched_key: str,
    notices_key: str,
    draw_running: Callable[[Job], None],
    draw_ended: Callable[[Job], None],
    on_end: Callable[[Job], None],
) -> None:
    """Draw each running job (`draw_running`) and mark it watched. A watched job that has ended since this session
    last looked (or failed at once) becomes a notice, `on_end` is told, and the whole page reruns: what the job
    changed (a report, the sidebar's alerts) is outside the fragment. Then each notice (`draw_ended`) with Dismiss."""
    watched = st.session_state.setdefault(watched_key, set())
    notices = st.session_state.setdefault(notices_key, {})
    ended = False
    for job in all_jobs:
        if job.running:
            watched.add(job.serial)
            draw_running(job)
        elif job.serial in watched:
            watched.discard(job.serial)
            notices[job.name] = job
            on_end(job)
            ended = True
    if ended:
        st.rerun()
    for job in list(notices.values()):
        slot = st.empty()
        with slot.container():
            draw_ended(job)
            dismissed = st.button("Dismiss", key=f"dismiss-{notices_key}-{job.serial}")
        if dismissed:
            del notices[job.name]
            slot.empty()
