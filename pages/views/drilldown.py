"""Widgets of one run's drilldown, in tabs: the answer with its attempts and claims (evidence in the source), the
retrieved chunks, the trace viewer, every LLM call, the scores."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from pages.views.answer import show_abstention, show_on_topic, show_replayed
from pages.views.call_stats import show_run_call_stats
from pages.views.charts import visible_ends
from pages.views.conversation import show_turn_of_conversation
from pages.views.datasets import add_run_form
from pages.views.markup import (
    NO_CALL_TEXT,
    annotated_markdown,
    escape_markdown,
    fmt_count,
    fmt_ms,
    fmt_score,
    highlighted_chunk,
    stage_label,
    status_markdown,
)
from pages.views.navigation import DRILLDOWN_TABS
from pages.views.plotly_charts import draw, timeline
from pages.views.tables import count_column, ms_column, score_column, table
from pages.views.trace_viewer import selected_key, show_steps, show_trace_viewer
from pipeline.answering.budget import stored_budgets
from pipeline.answering.events import AnswerResult
from pipeline.answering.status import NOT_EVALUATED, made_how, status_label
from pipeline.evaluation.given import contexts_heading, origin_line
from pipeline.evaluation.registry import label_of
from pipeline.history.present import VERDICT_STYLES, invalid_line, invalid_replies, verdict_label
from pipeline.history.runs import RunColumn, StoredRun, listed_columns
from pipeline.history.trace_view import prompt_as_text
from pipeline.knowledge.injection import flag_warning, injection_flags
from pipeline.text import short_source
from pipeline.verification.claims import scored_claims
from pipeline.verification.sentence_first import claims_label
from pipeline.vocabulary import Status

DRILLDOWN_TAB = "drilldown_tab"
CHUNK_ROW_PX = 60  # a retrieved chunk's row shows a few lines of its text
TIMELINE_HOVER = [  # what a bar of the calls' timeline shows on hover
    ("stage", "stage"),
    ("model", "model"),
    ("tokens", "prompt + completion tokens"),
    ("latency", "latency"),
    ("error", "error"),
]


def open_span(run_id: int, span_id: str | None) -> None:
    """A link to a span (?run_id=&span=, from the Spans page): the drilldown opens on its Trace tab with the span
    selected. The link's span is then dropped from the address, so later reruns keep the user's own choice."""
    if span_id:
        st.session_state[DRILLDOWN_TAB] = "Trace"
        st.session_state[selected_key(trace_key(run_id))] = span_id


def trace_key(run_id: int) -> str:
    """The key of a run's trace viewer (its selected span, folds and filter are kept under it)."""
    return f"trace-{run_id}"


def show_drilldown(stored: StoredRun, db=None) -> None:
    """The run's drilldown; with the store (`db`), also the form that adds the run to a dataset."""
    result = stored.result
    columns = [c for c in listed_columns() if hasattr(result, c.name)]  # the run's own fields, as on the list
    cells = [header_cell(c, result) for c in columns if not c.wide and not unset_pipeline(c, result)]
    st.markdown(" · ".join([f"**Run {result.run_id}**", *cells]))
    show_replayed(result)
    origin = origin_line(result.kind, result.pipeline)
    if origin and result.trace_convention:
        origin += f" Its spans were read as {result.trace_convention.replace('+', ' + ')}."
    if origin:
        st.info(escape_markdown(origin), icon=":material/input:")
    st.page_link(
        "pages/annotate.py",
        label="Rate this run",
        icon=":material/rate_review:",
        query_params={"run_id": str(result.run_id)},
    )
    for evaluation in dict.fromkeys(s["evaluation"] for s in stored.scores if s["evaluation"]):
        st.page_link(
            "pages/evaluate.py",
            label=escape_markdown(f"Evaluation {evaluation}"),
            icon=":material/science:",
            query_params={"eval": evaluation},
        )
    if db is not None:
        show_turn_of_conversation(db, result, stored.spans)
    if db is not None and result.question:
        # drawn when opened (an open click reruns the page): its widgets are not mounted on every drilldown
        adding = st.expander(
            "Add this run to a dataset",
            icon=":material/dataset:",
            key=f"drilldown-adding-{result.run_id}",
            on_change="rerun",
        )
        if adding.open:
            with adding:
                add_run_form(db, result.run_id, key=f"drilldown-add-{result.run_id}")
    for column in (c for c in columns if c.wide):  # long text, each under its heading: the question, ...
        st.subheader(column.label.capitalize())
        st.text(column.show(getattr(result, column.name)))
    if result.error:
        st.error(escape_markdown(result.error))
    show_steps(stored.spans, stored.calls, key=f"run-{result.run_id}")
    drilldown_tabs(stored)


