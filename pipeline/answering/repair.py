"""What follows an attempt that failed: repaired by dropping its unsupported sentences (trim.py; no model call),
or generated again with a stricter prompt that names the failed claims, or an on-topic one that names what the
answer missed."""

from __future__ import annotations

from pipeline import tracing
from pipeline.answering import on_topic, prompts, status
from pipeline.answering.context import RunContext
from pipeline.answering.events import Attempt, Retrying, Scored, Trimmed
from pipeline.answering.scoring import check_on_topic, on_topic_event
from pipeline.answering.trim import without_unsupported
from pipeline.config import Settings
from pipeline.text import plural
from pipeline.verification.claims import context_block
from pipeline.verification.faithfulness import Passage
from store.records import AttemptRecord


def repairs_by_dropping(settings: Settings, schedule: str | None) -> bool:
    """Whether a flagged attempt is first repaired by dropping its unsupported sentences (setting repair; auto:
    on the sequential schedule, where a regeneration queues behind every other call); max_retries = 0 repairs
    nothing: the first answer is shown as it was checked."""
    if settings.max_retries == 0:
        return False
    if settings.repair == "auto":
        return schedule == "sequential"
    return settings.repair == "drop"


def trimmed_attempt(
    ctx: RunContext, attempt_no: int, flagged: Attempt
) -> tuple[Attempt, on_topic.TopicCheck | None] | None:
    """Attempt `attempt_no` (added to the result's): the flagged attempt without its sentences whose every claim
    failed, made without a model call; (the attempt, its on-topic check), or None, with no event, where dropping
    cannot repair it."""
    trimmed = without_unsupported(flagged.record.answer, flagged.claims)
    if trimmed is None:
        return None
    source = flagged.record.attempt_no
    with tracing.step(f"attempt {attempt_no}", trimmed_from=source, dropped=len(trimmed.dropped)):
        record = AttemptRecord(
            attempt_no,
            False,
            trimmed.answer,
            status.UNVERIFIED,
            None,
            0,
            0,
            trimmed_from=source,
            dropped=trimmed.dropped,
        )
        attempt = Attempt(record, trimmed.claims)
        ctx.result.attempts.append(attempt)
        attempt.score(ctx.settings.faithfulness_threshold)
        topic = check_on_topic(ctx, record)
        tracing.annotate(status=record.status, faithfulness=record.faithfulness)
    ctx.emit(
        Trimmed(
            message=f"attempt {attempt_no}: attempt {source} without its "
            f"{plural(len(trimmed.dropped), 'unsupported sentence')} (no model call)",
            attempt=attempt_no,
            from_attempt=source,
            dropped=trimmed.dropped,
            answer=trimmed.answer,
            claims=trimmed.claims,
        )
    )
    ctx.emit(Scored.of(attempt))
    if topic is not None:
        ctx.emit(on_topic_event(record, topic))
    return attempt, topic


def on_topic_retry(ctx: RunContext, passages: list[Passage], failed: list[str], topic: on_topic.TopicCheck | None):
    """The retry prompt of an attempt after an off-target one: it names the question's terms the answer
    lacked and the gap the model stated (and any failed claims); None for the usual prompts."""
    if topic is None or topic.on_topic is not False:
        return None
    user = prompts.generate_on_topic_input(
        ctx.question, context_block(passages), topic.missing, topic.gap, failed, ctx.history_text
    )
    return prompts.GENERATE_ON_TOPIC.messages(user)


def retrying(
    record: AttemptRecord, next_no: int, failed: list[str], topic: on_topic.TopicCheck | None, settings: Settings
) -> Retrying:
    """The event that says why attempt `next_no` is generated again and what its prompt names."""
    why, names = [], []
    if failed:
        why.append(f"faithfulness {record.faithfulness:.2f} is below {settings.faithfulness_threshold:.2f}")
        names.append(plural(len(failed), "failed claim"))
    if topic is not None:
        why.append("the answer does not address the question")
        if topic.missing:
            names.append("the question's terms it lacks (" + ", ".join(topic.missing) + ")")
        if topic.gap:
            names.append(f"what it missed ({topic.gap})")
    prompt = "an on-topic prompt" if topic is not None else "a stricter prompt"
    named = f" that names {' and '.join(names)}" if names else ""
    return Retrying(
        message=f"{' and '.join(why)}; retrying with {prompt}{named}",
        attempt=next_no,
        failed_claims=failed,
        off_topic=topic is not None,
        missing_terms=topic.missing if topic else [],
        gap=topic.gap if topic else "",
    )
