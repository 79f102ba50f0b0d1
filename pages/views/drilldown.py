"""Widgets of one run's drilldown: attempts, claims with their evidence in the source, chunks, LLM calls."""
from __future__ import annotations

from datetime import timedelta

import pandas as pd
import plotly.express as px
import streamlit as st

from pages.views.answer import STATUS_TEXT
from pages.views.markup import VERDICT_ICON, annotated_markdown, escape_markdown, highlighted_chunk
from pipeline.answering.events import AnswerResult
from pipeline.history.runs import StoredRun
from pipeline.text import short_source


def show_drilldown(stored: StoredRun) -> None:
    result = stored.result
    faith = "n/a" if result.faithfulness is None else f"{result.faithfulness:.2f}"
    st.markdown(f"**Run {result.run_id}** · {escape_markdown(result.kind)} · "
                f"{STATUS_TEXT.get(result.status, escape_markdown(result.status))} · "
                f"faithfulness **{faith}** · {len(result.attempts)} attempt(s) · "
                f"{escape_markdown(str(result.generator_model))} · {(result.latency_ms or 0) / 1000:.1f} s · "
                f"{result.started_at:%Y-%m-%d %H:%M:%S}")
    st.page_link("pages/annotate.py", label="Rate this run", icon="✍️",
                  query_params={"run_id": str(result.run_id)})
    st.subheader("Question")
    st.text(result.question)
    if result.error:
        st.error(escape_markdown(result.error))
    st.subheader("Answer")
    if result.status == "abstained":
        st.markdown(escape_markdown(f"{result.answer} ({result.abstain_reason})"))
    else:
        st.markdown(annotated_markdown(result.answer or "", result.final_claims))
    show_attempts(result)
    show_claims(result)
    show_chunks(stored.retrievals)
    if stored.scores:
        st.subheader("Scores")
        st.dataframe(pd.DataFrame(stored.scores), hide_index=True, width="stretch")
    show_timeline(stored.calls)


def show_attempts(result: AnswerResult) -> None:
    st.subheader(f"Attempts ({len(result.attempts)})")
    for attempt in result.attempts:
        r = attempt.record
        faith = "n/a" if r.faithfulness is None else f"{r.faithfulness:.2f}"
        final = " · shown" if r.attempt_no == result.final_attempt else ""
        with st.expander(f"Attempt {r.attempt_no}{' (stricter prompt)' if r.strict else ''} · faithfulness "
                         f"{faith} · {r.status}{final}", expanded=r.attempt_no == result.final_attempt):
            st.markdown(annotated_markdown(r.answer or "", attempt.claims))
            if r.failed_claims:
                st.caption("Retried because these claims were not supported: " +
                           escape_markdown("; ".join(r.failed_claims)))
            if r.error:
                st.caption(escape_markdown(f"Error: {r.error}"))


def show_claims(result: AnswerResult) -> None:
    claims = result.final_claims
    if not claims:
        return
    st.subheader(f"Claims ({len(claims)})")
    for claim in claims:
        icon = VERDICT_ICON.get(claim.verdict, "")
        source = f" · [{claim.passage.n}] {short_source(claim.passage.source)}" if claim.passage else ""
        label = f"{claim.claim_no}. {claim.text} — {claim.verdict} ({claim.verifier}){source}"
        with st.expander(f"{icon} {escape_markdown(label)}"):
            st.caption(escape_markdown(claim.reason or ""))
            if claim.passage:
                st.markdown(highlighted_chunk(claim.passage.text, claim.span, claim.verdict))
            else:
                st.caption("No evidence in the sources.")


def show_chunks(retrievals: list[dict]) -> None:
    if not retrievals:
        return
    st.subheader("Retrieved chunks")
    frame = pd.DataFrame(retrievals)[["round", "query", "rank", "score", "cited", "source", "text"]]
    frame["source"] = frame["source"].map(short_source)
    st.dataframe(frame, hide_index=True, width="stretch")


def show_timeline(calls: list[dict]) -> None:
    if not calls:
        return
    st.subheader(f"LLM calls ({len(calls)})")
    frame = pd.DataFrame(calls)
    frame["finished_at"] = frame["started_at"] + frame["latency_ms"].map(lambda ms: timedelta(milliseconds=ms))
    frame["tokens"] = frame["prompt_tokens"].fillna(0) + frame["completion_tokens"].fillna(0)
    chart = px.timeline(frame, x_start="started_at", x_end="finished_at", y="stage", color="model",
                        hover_data=["prompt_tokens", "completion_tokens", "latency_ms", "cache_hit", "error"])
    chart.update_yaxes(autorange="reversed")
    st.plotly_chart(chart, width="stretch")