# A fragment: a tab's click (or a widget inside a tab) reruns the tabs alone, not the page's sidebar, header and
# store reads. Only the chosen tab is drawn: the five drawn together, with their tables, code blocks and charts,
# took a new browser tab about 2 s on two cores, the first alone about 1 s.
@st.fragment
def drilldown_tabs(stored: StoredRun) -> None:
    result = stored.result
    answer_tab, retrieval_tab, trace_tab, calls_tab, scores_tab = st.tabs(
        list(DRILLDOWN_TABS), key=DRILLDOWN_TAB, on_change="rerun"
    )
    if answer_tab.open:
        with answer_tab:
            show_answer(stored)
    if retrieval_tab.open:
        with retrieval_tab:
            if stored.retrievals:
                show_chunks(stored.retrievals, contexts_heading(result.kind))
                show_context_budget(stored.spans)
            else:
                st.caption("Nothing was retrieved for this run.")
    if trace_tab.open:
        with trace_tab:
            show_trace_viewer(stored.spans, stored.calls, key=trace_key(result.run_id), retrievals=stored.retrievals)
    if calls_tab.open:
        with calls_tab:
            show_run_call_stats(result.run_id)
            show_calls(stored.calls, key=f"call-{result.run_id}")
            show_timeline(stored.calls, key=f"calls-timeline-{result.run_id}")
            if not stored.calls:
                st.caption("No model calls were recorded for this run.")
    if scores_tab.open:
        with scores_tab:
            if stored.scores:
                st.subheader("Scores")
                table(
                    scores_frame(stored.scores),
                    hide_index=True,
                    width="stretch",
                    column_config={
                        "value": score_column("value"),
                        "scorer_model": "scorer",
                        "prompt_version": "prompt",
                    },
                )
            else:
                st.caption("No scores yet: a run is scored when an evaluation judges it.")


def show_answer(stored: StoredRun) -> None:
    result = stored.result
    if result.status == NOT_EVALUATED:
        st.info(escape_markdown(f"Not evaluated: {result.abstain_reason}"), icon=":material/info:")
    st.subheader("Answer")
    if result.status == Status.ABSTAINED:
        show_abstention(result)
    else:
        st.markdown(annotated_markdown(result.answer or "", result.final_claims))
        show_on_topic(result.final_record)
    warning = flag_warning(result.final_claims)
    if warning:
        st.warning(escape_markdown(warning[0].upper() + warning[1:] + "."), icon=":material/flag:")
    invalid = invalid_line(invalid_replies(result, stored.grades, stored.scores))
    if invalid:
        st.caption(escape_markdown(invalid))
    show_attempts(result)
    show_claims(result)


# Columns a run has only sometimes: left out of the header when unset rather than shown as n/a (the pipeline of a
# run this workbench answered; the conversation and turn of a single question).
SOMETIMES = ("pipeline", "conversation_id", "turn_no")


def unset_pipeline(column: RunColumn, result: AnswerResult) -> bool:
    """A column the run has only sometimes (SOMETIMES), unset for this run: left out of the header."""
    return column.name in SOMETIMES and getattr(result, column.name) is None


def header_cell(column: RunColumn, result: AnswerResult) -> str:
    value = getattr(result, column.name)
    if column.name == "status":
        return status_markdown(status_label(value), value)
    return f"{escape_markdown(column.label)} **{escape_markdown(column.show(value))}**"


