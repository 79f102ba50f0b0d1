"""One candidate: its question written by the generator model from its chunks, then the gates it must pass.

Every model call goes through a model client of the candidate's own (pipeline/models/llm.py), so its calls, tokens
and cache hits are counted and stored with it. The duplicate gate is not run here: it compares the candidate with the
questions kept before it, in order (run.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import pipeline.evaluation.synth.gates as gates  # the module (not its names): a test may stand a gate down
from pipeline.answering.status import NOT_COVERED
from pipeline.config import Settings
from pipeline.evaluation.synth.prompts import PROMPTS_BY_KIND, synth_input
from pipeline.evaluation.synth.sampling import Slot
from pipeline.knowledge.similarity_scale import SimilarityScale
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.text import one_line
from pipeline.verification.claims import Passage
from pipeline.verification.faithfulness import FaithfulnessChecker
from store.db import Database
from store.records import CacheEntry, Chunk, LLMCallRecord
from store.synth import DROPPED, KEPT, CandidateRow


@dataclass
class Written:
    """A candidate as its gates left it, with the calls it cost (not yet stored)."""

    row: CandidateRow
    vector: np.ndarray | None = None  # the question's unit embedding, for the duplicate gate (kept so far only)
    calls: list[LLMCallRecord] = field(default_factory=list)
    cache_entries: list[CacheEntry] = field(default_factory=list)

    def drop(self, gate: str, reason: str) -> Written:
        self.row.status, self.row.gate, self.row.reason = DROPPED, gate, reason
        return self


@dataclass
class Context:
    """What every candidate of a job shares: the settings, the store, and the scales measured once per job."""

    settings: Settings
    db: Database
    retrieval_scale: SimilarityScale | None  # chunks vs questions, for the negative gate's retrieval floor


def passages_of(slot: Slot, chunks: dict[int, Chunk]) -> list[Passage]:
    return [Passage(n, cid, chunks[cid].source, chunks[cid].text, 0.0) for n, cid in enumerate(slot.chunk_ids, 1)]


def write(context: Context, slot: Slot, chunks: dict[int, Chunk]) -> Written:
    """The candidate of this slot, kept or dropped by the gates (but the duplicate gate), with its calls."""
    llm = LLM(context.settings, context.db, origin="synth")
    try:
        written = _write(context, llm, slot, chunks)
    finally:
        calls, entries = llm.take_calls(), llm.take_cache_entries()
    written.calls, written.cache_entries = calls, entries
    made = [c for c in calls if not c.cache_hit]
    row = written.row
    row.calls, row.cache_hits = len(made), len(calls) - len(made)
    row.prompt_tokens = sum(c.prompt_tokens or 0 for c in made)
    row.completion_tokens = sum(c.completion_tokens or 0 for c in made)
    return written


def _write(context: Context, llm: LLM, slot: Slot, chunks: dict[int, Chunk]) -> Written:
    settings = context.settings
    prompt = PROMPTS_BY_KIND[slot.kind]
    model = settings.generator_model
    row = CandidateRow(
        slot.position, slot.kind, list(slot.chunk_ids), None, None, KEPT, None, None, model, prompt.name, prompt.version
    )
    written = Written(row)
    row.details = {"shared": slot.shared} if slot.shared else {}
    gone = [cid for cid in slot.chunk_ids if cid not in chunks]
    if gone:
        return written.drop("chunks", f"chunk {', '.join(map(str, gone))} is no longer in the knowledge base")
    passages = passages_of(slot, chunks)
    row.details["sources"] = [p.source for p in passages]
    row.model_digest = llm.digest(model)
    reply = ask(
        llm, prompt.name, model, prompt, synth_input(slot.kind, [(p.source, p.text) for p in passages], slot.shared)
    )
    if reply.value is None:
        return written.drop("unreadable", f"unreadable reply: {reply.invalid_reason}")
    value = reply.value
    row.question = one_line(value.question)
    row.reference = NOT_COVERED if slot.kind == "negative" else one_line(value.reference)
    if slot.kind == "negative":
        row.details["missing"] = one_line(value.missing)
    if slot.kind == "false_premise":
        row.details["false_premise"] = one_line(value.false_premise)
    if not row.question or not row.reference:
        return written.drop("unreadable", "unreadable reply: the question or its reference is empty")

    row.question, verdict = gates.source_gate(row.question)
    if verdict.dropped:
        return written.drop("source", verdict.reason)
    if verdict.note:
        row.gate, row.note = "source", verdict.note
    verdict = gates.copy_gate(row.question, passages)
    if verdict.dropped:
        return written.drop("copy", verdict.reason)
    written.vector = gates.unit(llm.embed_query(row.question))

    checker = FaithfulnessChecker(llm, settings, classify=False)
    if slot.kind != "negative":
        verdict = gates.reference_gate(checker, row.question, row.reference, passages, slot.kind)
        row.details["reference_check"] = verdict.details or {}
        if verdict.dropped:
            return written.drop("reference", verdict.reason)
    if slot.kind == "false_premise":
        verdict = gates.premise_gate(checker, row.question, row.details["false_premise"], passages)
        if verdict.dropped:
            return written.drop("premise", verdict.reason)
        row.details["premise_check"] = verdict.note
    if slot.kind == "negative":
        verdict = gates.negative_gate(llm, settings, context.db, row.question, context.retrieval_scale)
        if verdict.dropped:
            return written.drop("negative", verdict.reason)
        row.details["negative_check"] = verdict.note
    return written
