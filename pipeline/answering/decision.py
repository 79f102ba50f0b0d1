"""The run's last step: the best attempt shown (accepted, flagged, off target...) or the answer withheld with the
reason. Each function sets the result's outcome and returns the event that says it."""

from __future__ import annotations

from pipeline.answering import status
from pipeline.answering.events import Abstained, AnswerResult, Attempt, Decided
from pipeline.config import Settings
from pipeline.vocabulary import Status
from store.records import AttemptRecord


def decide(settings: Settings, result: AnswerResult, relevant: bool | None) -> Decided | Abstained:
    """The outcome from the attempts made; `relevant`: what the last context grade said."""
    best = best_attempt(result.attempts)
    record = best.record
    threshold = settings.faithfulness_threshold
    if record.status == Status.ABSTAINED:
        return abstain(
            result, "the generator found no answer in the retrieved passages", best, status.NO_ANSWER_IN_SOURCES
        )
    final = record.status  # accepted | flagged | no_claims | unverified: the attempt's own label
    withheld = record.faithfulness is not None and record.faithfulness < settings.abstain_below
    if final == status.FLAGGED and withheld and settings.when_unverified == "abstain":
        return abstain(
            result,
            f"no attempt reached faithfulness {threshold:.2f}; the best reached {record.faithfulness:.2f}, "
            f"below {settings.abstain_below:.2f}, under which an unverified answer is withheld",
            best,
            status.NOT_VERIFIED_RELEVANT if relevant else status.NOT_VERIFIED,
        )
    if record.on_topic is False:  # the best attempt is off target, so every checked attempt was
        if settings.off_topic_final == "abstain":
            return abstain(
                result,
                f"no attempt addressed the question, so none is given; the best: {record.on_topic_reason}",
                best,
                status.NOT_ON_TOPIC,
            )
        final = status.OFF_TOPIC
    _finish(result, final, best, record.answer)
    return Decided(message=_decision_message(final, record), status=final)


def abstain(
    result: AnswerResult, reason: str, best: Attempt | None = None, answer: str = status.NOT_COVERED
) -> Abstained:
    result.abstain_reason = reason
    _finish(result, Status.ABSTAINED, best, answer)
    return Abstained(message=f"abstained: {reason}", reason=reason)


def best_attempt(attempts: list[Attempt]) -> Attempt:
    """The on-target attempt with the highest faithfulness (an unchecked or undecided one counts as on
    target); if every scored attempt is off target, the most faithful of them; without a scored attempt,
    the last on-target one, else the last."""
    scored = [a for a in attempts if a.record.faithfulness is not None]
    pool = scored or attempts
    pool = [a for a in pool if a.record.on_topic is not False] or pool
    if not scored:
        return pool[-1]
    return max(pool, key=lambda a: (a.record.faithfulness, -a.record.attempt_no))


def _finish(result: AnswerResult, outcome: str, attempt: Attempt | None, answer: str) -> None:
    result.status, result.answer = outcome, answer
    if attempt is not None:
        result.final_attempt = attempt.record.attempt_no
        result.faithfulness = attempt.record.faithfulness


def _decision_message(outcome: str, record: AttemptRecord) -> str:
    if outcome == Status.ACCEPTED:
        return f"accepted attempt {record.attempt_no} (faithfulness {record.faithfulness:.2f})"
    if outcome == Status.FLAGGED:
        return (
            f"no attempt reached the threshold; showing attempt {record.attempt_no} "
            f"(faithfulness {record.faithfulness:.2f}) with its unsupported claims marked"
        )
    if outcome == Status.NO_CLAIMS:
        return "the answer makes no checkable claims"
    if outcome == Status.OFF_TOPIC:
        return (
            f"no attempt addressed the question; showing attempt {record.attempt_no} "
            f"(faithfulness {'n/a' if record.faithfulness is None else f'{record.faithfulness:.2f}'}) "
            "marked as not addressing it"
        )
    return f"the answer could not be verified: {record.error or 'no claim got a verdict'}"
