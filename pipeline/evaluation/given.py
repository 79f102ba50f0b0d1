"""Answers written elsewhere, checked here: a question, another pipeline's answer and the contexts it was written
from become a run of kind `imported`, with no retrieval and no generation.

Checked as the engine checks its own answers (claim_granularity, pipeline/verification/sentence_first.py): each
sentence of the answer is first verified as it stands against the given contexts by the configured verifier chain;
the sentences that fail (all of them with granularity atomic) have their claims extracted in one call, verified,
rejected ones classified contradicted or unsupported, placed on their sentences; the attempt is then scored. The
run's rows are then those of any run, so the drilldown, Annotate, Calibration, Trends, Compare and the gate read it
unchanged. A row without contexts has nothing to check its
answer against: its run says so (status no_contexts) and faithfulness is not applicable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pipeline import tracing
from pipeline.answering import status
from pipeline.answering.events import AnswerResult, Attempt
from pipeline.config import Settings
from pipeline.declarations import option_values, prompt_versions
from pipeline.errors import WorkbenchError
from pipeline.evaluation.dataset import GivenContext
from pipeline.models.llm import LLM
from pipeline.models.slots import host_slots, schedule
from pipeline.text import Sentence, cited_numbers, is_meta_statement, sentences
from pipeline.verification.chain import VerifierChain, effective_chain
from pipeline.verification.claims import CheckedClaim
from pipeline.verification.faithfulness import FaithfulnessChecker, Passage, example_text
from pipeline.verification.placement import place_claim
from pipeline.verification.prompts import EXTRACT_CLAIMS, NLI_JUDGE
from pipeline.verification.registry import load_verifiers, verifier_class
from pipeline.verification.sentence_first import (
    ATOMIC,
    AUTO,
    checks_sentences,
    sentence_claim,
    stands,
    verify_sentences,
)
from store.records import AttemptRecord, RetrievalRecord, RunLog

KIND = "imported"
TRACED = "traced"  # a run made from a trace received from another application (pipeline/collect)
OWN_PIPELINE = "this workbench"  # how a run whose answer this workbench wrote is named beside other pipelines
# The settings a given answer's verdicts depend on (the generator's and the retriever's play no part).
OPTIONS = ("faithfulness_threshold", "llm_backend", "model_revision", "context_window", "temperature")


def origin_line(kind: str, pipeline: str | None) -> str | None:
    """What a run's drilldown says of who wrote its answer: for an imported run, the pipeline that wrote it, and
    that it was only checked here; None for a run this workbench answered."""
    if kind == TRACED:
        return (
            f"Answer written by service {pipeline or 'unknown'} and received as a trace: its question, answer and "
            "retrieved contexts come from the application's spans; its claims were verified here against those "
            "contexts."
        )
    if kind != KIND:
        return None
    return (
        f"Answer written by pipeline {pipeline or 'imported'} and checked here: no retrieval and no generation; its "
        "claims were verified against the contexts given with it."
    )


def contexts_heading(kind: str) -> str:
    """The heading of a run's contexts: those given with an imported answer, else the chunks retrieved for it."""
    return {KIND: "Given contexts", TRACED: "Retrieved contexts (from the trace)"}.get(kind, "Retrieved chunks")


def given_prompts(settings: Settings) -> list:
    """What checking a given answer may send: whole-answer claims, the chain's verifiers, the classification."""
    chain = [verifier_class(name) for name in effective_chain(settings)]
    return [
        *FaithfulnessChecker.answer_prompts,
        NLI_JUDGE,
        *(p for verifier in chain for p in verifier.prompts),
    ]


def given_config(settings: Settings, pipeline: str) -> dict:
    """What an imported run's verdicts depend on, as its parts declare them, and the pipeline that wrote it."""
    verifiers = load_verifiers().values()
    names = [*OPTIONS, *VerifierChain.options, *FaithfulnessChecker.options, *(o for v in verifiers for o in v.options)]
    config = option_values(settings, names)
    config["verifier_chain"] = ",".join(effective_chain(settings))
    config["prompts"] = prompt_versions(given_prompts(settings))
    config["pipeline"] = pipeline
    return config


def given_passages(contexts: Sequence[GivenContext | str] | None) -> list[Passage]:
    """The contexts as numbered passages. They are no chunks of the knowledge base: each is numbered -n in its
    run (the convention store/runs.py reads back), and its text and source are stored with the run."""
    passages = []
    for n, context in enumerate(contexts or [], start=1):
        given = GivenContext(text=context) if isinstance(context, str) else context
        passages.append(Passage(n, -n, given.source or f"context {n}", given.text, float(given.score or 0.0)))
    return passages


@dataclass
class GivenRun:
    """One given answer, checked: its result (the run) and its rows."""

    result: AnswerResult
    log: RunLog