def show_attempts(result: AnswerResult) -> None:
    st.subheader(f"Attempts ({len(result.attempts)})")
    for attempt in result.attempts:
        r = attempt.record
        faith = fmt_score(r.faithfulness)
        final = " · shown" if r.attempt_no == result.final_attempt else ""
        with st.expander(
            f"Attempt {r.attempt_no}{f' ({made_how(r)})' if made_how(r) else ''} · faithfulness "
            f"{faith} ({claims_label(result.config)}) · {status_markdown(status_label(r.status), r.status)}{final}",
            expanded=r.attempt_no == result.final_attempt,
        ):
            st.markdown(annotated_markdown(r.answer or "", attempt.claims))
            if r.dropped:
                st.caption("Dropped, as no source supports them: " + escape_markdown(" ".join(r.dropped)))
            if r.failed_claims:
                st.caption(
                    "Repaired because these claims were not supported: " + escape_markdown("; ".join(r.failed_claims))
                )
            show_on_topic(r, emphasise=False)
            if r.error:
                st.caption(escape_markdown(f"Error: {r.error}"))


def show_claims(result: AnswerResult) -> None:
    claims = result.final_claims
    if not claims:
        return
    st.subheader(f"Claims ({len(claims)})")
    errors = len(claims) - len(scored_claims(claims))
    if errors:
        st.caption(
            f"{errors} of {len(claims)} extraction errors: claims the extractor did not take from the answer (a "
            "copy of the question or of its prompt's example, text from elsewhere, a repeat); kept here with the "
            "reason, not counted in faithfulness."
        )
    for claim in claims:
        source = f" · [{claim.passage.n}] {short_source(claim.passage.source)}" if claim.passage else ""
        label = f"Claim {claim.claim_no}: {claim.text} — {verdict_label(claim.verdict)} ({claim.verifier}){source}"
        with st.expander(escape_markdown(label), icon=getattr(VERDICT_STYLES.get(claim.verdict), "icon", None)):
            st.caption(escape_markdown(claim.reason or ""))
            if claim.passage:
                st.markdown(highlighted_chunk(claim.passage.text, claim.span, claim.verdict))
            else:
                st.caption("No evidence in the sources.")


def show_context_budget(spans) -> None:
    """What the generator read of the retrieved chunks, each round (the context budget, issue 30)."""
    for summary, rows in stored_budgets(spans):
        st.markdown(f"**{escape_markdown(summary)}**")
        table(pd.DataFrame(rows), hide_index=True, width="stretch")


def show_chunks(retrievals: list[dict], heading: str = "Retrieved chunks") -> None:
    """Each round's chunks under the query it asked (said once, not on every row), with their text."""
    if not retrievals:
        return
    st.subheader(heading)
    frame = pd.DataFrame(retrievals)
    for (round_no, query), chunks in frame.groupby(["round", "query"], sort=False):
        st.markdown(f"**Round {round_no}** · {escape_markdown(str(query))}")
        shown = chunks[["rank", "score", "cited", "source", "text"]].copy()
        shown["source"] = shown["source"].map(short_source)
        shown.insert(4, "injection flags", shown["text"].map(lambda text: ", ".join(injection_flags(text or ""))))
        table(
            shown,
            hide_index=True,
            width="stretch",
            row_height=CHUNK_ROW_PX,
            column_config={
                "rank": st.column_config.NumberColumn("rank", width=48),
                "score": score_column("score", width=56),
                "cited": st.column_config.CheckboxColumn("cited", width=48),
                "source": st.column_config.TextColumn("source", width=120),
                "injection flags": st.column_config.TextColumn("injection flags", width=110),
                "text": st.column_config.TextColumn("text", width="large", help="open a cell to read the whole chunk"),
            },
        )


