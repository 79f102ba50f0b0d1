"""The shapes of what the store remembers, passed between pipeline/ and store/."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Chunk:
    id: int
    document_id: int
    ordinal: int
    text: str
    source: str
    title: str = ""


@dataclass
class LLMCallRecord:
    stage: str
    model: str
    digest: str | None
    prompt_hash: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    cache_hit: bool
    error: str | None
    started_at: datetime
    origin: str | None = None  # chat | evaluation | rejudge | detector | ingest | synth
    backend: str | None = None  # ollama | openai
    prompt_text: str | None = None  # the messages as sent, JSON (None when call texts are off)
    completion_text: str | None = None
    span_id: str | None = None
    eval_run_id: int | None = None
    # a replay (cache_hit): when the reply was first computed; its latency_ms and tokens are that call's
    first_computed_at: datetime | None = None


@dataclass
class SpanRecord:
    """One step of a run's trace; parent_id None for the root."""

    span_id: str
    parent_id: str | None
    name: str
    started_at: datetime
    latency_ms: float | None = None
    error: str | None = None
    attributes: dict = field(default_factory=dict)


@dataclass
class ReceivedSpan:
    """A span received from another application over OpenTelemetry, as it arrived (ids in hex; ended_at None
    while the span is still open)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    span_kind: str | None  # the span's own kind, as its convention names it: CHAIN, RETRIEVER, LLM, WORKFLOW, ...
    service: str
    started_at: datetime
    ended_at: datetime | None
    status_code: str | None = None  # OK | ERROR | None (unset)
    status_message: str | None = None
    attributes: dict = field(default_factory=dict)
    events: list = field(default_factory=list)  # span events: [{"name": ..., "attributes": {...}}], in order


@dataclass
class CacheEntry:
    key: str
    model: str
    digest: str
    response: dict


@dataclass
class GradeRecord:
    round: int
    query: str
    relevant: bool | None
    reason: str


@dataclass
class RetrievalRecord:
    round: int
    query: str
    rank: int
    chunk_id: int  # a chunk of the knowledge base; -rank for a context given with an imported answer
    score: float
    cited: bool = False
    context_text: str | None = None  # a given context's text and source (no chunk holds them)
    context_source: str | None = None
    span_id: str | None = None  # the trace's span that retrieved it (NULL before migration m033)


@dataclass
class ClaimRecord:
    attempt_no: int
    claim_no: int
    text: str
    verdict: str  # supported | contradicted | unsupported | unverified
    verifier: str
    evidence_chunk_id: int | None = None
    span_start: int | None = None
    span_end: int | None = None
    evidence: str | None = None
    reason: str = ""


@dataclass
class AttemptRecord:
    attempt_no: int
    strict: bool
    answer: str
    status: str  # verified | no_claims | unverified | error
    faithfulness: float | None
    n_claims: int
    n_supported: int
    failed_claims: list[str] = field(default_factory=list)
    error: str | None = None
    on_topic: bool | None = None  # does the answer address the question; None: not checked, or undecided
    on_topic_score: float | None = None  # the question's similarity to the answer's closest sentence
    on_topic_method: str | None = None  # embedding | model: which step of the check decided
    on_topic_reason: str | None = None
    missing_terms: list[str] = field(default_factory=list)  # question words the answer does not mention
    # repair = drop: the attempt this one is, without its sentences whose every claim failed (no model call)
    trimmed_from: int | None = None
    dropped: list[str] = field(default_factory=list)  # those sentences, in answer order
    seed: int | None = None  # the sampling seed the answer was generated with (each attempt has its own)


@dataclass(kw_only=True)
class RunRecord:
    """A run's row of the runs table, declared once: the store writes a column per field (store.runs.insert_run)
    and reads each back by name (store.runs.record_values); the engine's AnswerResult inherits these fields.
    Adding a field: a migration adding its column, the field here (with a default), and, to show it on the
    Runs page, in `runs` and in exports, a RunColumn in store.history.RUN_COLUMNS. Dict and list fields are
    JSON columns. Build records by keyword: the order of the fields is not part of their meaning."""

    kind: str
    question: str
    status: str  # the vocabulary of pipeline/answering/status.py: accepted | flagged | abstained | failed ...
    started_at: datetime
    answer: str | None = None
    faithfulness: float | None = None
    n_claims: int | None = None
    n_supported: int | None = None
    n_attempts: int = 0
    final_attempt: int | None = None
    rewritten_query: str | None = None
    abstain_reason: str | None = None
    error: str | None = None
    generator_model: str | None = None
    config: dict = field(default_factory=dict)
    finished_at: datetime | None = None
    latency_ms: float | None = None
    pipeline: str | None = None  # who wrote the answer, for an imported or traced run (None: this workbench)
    trace_id: str | None = None  # a traced run: the received trace it was made from (hex, as OpenTelemetry writes it)
    conversation_id: str | None = None  # a turn of a conversation: the conversation's name, shared by its turns
    turn_no: int | None = None  # the turn's position in its conversation, from 1
    standalone_question: str | None = None  # a turn's question as retrieval used it (rewritten when a follow-up)
    trace_convention: str | None = None  # a traced run: the tracing conventions its trace was read in
    n_calls: int | None = None  # the run's model calls (None: a run stored before they were counted)
    n_replayed: int | None = None  # of them, those replayed from the response cache
    replayed_from: datetime | None = None  # when the earliest replayed reply was first computed


@dataclass
class RunLog:
    """Everything one question produced, written in one transaction."""

    run: RunRecord
    grades: list[GradeRecord] = field(default_factory=list)
    retrievals: list[RetrievalRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    claims: list[ClaimRecord] = field(default_factory=list)
    calls: list[LLMCallRecord] = field(default_factory=list)
    cache_entries: list[CacheEntry] = field(default_factory=list)
    spans: list[SpanRecord] = field(default_factory=list)
