"""Widgets that show one answer: the annotated text, the claims, the sources and the attempts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.views.common import escape_keeping_code
from pages.views.markup import annotated_markdown, escape_markdown, fmt_score, plural, status_markdown
from pipeline.answering import on_topic
from pipeline.answering.events import (
    Abstained,
    AnswerResult,
    Budgeted,
    ClaimsUnextracted,
    Decided,
    Discarded,
    Event,
    Finished,
    Generated,
    Graded,
    OnTopicChecked,
    Planned,
    Retrieved,
    Retrying,
    Rewritten,
    RunFailed,
    Scored,
    SentenceChecked,
    StandaloneQuestion,
    Token,
    Trimmed,
    UnhandledEvent,
    VerdictSettled,
)
from pipeline.answering.status import made_how, status_label, withheld_because
from pipeline.history.present import placement, verdict_label
from pipeline.knowledge.injection import flag_warning
from pipeline.models.replay import replay_note
from pipeline.text import short_source
from pipeline.verification.claims import Verdict, scored_claims
from pipeline.verification.sentence_first import claims_label
from pipeline.vocabulary import Status


def unsupported_banner(answer: str, claims) -> str | None:
    """How many of the scored claims are not supported, and where they are: marked in the answer or listed as not
    placed; None when all are supported. Extraction errors are not the answer's claims: never counted here."""
    scored = scored_claims(claims)
    bad = [c for c in scored if c.verdict != Verdict.SUPPORTED]
    if not bad:
        return None
    unplaced = {c.claim_no for c in placement(answer, claims).unplaced_problems}
    marked = len(bad) - len(unplaced)
    where = []
    if marked:
        where.append(f"{marked} marked in the answer")
    if unplaced:
        where.append(f"{len(unplaced)} listed below it as not placed")
    verb = "is" if len(bad) == 1 else "are"
    return f"{len(bad)} of {plural(len(scored), 'claim')} {verb} not supported by the sources: {' and '.join(where)}."


def extraction_error_note(claims) -> str | None:
    """What the claim extractor got wrong, said as such: those claims are not the answer's, so they are neither
    supported nor unsupported and the score leaves them out; None when there are none."""
    errors = len(claims) - len(scored_claims(claims))
    if not errors:
        return None
    which = "was an extraction error" if errors == 1 else "were extraction errors"
    return (
        f"{plural(errors, 'extracted claim')} of {len(claims)} {which}: the extractor got them wrong, so they are "
        "not the answer's claims and are left out of its score (see Claims)."
    )


def step_line(event: Event) -> str:
    return escape_markdown(event.message)


def show_step(steps, event: Event) -> None:
    """The event's line in the steps box, which shows the latest as its label."""
    steps.write(step_line(event))
    steps.update(label=step_line(event), expanded=True)


class LiveAnswer:
    """The attempt being written, as its events come in: its text so far and the claims of its finished
    sentences (each on the sentence it came from), or a note that the context grade withdrew it."""

    def __init__(self):
        self.attempt: int | None = None
        self.text = ""
        self.claims: list = []
        self.withdrawn = False
        self.trimmed_from: int | None = None  # the shown attempt trims this one (no model call)

    def take(self, event: Event) -> bool:
        """Update from one event; True when what is shown changed (the other events leave it as it is)."""
        match event:
            case Token(attempt=attempt, delta=delta):
                if attempt != self.attempt:
                    self.attempt, self.text, self.claims, self.withdrawn = attempt, "", [], False
                    self.trimmed_from = None
                self.text += delta
                return True
            case SentenceChecked(attempt=attempt, claims=claims) if attempt == self.attempt:
                self.claims += claims
                return True
            case VerdictSettled(attempt=attempt) if attempt == self.attempt:  # the claim object itself was updated
                return True
            case Discarded(attempt=attempt) if attempt == self.attempt:
                self.withdrawn = True
                return True
            case Trimmed():  # the attempt without its unsupported sentences, whole at once
                self.attempt, self.text, self.claims, self.withdrawn = event.attempt, event.answer, event.claims, False
                self.trimmed_from = event.from_attempt
                return True
        return False

    def markdown(self) -> str:
        """Escaped markdown: each finished sentence coloured by its verdicts, the rest as plain text."""
        if self.withdrawn:
            return ":gray[*The retrieved passages do not answer the question: the answer being written was withdrawn.*]"
        if self.trimmed_from is not None:
            head = f":gray[Attempt {self.attempt}, attempt {self.trimmed_from} without its unsupported sentences:]  \n"
        else:
            head = f":gray[Attempt {self.attempt}, with the stricter prompt:]  \n" if (self.attempt or 1) > 1 else ""
        return head + annotated_markdown(self.text, self.claims)


