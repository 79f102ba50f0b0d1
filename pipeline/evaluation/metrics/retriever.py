"""Metrics of the retriever (0-1), both against the golden reference.

- context precision (retriever ranking): every retrieved chunk judged relevant or not, rank-aware
  (average precision);
- context recall (retriever/chunking): the reference's statements found in the retrieved context.
"""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.evaluation.judge import MetricScore
from pipeline.evaluation.metrics.generator import NO_CONTEXTS_WHY, NOT_APPLICABLE, without_contexts
from pipeline.evaluation.registry import MetricInput, register_metric
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.prompting import DATA_RULE, Prompt
from pipeline.text import sentences
from pipeline.verification.claims import Passage, context_block
from pipeline.verification.yes_no import ask_verifier, parse_yes_no


class ChunkRelevance(BaseModel):
    relevant: bool
    reason: str


CHUNK_RELEVANCE = Prompt(
    name="chunk_relevance",
    version="1",
    output=ChunkRelevance,
    system=(
        "Decide whether the passage under 'Context:' contains information that helps answer the question "
        "(the reference answer shows what is needed). " + DATA_RULE + " Reply with JSON."
    ),
)


def chunk_relevance_input(question: str, reference: str, chunk: str) -> str:
    return f"Question: {question}\n\nReference:\n{reference}\n\nContext:\n{chunk}"


def context_precision(
    llm: LLM, model: str, question: str, reference: str | None, passages: list[Passage]
) -> MetricScore:
    if not reference:
        return MetricScore("context_precision", None, NOT_APPLICABLE, "no reference answer to judge chunks by")
    pin = dict(scorer_model=model, scorer_digest=llm.digest(model), prompt_version=CHUNK_RELEVANCE.version)
    verdicts = []
    for passage in passages:
        reply = ask(
            llm,
            "metric_context_precision",
            model,
            CHUNK_RELEVANCE,
            chunk_relevance_input(question, reference, passage.text),
        )
        if reply.value is None:
            return MetricScore(
                "context_precision", None, "invalid", f"chunk {passage.n}: {reply.invalid_reason}", **pin
            )
        verdicts.append(reply.value.relevant)
    value = average_precision(verdicts)
    marks = ", ".join(
        f"[{p.n}] {'relevant' if v else 'not relevant'}" for p, v in zip(passages, verdicts, strict=False)
    )
    return MetricScore("context_precision", value, "ok", f"by rank: {marks}", {"relevant": verdicts}, **pin)


def average_precision(relevant: list[bool]) -> float:
    """Mean of precision@k over the ranks k that hold a relevant chunk; 0 when none is relevant."""
    hits, total = 0, 0.0
    for k, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def context_recall(llm: LLM, verifier_model: str, reference: str | None, passages: list[Passage]) -> MetricScore:
    if not reference:
        return MetricScore("context_recall", None, NOT_APPLICABLE, "no reference answer to recall")
    statements = [s.text for s in sentences(reference)]
    document = context_block(passages)
    pin = dict(scorer_model=verifier_model, scorer_digest=llm.digest(verifier_model), prompt_version="minicheck")
    found = []
    for statement in statements:
        reply = ask_verifier(llm, verifier_model, document, statement, stage="metric_context_recall")
        verdict = parse_yes_no(reply.text)
        if verdict is None:
            return MetricScore(
                "context_recall", None, "invalid", f"verifier reply {reply.text[:40]!r} is neither Yes nor No", **pin
            )
        found.append(verdict)
    missing = [s for s, ok in zip(statements, found, strict=False) if not ok]
    value = sum(found) / len(found)
    return MetricScore(
        "context_recall",
        value,
        "ok",
        f"{sum(found)} of {len(found)} reference statements found in the retrieved context"
        + (f"; missing: {'; '.join(missing)}" if missing else ""),
        {"statements": statements, "found": found},
        **pin,
    )


@register_metric(
    "context_precision", component="retriever ranking", prompts=(CHUNK_RELEVANCE,), options=("judge_model",)
)
def _context_precision(inputs: MetricInput) -> MetricScore:
    if without_contexts(inputs.result):
        return MetricScore("context_precision", None, NOT_APPLICABLE, NO_CONTEXTS_WHY)
    return context_precision(
        inputs.llm, inputs.settings.judge_model, inputs.item.question, inputs.item.reference, inputs.result.passages
    )


@register_metric(
    "context_recall", component="retriever/chunking", options=("verifier_model",)
)  # bespoke-minicheck's own format: no prompt
def _context_recall(inputs: MetricInput) -> MetricScore:
    if without_contexts(inputs.result):
        return MetricScore("context_recall", None, NOT_APPLICABLE, NO_CONTEXTS_WHY)
    return context_recall(inputs.llm, inputs.settings.verifier_model, inputs.item.reference, inputs.result.passages)
