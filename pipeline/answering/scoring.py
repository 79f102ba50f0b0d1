"""An attempt's outcome once it is written: its record scored from its sentences' verdicts (the claims placed on
the final answer's sentences), and the check that it addresses the question."""

from __future__ import annotations

from pipeline import tracing
from pipeline.answering import on_topic, status
from pipeline.answering.budget import on_whole_chunk
from pipeline.answering.context import RunContext
from pipeline.answering.events import Attempt, OnTopicChecked
from pipeline.answering.streamed import LiveAttempt, is_abstention
from pipeline.text import sentences
from pipeline.verification.faithfulness import CheckedClaim, Passage
from pipeline.verification.placement import place_claim
from pipeline.vocabulary import Status
from store.records import AttemptRecord


def scored(live: LiveAttempt, passages: list[Passage], threshold: float) -> Attempt:
    """The attempt from its streamed answer and the verdicts of its sentences, its claims on the whole retrieved
    chunks (`passages`)."""
    raw = live.reply.text
    answer = raw.strip()
    record = AttemptRecord(live.attempt_no, live.strict, answer, status.UNVERIFIED, None, 0, 0, seed=live.seed)
    attempt = Attempt(record)
    if is_abstention(answer) or not answer:
        record.status = Status.ABSTAINED
        return attempt
    if live.errors:
        record.status, record.error = Status.UNVERIFIED, live.errors[0]
        return attempt
    placed = _placed(answer, len(raw) - len(raw.lstrip()), live.claims)
    attempt.claims = [on_whole_chunk(c, passages) for c in placed]
    return attempt.score(threshold)


def check_on_topic(ctx: RunContext, record: AttemptRecord) -> on_topic.TopicCheck | None:
    """After verification: does the answer address the question (kept on the record); None when the check
    is off or there is no answer to check (an abstention)."""
    if not ctx.settings.on_topic_check or record.status == Status.ABSTAINED or not record.answer:
        return None
    with tracing.step("on-topic check"):
        topic = on_topic.check(ctx.llm, ctx.settings, ctx.question, record.answer, ctx.similarity_scale())
        tracing.annotate(on_topic=topic.on_topic, score=topic.score, method=topic.method)
    on_topic.keep(record, topic)
    return topic


def on_topic_event(record: AttemptRecord, topic: on_topic.TopicCheck) -> OnTopicChecked:
    return OnTopicChecked(
        message=f"attempt {record.attempt_no}: {on_topic.describe(record)}",
        attempt=record.attempt_no,
        on_topic=topic.on_topic,
        score=topic.score,
        method=topic.method,
        reason=topic.reason,
        missing_terms=topic.missing,
    )


def _placed(answer: str, lead: int, claims: list[CheckedClaim]) -> list[CheckedClaim]:
    """Claims on the answer sentence they were extracted from (spans moved by the `lead` whitespace the
    answer lost); a claim whose sentence the final answer cuts differently is placed by its text."""
    parts = sentences(answer)
    spans = {(p.start, p.end) for p in parts}
    for claim in claims:
        start, end = claim.answer_span
        claim.answer_span = (start - lead, end - lead)
        if claim.answer_span not in spans:
            at = place_claim(claim.text, parts)
            claim.answer_span = (parts[at].start, parts[at].end) if at is not None else None
    return claims
