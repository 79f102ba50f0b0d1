"""Component metrics that say which part of the pipeline failed (all on a 0-1 scale).

- faithfulness (generator): supported claims / claims, from the verified run;
- answer relevancy (generator/prompt): questions generated back from the answer, compared with the
  question by embedding similarity; an evasive answer scores 0;
- context precision (retriever ranking): every retrieved chunk judged relevant or not, rank-aware
  (average precision);
- context recall (retriever/chunking): the reference's statements found in the retrieved context.
"""
from __future__ import annotations

import numpy as np

from pipeline.answering import prompts
from pipeline.answering.events import AnswerResult
from pipeline.verification.faithfulness import Passage, ask_verifier, context_block, parse_yes_no
from pipeline.evaluation.judge import MetricScore
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.text import sentences

NOT_APPLICABLE = "not_applicable"


def faithfulness(result: AnswerResult) -> MetricScore:
    claims = result.final_claims
    if result.faithfulness is None:
        status = "invalid" if result.status == "unverified" else NOT_APPLICABLE
        why = {"abstained": "the answer abstains, so it makes no claims", "no_claims": "the answer makes no "
               "checkable claims", "unverified": "the claims could not be verified"}.get(result.status, result.status)
        return MetricScore("faithfulness", None, status, why)
    supported = sum(c.verdict == "supported" for c in claims)
    failed = [c.text for c in claims if c.verdict in ("contradicted", "unsupported")]
    return MetricScore("faithfulness", result.faithfulness, "ok",
                       f"{supported} of {len(claims)} claims supported" +
                       (f"; not supported: {'; '.join(failed)}" if failed else ""), {"failed_claims": failed})


def answer_relevancy(llm: LLM, model: str, question: str, result: AnswerResult) -> MetricScore:
    if result.status == "abstained":
        return MetricScore("answer_relevancy", None, NOT_APPLICABLE, "the answer abstains")
    reply = ask(llm, "metric_answer_relevancy", model, prompts.GENERATE_QUESTIONS,
                prompts.answer_questions_input(result.answer or ""))
    pin = dict(scorer_model=model, scorer_digest=llm.digest(model), prompt_version=prompts.GENERATE_QUESTIONS.version)
    if reply.value is None:
        return MetricScore("answer_relevancy", None, "invalid", reply.invalid_reason, **pin)
    generated = [q.strip() for q in reply.value.questions if q.strip()][:3]
    if reply.value.noncommittal:
        return MetricScore("answer_relevancy", 0.0, "ok", "the answer is noncommittal",
                           {"questions": generated}, **pin)
    if not generated:
        return MetricScore("answer_relevancy", None, "invalid", "no questions were generated from the answer", **pin)
    target = _unit(llm.embed_query(question))
    similarities = [max(0.0, float(_unit(llm.embed_query(q)) @ target)) for q in generated]
    value = float(np.mean(similarities))
    listed = "; ".join(f"{q} ({s:.2f})" for q, s in zip(generated, similarities))
    return MetricScore("answer_relevancy", value, "ok", f"questions the answer answers: {listed}",
                       {"questions": generated, "similarities": similarities}, **pin)


def context_precision(llm: LLM, model: str, question: str, reference: str | None,
                      passages: list[Passage]) -> MetricScore:
    if not reference:
        return MetricScore("context_precision", None, NOT_APPLICABLE, "no reference answer to judge chunks by")
    pin = dict(scorer_model=model, scorer_digest=llm.digest(model), prompt_version=prompts.CHUNK_RELEVANCE.version)
    verdicts = []
    for passage in passages:
        reply = ask(llm, "metric_context_precision", model, prompts.CHUNK_RELEVANCE,
                    prompts.chunk_relevance_input(question, reference, passage.text))
        if reply.value is None:
            return MetricScore("context_precision", None, "invalid",
                               f"chunk {passage.n}: {reply.invalid_reason}", **pin)
        verdicts.append(reply.value.relevant)
    value = average_precision(verdicts)
    marks = ", ".join(f"[{p.n}] {'relevant' if v else 'not relevant'}" for p, v in zip(passages, verdicts))
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
            return MetricScore("context_recall", None, "invalid",
                               f"verifier reply {reply.text[:40]!r} is neither Yes nor No", **pin)
        found.append(verdict)
    missing = [s for s, ok in zip(statements, found) if not ok]
    value = sum(found) / len(found)
    return MetricScore("context_recall", value, "ok",
                       f"{sum(found)} of {len(found)} reference statements found in the retrieved context" +
                       (f"; missing: {'; '.join(missing)}" if missing else ""),
                       {"statements": statements, "found": found}, **pin)


def _unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = np.linalg.norm(array)
    return array / norm if norm else array
