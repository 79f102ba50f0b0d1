"""Events the query engine streams out while it works, and the run model: one AnswerResult per question,
written to the store once (`to_log`) and rebuilt from it once (`from_stored`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime

from pipeline.text import cited_numbers
from pipeline.verification.faithfulness import CheckedClaim, Passage
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


@dataclass
class Event:
    # retrieve | token | grade | discard | rewrite | generate | sentence | claims | score | on_topic | retry | decide |
    # abstain | error | final. token {attempt, delta}: a piece of the answer as it streams; sentence {attempt, index,
    # span, cited, claims, error}: a finished sentence's checked claims; discard {attempt}: a streamed attempt
    # withdrawn because the context grade found the context not relevant.
    kind: str
    message: str
    data: dict = field(default_factory=dict)


@dataclass
class Attempt:
    record: AttemptRecord
    claims: list[CheckedClaim] = field(default_factory=list)


@dataclass
class AnswerResult:
    """One question's run: the engine fills it in step by step; the store's rows are derived from it."""

    run_id: int | None
    status: str  # running | accepted | flagged | abstained | no_claims | unverified | failed | cancelled
    question: str
    answer: str | None
    faithfulness: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    final_attempt: int | None = None
    passages: list[Passage] = field(default_factory=list)  # the final round's retrieved chunks
    rewritten_query: str | None = None
    abstain_reason: str | None = None
    error: str | None = None
    fix: str | None = None
    latency_ms: float | None = None
    kind: str = "chat"  # chat | eval
    started_at: datetime | None = None
    generator_model: str | None = None
    config: dict = field(default_factory=dict)
    journal: str | None = None  # the journal file that keeps the run when the store could not take it

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
        """The rows that record this run; retrievals are marked cited when the final answer cites them."""
        final = self.final_record
        run = RunRecord(
            kind=self.kind,
            question=self.question,
            status=self.status,
            started_at=self.started_at,
            answer=self.answer,
            faithfulness=self.faithfulness,
            n_claims=final.n_claims if final else None,
            n_supported=final.n_supported if final else None,
            n_attempts=len(self.attempts),
            final_attempt=self.final_attempt,
            rewritten_query=self.rewritten_query,
            abstain_reason=self.abstain_reason,
            error=self.error,
            generator_model=self.generator_model,
            config=self.config,
            finished_at=finished_at,
            latency_ms=self.latency_ms,
        )
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
            run["id"],
            run["status"],
            run["question"],
            run["answer"],
            run["faithfulness"],
            attempts,
            run["final_attempt"],
            passages,
            run["rewritten_query"],
            run["abstain_reason"],
            run["error"],
            None,
            run["latency_ms"],
            run["kind"],
            run["started_at"],
            run["generator_model"],
            _json(run["config"]) or {},
        )


def claim_record(attempt_no: int, claim: CheckedClaim) -> ClaimRecord:
    return ClaimRecord(
        attempt_no,
        claim.claim_no,
        claim.text,
        claim.verdict,
        claim.verifier,
        claim.passage.chunk_id if claim.passage else None,
        claim.span[0] if claim.span else None,
        claim.span[1] if claim.span else None,
        claim.evidence,
        claim.reason,
    )


def _mark_cited(retrievals: list[RetrievalRecord], final: AttemptRecord | None) -> list[RetrievalRecord]:
    """Chunks of the last retrieval round whose numbers the final answer cites ([1], [2])."""
    cited = cited_numbers(final.answer) if final else set()
    final_query = retrievals[-1].query if retrievals else None
    return [replace(r, cited=r.query == final_query and r.rank in cited) for r in retrievals]


def _attempt_record(row: dict) -> AttemptRecord:
    return AttemptRecord(
        row["attempt_no"],
        row["strict"],
        row["answer"],
        row["status"],
        row["faithfulness"],
        row["n_claims"],
        row["n_supported"],
        list(_json(row["failed_claims"]) or []),
        row["error"],
        row.get("on_topic"),
        row.get("on_topic_score"),
        row.get("on_topic_method"),
        row.get("on_topic_reason"),
        list(_json(row.get("missing_terms")) or []),
    )


def _checked_claim(row: dict, passages_by_chunk: dict[int, Passage]) -> CheckedClaim:
    span = (row["span_start"], row["span_end"]) if row["span_start"] is not None else None
    return CheckedClaim(
        row["claim_no"],
        row["text"],
        row["verdict"],
        row["verifier"],
        passages_by_chunk.get(row["evidence_chunk_id"]),
        span,
        row["reason"] or "",
    )


def _json(value):
    return json.loads(value) if isinstance(value, str) else value