def follow_live(events, steps) -> AnswerResult | None:
    """Show a run as it goes: every step in the `steps` status box (open while it runs, closed at the end),
    the answer's text below it as it streams, sentences coloured as their verdicts arrive. The live text
    gives way to the final answer (or the abstention) when the run ends."""
    live, shown, result = LiveAnswer(), st.empty(), None
    for event in events:
        match event:
            case Finished():
                result = event.result
            case Token():
                live.take(event)
                shown.markdown(live.markdown())
            case SentenceChecked() | VerdictSettled() | Discarded() | Trimmed():  # the answer being written changes
                if live.take(event):
                    shown.markdown(live.markdown())
                show_step(steps, event)
            case (
                StandaloneQuestion()
                | Retrieved()
                | Planned()
                | Graded()
                | Budgeted()
                | Generated()
                | ClaimsUnextracted()
                | Scored()
                | OnTopicChecked()
                | Retrying()
                | Rewritten()
                | Decided()
                | Abstained()
                | RunFailed()
            ):
                show_step(steps, event)
            case _:
                raise UnhandledEvent(event, "the Chat page")
    failed = result is None or result.status == Status.FAILED
    steps.update(
        label="Failed" if failed else "Done: " + result.status, expanded=False, state="error" if failed else "complete"
    )
    shown.empty()
    return result


def show_answer(result: AnswerResult) -> None:
    if result.journal:
        because = f" ({result.kept_because})" if result.kept_because else ""
        fix = f"  \nFix: {escape_keeping_code(result.kept_fix)}" if result.kept_fix else ""
        st.info(
            escape_markdown(
                f"The store could not take this run just now{because}: it is kept in the local journal "
                "and saved the next time the store opens."
            )
            + fix,
            icon=":material/save:",
        )
    if result.status == Status.FAILED:
        st.error(
            escape_markdown(result.error or "") + (f"  \nFix: {escape_keeping_code(result.fix)}" if result.fix else ""),
            icon=":material/error:",
        )
        return
    faith = fmt_score(result.faithfulness)
    st.markdown(
        f"**{status_markdown(status_label(result.status), result.status)}** · faithfulness **{faith}** "
        f"({claims_label(result.config)}) · "
        f"{plural(len(result.attempts), 'attempt')} · "
        + (f"[run {result.run_id}](/runs?run_id={int(result.run_id)})" if result.run_id else f"run {result.run_id}")
    )
    show_replayed(result)
    if result.standalone_question and result.standalone_question != result.question:
        st.caption(escape_markdown(f"Read as a follow-up: retrieved for '{result.standalone_question}'"))
    claims = result.final_claims
    if result.status == Status.ABSTAINED:
        show_abstention(result)
    else:
        st.markdown(annotated_markdown(result.answer or "", claims))
        show_on_topic(result.final_record)
    banner = unsupported_banner(result.answer or "", claims) if result.status != Status.ABSTAINED else None
    if banner:
        st.warning(banner)
    note = extraction_error_note(claims)
    if note:
        st.caption(note)
    warning = flag_warning(claims)
    if warning:
        st.warning(escape_markdown(warning[0].upper() + warning[1:] + "."), icon=":material/flag:")
    cited = sorted({c.passage.n for c in claims if c.passage and c.verdict == Verdict.SUPPORTED})
    if cited:
        sources = {p.n: short_source(p.source) for p in result.passages}
        st.caption("Sources: " + ", ".join(escape_markdown(f"[{n}] {sources.get(n, '?')}") for n in cited))
    show_claims(result)
    show_passages(result)
    show_attempts(result)


