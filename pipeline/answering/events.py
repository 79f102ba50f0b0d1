"""Events the query engine streams out while it works, one class per kind, and the run model: one AnswerResult
per question, written to the store once (`to_log`) and rebuilt from it once (`from_stored`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import ClassVar

from pipeline.answering import status
from pipeline.answering.budget import Cut
from pipeline.text import cited_numbers
from pipeline.verification.claims import SUPPORTED, is_failed, scored_claims
from pipeline.verification.faithfulness import CheckedClaim, FaithfulnessChecker, Passage
from store.records import (
    AttemptRecord,
    CacheEntry,
    ClaimRecord,
    GradeRecord,
    LLMCallRecord,
    RetrievalRecord,
    RunLog,
    RunRecord,
    SpanRecord,
)
from store.runs import field_names, record_values


@dataclass(frozen=True, kw_only=True)
class Event:
    """One thing a question's run tells its listener as it goes. Listeners dispatch on the class (every class
    below); `message` is the event's line for people (the Chat page's steps, `ask`'s stderr) and `kind` its
    short name where one is printed."""

    kind: ClassVar[str]
    message: str = ""


class UnhandledEvent(TypeError):
    """A listener met an event class it does not name: each listener says what it does with every class, so
    that a new kind of event is shown, or left out, on purpose (tests/test_events.py)."""

    def __init__(self, event: Event, listener: str):
        super().__init__(f"{listener} does not handle {type(event).__name__} events: add a case for them")


@dataclass(frozen=True, kw_only=True)
class StandaloneQuestion(Event):
    """How a question asked with earlier turns was read: a follow-up rewritten, or used as asked."""

    kind = "standalone"
    question: str
    standalone: str
    method: str  # no history | rule | model | fallback
    why: str | None  # what in the question refers back (conversation.refers_back); None: nothing
    turns: int  # the earlier turns read (within the history's token budget)
    dropped: int  # older turns left out by the budget
    skipped: int  # empty turns left out
    history_tokens: int


@dataclass(frozen=True, kw_only=True)
class Retrieved(Event):
    kind = "retrieve"
    round: int
    query: str
    passages: list[Passage]


@dataclass(frozen=True, kw_only=True)
class Planned(Event):
    """The schedule of the run's calls, chosen once from the generator host's slots (models/slots.py)."""

    kind = "plan"
    schedule: str  # overlapped | sequential
    why: str


@dataclass(frozen=True, kw_only=True)
class Graded(Event):
    """The context grade of one round; relevant None: the reply was unreadable (reason says why)."""

    kind = "grade"
    round: int
    relevant: bool | None
    reason: str
    kept: frozenset[int] = frozenset()  # the passages a relevant grade says state what the question needs


@dataclass(frozen=True, kw_only=True)
class Budgeted(Event):
    """What the generator reads of each passage under the context budget."""

    kind = "budget"
    budget: int
    cuts: list[Cut]


@dataclass(frozen=True, kw_only=True)
class Token(Event):
    """A piece of the answer as it streams."""

    kind = "token"
    attempt: int
    delta: str


@dataclass(frozen=True, kw_only=True)
class Generated(Event):
    kind = "generate"
    attempt: int
    strict: bool
    answer: str


@dataclass(frozen=True, kw_only=True)
class SentenceChecked(Event):
    """A finished sentence of the streamed answer and its checked claims (error: they could not be extracted)."""

    kind = "sentence"
    attempt: int
    index: int
    span: tuple[int, int]
    cited: list[int]
    claims: list[CheckedClaim]
    error: str | None


@dataclass(frozen=True, kw_only=True)
class Discarded(Event):
    """A streamed attempt withdrawn: the context grade found the context not relevant."""

    kind = "discard"
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ClaimsUnextracted(Event):
    """An attempt whose claims could not be extracted (it is not scored)."""

    kind = "claims"
    attempt: int
    error: str


@dataclass(frozen=True, kw_only=True)
class Scored(Event):
    kind = "score"
    attempt: int
    faithfulness: float | None
    status: str

    @classmethod
    def of(cls, attempt: Attempt) -> Scored:
        record = attempt.record
        faith = record.faithfulness
        return cls(
            message=f"attempt {record.attempt_no}: faithfulness "
            + (
                f"{faith:.2f} ({record.n_supported}/{record.n_claims} claims supported)"
                if faith is not None
                else f"not scored ({record.status})"
            ),
            attempt=record.attempt_no,
            faithfulness=faith,
            status=record.status,
        )


@dataclass(frozen=True, kw_only=True)
class OnTopicChecked(Event):
    """Whether an attempt addresses the question (answering/on_topic.py); on_topic None: undecided."""

    kind = "on_topic"
    attempt: int
    on_topic: bool | None
    score: float | None
    method: str
    reason: str
    missing_terms: list[str]


@dataclass(frozen=True, kw_only=True)
class Trimmed(Event):
    """An attempt made without a model call: the flagged one without its unsupported sentences (setting repair)."""

    kind = "trim"
    attempt: int
    from_attempt: int
    dropped: list[str]
    answer: str
    claims: list[CheckedClaim]


@dataclass(frozen=True, kw_only=True)
class Retrying(Event):
    """The next attempt is generated again: with a stricter prompt that names the failed claims, or an on-topic
    one that names what the answer missed."""

    kind = "retry"
    attempt: int  # the attempt about to be made
    failed_claims: list[str]
    off_topic: bool
    missing_terms: list[str]
    gap: str


@dataclass(frozen=True, kw_only=True)
class Rewritten(Event):
    """The query of the second round, after a first whose context did not answer; None: no different one."""

    kind = "rewrite"
    query: str | None


@dataclass(frozen=True, kw_only=True)
class VerdictSettled(Event):
    """A rejected claim's final verdict (contradicted or unsupported), settled before the decision; the claim is
    the very object an earlier SentenceChecked event holds, updated in place."""

    kind = "verdict"
    attempt: int
    claim: CheckedClaim


@dataclass(frozen=True, kw_only=True)
class Decided(Event):
    kind = "decide"
    status: str


@dataclass(frozen=True, kw_only=True)
class Abstained(Event):
    kind = "abstain"
    reason: str


@dataclass(frozen=True, kw_only=True)
class RunFailed(Event):
    """The run stopped on an error the user can fix (a WorkbenchError): what went wrong and how to fix it."""

    kind = "error"
    error: str
    fix: str


@dataclass(frozen=True, kw_only=True)
class Finished(Event):
    """The last event of every run that was not stopped: its result, saved (or kept in the journal)."""

    kind = "final"
    result: AnswerResult


@dataclass
class Attempt:
    record: AttemptRecord
    claims: list[CheckedClaim] = field(default_factory=list)

    def score(self, threshold: float) -> Attempt:
        """The record scored from the claims: status (by the run's threshold), faithfulness, counts, failed claims."""
        record = self.record
        faith, scored = FaithfulnessChecker.score(self.claims)
        record.status = status.attempt_status(faith, scored, threshold)
        record.faithfulness = faith
        counted = scored_claims(self.claims)  # extraction errors are kept in the run, not scored
        record.n_claims = len(counted)
        record.n_supported = sum(c.verdict == SUPPORTED for c in counted)
        record.failed_claims = [c.text for c in counted if is_failed(c)]
        return self


@dataclass(kw_only=True)
class AnswerResult(RunRecord):
    """One question's run: the engine fills it in step by step. Its stored fields are RunRecord's, inherited
    (status also takes `running` while the engine works); the store's rows are derived from it (`to_log`) and it
    is read back from them by field name (`from_stored`). Build it by keyword."""

    record_type: ClassVar[type[RunRecord]] = RunRecord  # the record written for it: its fields are the columns
    run_id: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)  # the final round's retrieved chunks
    fix: str | None = None  # how to fix what failed; not stored
    journal: str | None = None  # the journal file that keeps the run when the store could not take it
    kept_because: str | None = None  # why the store could not take it then (locked, full disk, read-only...)
    kept_fix: str | None = None  # what to do about that
    not_kept: str | None = None  # why neither the store nor the journal could keep the run (it is not saved)

    @property
    def final_record(self) -> AttemptRecord | None:
        for attempt in self.attempts:
            if attempt.record.attempt_no == self.final_attempt:
                return attempt.record
        return None

    @property
    def final_claims(self) -> list[CheckedClaim]:
        for attempt in self.attempts:
            if attempt.record.attempt_no == self.final_attempt:
                return attempt.claims
        return []

    def to_log(
        self,
        grades: list[GradeRecord],
        retrievals: list[RetrievalRecord],
        finished_at: datetime,
        calls: list[LLMCallRecord] = (),
        cache_entries: list[CacheEntry] = (),
        spans: list[SpanRecord] = (),
    ) -> RunLog:
        """The rows that record this run; retrievals are marked cited when the final answer cites them. The
        fields counted from the attempts (n_attempts, n_claims, n_supported) and finished_at are set here."""
        final = self.final_record
        self.n_attempts = len(self.attempts)
        self.n_claims = final.n_claims if final else None
        self.n_supported = final.n_supported if final else None
        self.finished_at = finished_at
        run = self.record_type(**{name: getattr(self, name) for name in field_names(self.record_type)})
        return RunLog(
            run,
            grades=list(grades),
            retrievals=_mark_cited(retrievals, final),
            attempts=[a.record for a in self.attempts],
            claims=[claim_record(a.record.attempt_no, c) for a in self.attempts for c in a.claims],
            calls=list(calls),
            cache_entries=list(cache_entries),
            spans=list(spans),
        )

    @classmethod
    def from_stored(cls, run: dict) -> AnswerResult:
        """The result again from a stored run (store.runs.get_run's shape); `fix` is not stored."""
        rounds = [r["round"] for r in run["retrievals"]]
        final_round = max(rounds) if rounds else None
        passages = [
            Passage(r["rank"], r["chunk_id"], r["source"] or "(deleted document)", r["text"] or "", r["score"])
            for r in run["retrievals"]
            if r["round"] == final_round
        ]
        by_chunk = {p.chunk_id: p for p in passages}
        attempts = [
            Attempt(
                _attempt_record(a),
                [_checked_claim(c, by_chunk) for c in run["claims"] if c["attempt_no"] == a["attempt_no"]],
            )
            for a in run["attempts"]
        ]
        return cls(
            **record_values(run, cls.record_type),
            run_id=run["id"],
            attempts=attempts,
            passages=passages,
        )


