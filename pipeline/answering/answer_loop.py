"""The attempts on one round's passages: the schedule of the calls (chosen once per run), the context grade (first,
or alongside the first attempt), the context budget, then attempt after attempt, each streamed and checked sentence
by sentence (streamed.py), until one passes or the retries run out."""

from __future__ import annotations

from concurrent.futures import Future
from functools import partial

from pipeline import tracing
from pipeline.answering import on_topic, status
from pipeline.answering.budget import on_whole_chunk, within_budget
from pipeline.answering.context import RunContext
from pipeline.answering.events import Budgeted, ClaimsUnextracted, Graded, Planned, Scored, VerdictSettled
from pipeline.answering.repair import on_topic_retry, repairs_by_dropping, retrying, trimmed_attempt
from pipeline.answering.retrieval import Retrieval
from pipeline.answering.scoring import check_on_topic, on_topic_event, scored
from pipeline.answering.streamed import LiveAttempt
from pipeline.models.slots import schedule
from pipeline.verification.claims import EXTRACTION_ERROR
from pipeline.verification.faithfulness import CheckedClaim, Passage
from pipeline.vocabulary import Status


class AnswerRound:
    """One round: its number (1, or 2 after a rewritten query) and the rejected claims still being classified."""

    def __init__(self, ctx: RunContext, retrieval: Retrieval, round_no: int):
        self.ctx, self.retrieval, self.round_no = ctx, retrieval, round_no
        # rejected claims being classified (contradicted or unsupported) on the pool: settled before the round ends
        self.classifying: list[tuple[int, CheckedClaim, Future]] = []

    def answer(self, passages: list[Passage]) -> bool:
        """Attempts until one passes or the retries run out; False when the round's grade found the context not
        relevant (the first attempt, streamed while the grade ran, is then withdrawn)."""
        settings = self.ctx.settings
        failed: list[str] = []
        topic: on_topic.TopicCheck | None = None  # the previous attempt's on-topic check
        if plan(self.ctx) == "sequential":  # one slot: grade first, generate from what it kept
            graded = self._grade_first(passages)
            if graded.relevant is False:
                return False
            passages, grade = self._within_budget(passages, set(graded.kept)), None
        else:  # slots to spare: the grade runs alongside the first attempt
            passages = self._within_budget(passages, None)
            grade = partial(self.retrieval.grade, self.round_no, passages)
        attempt_no = 0
        for generation in range(1, settings.max_retries + 2):
            attempt_no += 1
            retry = on_topic_retry(self.ctx, passages, failed, topic)
            attempt, topic = self._attempt(attempt_no, passages, failed, grade if generation == 1 else None, retry)
            if attempt is None:
                self._settle_classifications(announce=False)
                return False
            flagged, off_target = attempt.record.status == status.FLAGGED, topic is not None and not topic.on_topic
            if not flagged and not off_target:
                break
            if flagged and not off_target and repairs_by_dropping(settings, self.ctx.schedule):
                trimmed = trimmed_attempt(self.ctx, attempt_no + 1, attempt)
                if trimmed is not None:
                    attempt_no += 1
                    if trimmed[1] is None or trimmed[1].on_topic is not False:
                        break  # otherwise the trimmed answer misses the question: regenerate from the flagged one
            failed = attempt.record.failed_claims if flagged else []
            if generation <= settings.max_retries:
                self.ctx.emit(retrying(attempt.record, attempt_no + 1, failed, topic if off_target else None, settings))
        return True

    def settle(self) -> None:
        """Give the rejected claims still being classified their final verdicts. The engine calls it after the
        decision: telling contradicted from unsupported changes neither the score nor the outcome, so the answer is
        shown without waiting for it (on one slot it has not even started: nothing the shown answer waits on may
        queue behind a classification; with slots to spare it has been running alongside)."""
        self._settle_classifications()

    def _grade_first(self, passages: list[Passage]) -> Graded:
        """The sequential schedule's grade, before any generation."""
        graded = self.retrieval.grade(self.round_no, passages)
        self.retrieval.record(graded)
        self.ctx.emit(graded)
        return graded

    def _within_budget(self, passages: list[Passage], kept: set[int] | None) -> list[Passage]:
        """The passages the generator reads under the context budget (the whole chunks without one)."""
        budget = self.ctx.settings.context_budget_tokens
        with tracing.step("context budget", budget=budget):
            budgeted = within_budget(self.ctx.question, passages, budget, kept)
            tracing.annotate(
                kept_tokens=budgeted.kept_tokens,
                total_tokens=budgeted.total_tokens,
                **{f"passage_{c.n}": c.line() for c in budgeted.cuts},
            )
        self.ctx.emit(Budgeted(message=budgeted.summary(), budget=budget, cuts=budgeted.cuts))
        return budgeted.passages

    def _attempt(self, attempt_no: int, passages: list[Passage], failed: list[str], grade, retry: list[dict] | None):
        """(the attempt, its on-topic check or None when it was not checked); (None, None) when withdrawn.
        `grade`: the round's context grade to run alongside, or None."""
        ctx = self.ctx
        with tracing.step(f"attempt {attempt_no}", strict=attempt_no > 1):
            live = LiveAttempt(ctx, attempt_no, passages, failed, retry)
            try:
                live.run(grade)
            finally:
                live.stop.set()
                if live.graded is not None:
                    self.retrieval.record(live.graded)
            self.classifying += [(attempt_no, claim, future) for claim, future in live.classifying]
            if live.discarded:
                return None, None
            attempt = scored(live, ctx.result.passages, ctx.settings.faithfulness_threshold)
            ctx.result.attempts.append(attempt)
            topic = check_on_topic(ctx, attempt.record)
            tracing.annotate(status=attempt.record.status, faithfulness=attempt.record.faithfulness)
        if live.errors:
            error = live.errors[0]
            message = f"claims could not be extracted: {error}"
            ctx.emit(ClaimsUnextracted(message=message, attempt=attempt_no, error=error))
        elif attempt.record.status != Status.ABSTAINED:
            ctx.emit(Scored.of(attempt))
        if topic is not None:
            ctx.emit(on_topic_event(attempt.record, topic))
        return attempt, topic

    def _settle_classifications(self, announce: bool = True) -> None:
        """Wait for the rejected claims still being classified and give each its final verdict, evidence and
        reason (in place: the attempts and the events hold these very claims)."""
        pending, self.classifying = self.classifying, []
        for attempt_no, claim, future in pending:
            final = future.result()
            if claim.verdict == EXTRACTION_ERROR:  # found to repeat an earlier sentence's claim meanwhile
                continue
            final = on_whole_chunk(final, self.ctx.result.passages)
            for name in ("verdict", "verifier", "passage", "span", "reason"):
                setattr(claim, name, getattr(final, name))
            if announce:
                self.ctx.emit(
                    VerdictSettled(
                        message=f"attempt {attempt_no}, claim {claim.claim_no}: {claim.verdict}",
                        attempt=attempt_no,
                        claim=claim,
                    )
                )


def plan(ctx: RunContext) -> str:
    """The schedule of this run's calls, chosen once from the generator host's slots (an event says which)."""
    if ctx.schedule is None:
        ctx.schedule, why = schedule(ctx.settings)
        tracing.annotate(schedule=ctx.schedule, schedule_why=why)
        detail = "grading first, then generating" if ctx.schedule == "sequential" else "grading while generating"
        ctx.emit(Planned(message=f"{ctx.schedule} schedule, {detail}: {why}", schedule=ctx.schedule, why=why))
    return ctx.schedule