def check_given(
    settings: Settings,
    llm: LLM,
    question: str,
    answer: str,
    contexts: Sequence[GivenContext | str] | None,
    pipeline: str,
    kind: str = KIND,
    one_at_a_time: bool = False,
    side_by_side: int = 1,
) -> GivenRun:
    """Verify a given answer against its contexts; the calls are `llm`'s (taken into the log here). Raises the
    model layer's WorkbenchError as a failed run (with the calls made); unreadable replies leave it unverified.
    `kind`: imported, or traced for an answer received in a trace. `one_at_a_time`: the caller checks no other
    answer meanwhile; `side_by_side`: else how many answers the caller checks at once (an evaluation's
    concurrency). Whether the answer's calls go one after another is `in_sequence`'s choice."""
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    passages = given_passages(contexts)
    result = AnswerResult(
        kind=kind,
        question=question,
        status=status.RUNNING,
        started_at=started,
        answer=answer,
        config=given_config(settings, pipeline),
        pipeline=pipeline,
        passages=passages,
    )
    with tracing.recording(f"{kind} answer", pipeline=pipeline, contexts=len(passages)) as trace:
        try:
            together = in_sequence(settings, 1 if one_at_a_time else side_by_side, one_at_a_time)
            attempt = _checked_attempt(settings, llm, question, answer, passages, together)
            tracing.annotate(status=attempt.record.status, faithfulness=attempt.record.faithfulness)
        except WorkbenchError as exc:  # a model could not be reached: the run failed, its calls are kept
            attempt = None
            result.status, result.error, result.fix = status.FAILED, exc.message, exc.fix
    if attempt is not None:
        result.attempts = [attempt]
        result.final_attempt = 1
        result.status = attempt.record.status
        result.faithfulness = attempt.record.faithfulness
        result.error = attempt.record.error
    result.latency_ms = (time.perf_counter() - t0) * 1000
    retrievals = [
        RetrievalRecord(1, question, p.n, p.chunk_id, p.score, context_text=p.text, context_source=p.source)
        for p in passages
    ]
    log = result.to_log(
        [], retrievals, datetime.now(timezone.utc), llm.take_calls(), llm.take_cache_entries(), trace.records()
    )
    return GivenRun(result, log)


def in_sequence(settings: Settings, side_by_side: int, one_at_a_time: bool = False) -> bool:
    """Whether a given answer's verifier calls go one after another in its own thread, ordered so that consecutive
    calls share a document (its sentences against the same context, its claims passage by passage), which the
    server's prompt cache then holds: where the slots are full anyway. One answer at a time on one slot; or, with
    several slots, at least as many answers side by side as the verifier's host has slots (an answer's calls
    spread over a pool would only queue for them, each reading its document afresh on another slot). Answers side
    by side on one slot interleave their calls there, which undoes the sharing, so they keep the pool."""
    if one_at_a_time:
        return schedule(settings)[0] == "sequential"
    if side_by_side <= 1:
        return False
    slots = host_slots(settings, settings.model_hosts()[0], settings.verifier_model).count
    return slots > 1 and side_by_side >= slots


def _checked_attempt(
    settings: Settings, llm: LLM, question: str, answer: str, passages: list[Passage], together: bool
) -> Attempt:
    record = AttemptRecord(1, False, answer, status.UNVERIFIED, None, 0, 0)
    attempt = Attempt(record)
    if not passages:
        record.status = status.NO_CONTEXTS
        return attempt
    checker = FaithfulnessChecker(llm, settings)
    granularity = settings.claim_granularity
    parts = [p for p in sentences(answer) if not is_meta_statement(p.text)]
    held = _held_sentences(checker, question, parts, passages, granularity, together)
    parts = [p for p in parts if (p.start, p.end) not in {c.answer_span for c in held}]
    claims: list[CheckedClaim] = []
    if granularity == ATOMIC or (parts and granularity == AUTO):
        # the failing sentences one to a line, as list items stand: the extractor splits them where the answer does
        decomposed = answer if granularity == ATOMIC else "\n".join(p.text for p in parts)
        with tracing.step("extract claims", sentences=len(parts)):
            extraction = checker.extract_claims(question, decomposed)
        if extraction.claims is None:
            record.error = f"claims could not be extracted: {extraction.invalid_reason}"
            return attempt
        with tracing.step("verify claims", claims=len(extraction.claims)):
            claims = checker.verify_extracted(
                extraction.claims,
                decomposed,
                passages,
                question=question,
                examples=example_text(EXTRACT_CLAIMS),
                together=together,
            )
        claims = _placed_on(claims, sentences(answer) if granularity == ATOMIC else parts)
    attempt.claims = claims if granularity == ATOMIC else _in_answer_order(held + claims)
    return attempt.score(settings.faithfulness_threshold)


def _held_sentences(
    checker: FaithfulnessChecker,
    question: str,
    parts: list[Sentence],
    passages: list[Passage],
    granularity: str,
    together: bool,
) -> list[CheckedClaim]:
    """The sentences whose own verdict stands, each one claim placed on itself (none with granularity atomic)."""
    if not checks_sentences(granularity):
        return []
    items = [(n, sentence_claim(p.text), cited_numbers(p.text)) for n, p in enumerate(parts, start=1)]
    verdicts = verify_sentences(checker, items, passages, question, granularity, together)
    held = []
    for part, verdict in zip(parts, verdicts, strict=True):
        if stands(granularity, verdict):
            verdict.answer_span = (part.start, part.end)
            held.append(verdict)
    return held


def _placed_on(claims: list[CheckedClaim], parts: list[Sentence]) -> list[CheckedClaim]:
    """Each claim with `answer_span` set to the sentence of `parts` it came from (None: not placed)."""
    for claim in claims:
        at = place_claim(claim.text, parts)
        claim.answer_span = (parts[at].start, parts[at].end) if at is not None else None
    return claims


def _in_answer_order(claims: list[CheckedClaim]) -> list[CheckedClaim]:
    """The claims in the order of their sentences (unplaced ones last, each group as it came), numbered from 1."""
    ordered = sorted(claims, key=lambda c: c.answer_span[0] if c.answer_span else float("inf"))
    for n, claim in enumerate(ordered, start=1):
        claim.claim_no = n
    return ordered