def claim_record(attempt_no: int, claim: CheckedClaim) -> ClaimRecord:
    return ClaimRecord(
        attempt_no=attempt_no,
        claim_no=claim.claim_no,
        text=claim.text,
        verdict=claim.verdict,
        verifier=claim.verifier,
        evidence_chunk_id=claim.passage.chunk_id if claim.passage else None,
        span_start=claim.span[0] if claim.span else None,
        span_end=claim.span[1] if claim.span else None,
        evidence=claim.evidence,
        reason=claim.reason,
    )


def _mark_cited(retrievals: list[RetrievalRecord], final: AttemptRecord | None) -> list[RetrievalRecord]:
    """Chunks of the last retrieval round whose numbers the final answer cites ([1], [2])."""
    cited = cited_numbers(final.answer) if final else set()
    final_query = retrievals[-1].query if retrievals else None
    return [replace(r, cited=r.query == final_query and r.rank in cited) for r in retrievals]


def _attempt_record(row: dict) -> AttemptRecord:
    return AttemptRecord(**record_values(row, AttemptRecord))


def _checked_claim(row: dict, passages_by_chunk: dict[int, Passage]) -> CheckedClaim:
    span = (row["span_start"], row["span_end"]) if row["span_start"] is not None else None
    return CheckedClaim(
        claim_no=row["claim_no"],
        text=row["text"],
        verdict=row["verdict"],
        verifier=row["verifier"],
        passage=passages_by_chunk.get(row["evidence_chunk_id"]),
        span=span,
        reason=row["reason"] or "",
    )