def show_calls(calls: list[dict], key: str) -> None:
    """Every call, cached ones included, each openable to the prompt it sent and the completion it got (drawn
    when opened: an open click reruns the tabs)."""
    if not calls:
        return
    cached = sum(bool(c["cache_hit"]) for c in calls)
    st.subheader(f"LLM calls ({len(calls)}, {cached} replayed from the cache)")
    frame = pd.DataFrame(calls)[
        ["stage", "model", "origin", "cache_hit", "prompt_tokens", "completion_tokens", "latency_ms", "error"]
    ]
    frame.insert(0, "#", range(1, len(calls) + 1))
    frame["stage"] = frame["stage"].map(stage_label)
    table(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "cache_hit": "cache hit",
            "prompt_tokens": count_column("prompt tokens"),
            "completion_tokens": count_column("completion tokens"),
            "latency_ms": ms_column("latency ms", help="a replayed call's: the latency first measured"),
        },
    )
    st.caption("Open a call to read its prompt and completion.")
    for n, call in enumerate(calls, start=1):
        tokens = f"{call['prompt_tokens'] or 0}+{call['completion_tokens'] or 0} tokens"
        label = (
            f"{n}. {stage_label(call['stage'])} · {call['model']} · {tokens} · {fmt_ms(call['latency_ms'] or 0)}"
            + (f" · {call_replay(call)}" if call["cache_hit"] else "")
            + (" · failed" if call["error"] else "")
        )
        opened = st.expander(escape_markdown(label), key=f"{key}-{n}", on_change="rerun")
        if not opened.open:
            continue
        with opened:
            if call["error"]:
                st.error(escape_markdown(call["error"]))
            if call.get("prompt_text") is None and call.get("completion_text") is None:
                st.caption(NO_CALL_TEXT, help="Setting: log_call_text.")
                continue
            st.caption("Prompt")
            st.code(prompt_as_text(call.get("prompt_text")), language=None, wrap_lines=True)
            st.caption("Completion")
            st.code(call.get("completion_text") or "", language=None, wrap_lines=True)


def scores_frame(scores: list[dict]) -> pd.DataFrame:
    """The Scores tab's table: a score whose every model call was replayed says so, and when it was first computed."""
    frame = pd.DataFrame(scores).drop(columns=["replayed", "first_computed_at"])
    frame["metric"] = frame["metric"].map(label_of)  # in words, as every page names a metric
    if "status" in frame:  # a score's status in words: not applicable, not the stored not_applicable
        frame["status"] = frame["status"].map(lambda s: s.replace("_", " ") if isinstance(s, str) else s)
    frame["replay"] = [call_replay(s) if s["replayed"] else "" for s in scores]
    return frame


def call_replay(call: dict) -> str:
    """How a replayed call, or a score made only by replayed calls, is labelled: when its reply was first computed
    (unknown for a hit stored before)."""
    when = call.get("first_computed_at")
    return (
        f"replayed from the cache (first computed at {when:%Y-%m-%d %H:%M:%S})" if when else "replayed from the cache"
    )


def show_timeline(calls: list[dict], key: str) -> None:
    calls = [c for c in calls if not c["cache_hit"]]
    if not calls:
        return
    frame = pd.DataFrame(calls)
    frame["stage"] = frame["stage"].map(stage_label)
    frame["finished_at"] = frame["started_at"] + frame["latency_ms"].map(lambda ms: timedelta(milliseconds=ms))
    frame["finished_at"] = visible_ends(frame["started_at"], frame["finished_at"])
    frame["tokens"] = [
        f"{fmt_count(c.get('prompt_tokens') or 0)} + {fmt_count(c.get('completion_tokens') or 0)}" for c in calls
    ]
    frame["latency"] = [fmt_ms(c["latency_ms"] or 0) for c in calls]
    frame["error"] = frame["error"].fillna("")
    stages = list(dict.fromkeys(frame["stage"]))  # in the order the run reached them, the first at the top
    figure = timeline(
        frame,
        "started_at",
        "finished_at",
        "stage",
        "model",
        stages,
        TIMELINE_HOVER,
        "Timeline of the calls that reached the model",
    )
    draw(figure, key=key)
