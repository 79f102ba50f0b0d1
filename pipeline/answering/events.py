"""Events the query engine streams out while it works, and the final result."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.verification.faithfulness import CheckedClaim, Passage
from store.records import AttemptRecord


@dataclass
class Event:
    kind: str  # retrieve | grade | rewrite | generate | claims | verdict | score | retry | abstain | error | final
    message: str
    data: dict = field(default_factory=dict)


@dataclass
class Attempt:
    record: AttemptRecord
    claims: list[CheckedClaim] = field(default_factory=list)


@dataclass
class AnswerResult:
    run_id: int | None
    status: str  # accepted | flagged | abstained | no_claims | unverified | failed | cancelled
    question: str
    answer: str | None
    faithfulness: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    final_attempt: int | None = None
    passages: list[Passage] = field(default_factory=list)
    rewritten_query: str | None = None
    abstain_reason: str | None = None
    error: str | None = None
    fix: str | None = None
    latency_ms: float | None = None

    @property
    def final_claims(self) -> list[CheckedClaim]:
        for attempt in self.attempts:
            if attempt.record.attempt_no == self.final_attempt:
                return attempt.claims
        return []