def show_replayed(result: AnswerResult) -> None:
    """A run answered (partly) from the response cache says so, with when its replies were first computed and the
    latency it reports (the one first measured); nothing for a run computed now."""
    note = replay_note(result.n_calls, result.n_replayed, result.replayed_from)
    if note is None:
        return
    latency = f"; latency {result.latency_ms:,.0f} ms as first measured" if result.latency_ms is not None else ""
    st.info(escape_markdown(note[0].upper() + note[1:] + latency), icon=":material/replay:")


def show_abstention(result: AnswerResult) -> None:
    """An abstention: what it says, why, and the attempt it withheld (when one was written), in a box marked
    withheld, with its sentences coloured by their claims' verdicts; all model text escaped, shown as text."""
    st.markdown(escape_markdown(result.answer or ""))
    because = withheld_because(result.answer)
    st.caption(escape_markdown(f"Why: {result.abstain_reason or because}"))
    record = result.final_record
    if record is None or not record.answer:
        st.caption(escape_markdown(f"No answer was withheld: none was written ({because})."))
        return
    with st.container(border=True, key=f"withheld-{result.run_id}-{record.attempt_no}"):
        st.markdown(
            ":gray-badge[:material/visibility_off: Withheld] "
            + escape_markdown(
                f"What the model answered (attempt {record.attempt_no}, faithfulness "
                f"{fmt_score(record.faithfulness)}), not given as the answer: {because}."
            )
        )
        st.markdown(annotated_markdown(record.answer, result.final_claims))
        show_on_topic(record, emphasise=False)


def show_claims(result: AnswerResult) -> None:
    """The claims as a static table that wraps its text: claim, verdict, verifier and evidence (with its source)
    all in view at 1280 px, no horizontal scroll (a data grid cut the verifier column and hid the evidence). Every
    cell is escaped: st.table reads Markdown."""
    claims = result.final_claims
    if not claims:
        return
    with st.expander(f"Claims ({len(claims)})", expanded=result.status != Status.ACCEPTED):
        rows = [
            {
                "#": str(c.claim_no),
                "claim": escape_markdown(c.text),
                "verdict": escape_markdown(verdict_label(c.verdict)),
                "verifier": escape_markdown(c.verifier or ""),
                "evidence": escape_markdown(
                    (f"[{c.passage.n}] {short_source(c.passage.source)}: " if c.passage else "") + (c.evidence or "")
                ),
                "reason": escape_markdown(c.reason or ""),
            }
            for c in claims
        ]
        st.table(pd.DataFrame(rows), hide_index=True)


def show_passages(result: AnswerResult) -> None:
    if not result.passages:
        return
    with st.expander(f"Retrieved chunks ({len(result.passages)})"):
        if result.rewritten_query:
            st.caption(escape_markdown(f"Retrieved with the rewritten query: {result.rewritten_query}"))
        for p in result.passages:
            st.markdown(f"**\\[{p.n}\\] {escape_markdown(short_source(p.source))}** · similarity {fmt_score(p.score)}")
            st.markdown(escape_markdown(p.text))


def show_attempts(result: AnswerResult) -> None:
    if len(result.attempts) < 2:
        return
    with st.expander(f"Attempts ({len(result.attempts)})"):
        for attempt in result.attempts:
            r = attempt.record
            faith = fmt_score(r.faithfulness)
            st.markdown(
                f"**Attempt {r.attempt_no}**{escape_markdown(f' ({made_how(r)})') if made_how(r) else ''} · "
                f"faithfulness {faith} · {status_markdown(status_label(r.status), r.status)}"
            )
            st.markdown(escape_markdown(r.answer))
            if r.dropped:
                st.caption("Dropped, as no source supports them: " + escape_markdown(" ".join(r.dropped)))
            if r.failed_claims:
                st.caption("Failed claims: " + escape_markdown("; ".join(r.failed_claims)))
            show_on_topic(r, emphasise=False)


def show_on_topic(record, emphasise: bool = True) -> None:
    """An attempt's on-topic check, escaped: a warning when the shown answer does not address the question
    (emphasise), else a caption; nothing when the attempt was not checked."""
    line = on_topic.describe(record) if record is not None else None
    if not line:
        return
    text = escape_markdown(line[0].upper() + line[1:])
    if emphasise and record.on_topic is False:
        st.warning(text, icon=":material/wrong_location:")  # the off_topic status's icon (markup.STATUS_ICON)
    else:
        st.caption(text)
