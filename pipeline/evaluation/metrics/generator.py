"""Metrics of the generator (0-1).

- faithfulness (generator): supported claims / claims, from the verified run;
- answer relevancy (generator/prompt): questions generated back from the answer, compared with the
  question by embedding similarity on the embedding model's calibrated scale (0: a typical unrelated pair;
  pipeline/knowledge/similarity_scale.py), negatives as 0; an evasive answer scores 0.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from pipeline.answering import status
from pipeline.answering.events import AnswerResult
from pipeline.evaluation.judge import MetricScore
from pipeline.evaluation.registry import MetricInput, register_metric
from pipeline.knowledge.similarity_scale import SimilarityScale
from pipeline.knowledge.similarity_scale import current as current_scale
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.prompting import Prompt
from pipeline.verification.claims import scored_claims

NOT_APPLICABLE = "not_applicable"
NO_CONTEXTS_WHY = "the answer was given without contexts: nothing to check it against"


def without_contexts(result: AnswerResult) -> bool:
    """An imported answer given without contexts (a run of ours that retrieved nothing is scored as such)."""
    return result.status == status.NO_CONTEXTS


class GeneratedQuestions(BaseModel):
    questions: list[str] = Field(description="questions that the answer answers")
    noncommittal: bool = Field(description="true if the answer is evasive, vague or refuses")


GENERATE_QUESTIONS = Prompt(
    name="answer_questions",
    version="1",
    output=GeneratedQuestions,
    system=(
        "Write three different questions that the given answer answers, each a single sentence. Set "
        "noncommittal to true if the answer is evasive, vague or does not commit to an answer. Reply "
        "with JSON."
    ),
)


def answer_questions_input(answer: str) -> str:
    return f"Answer:\n{answer}"


def faithfulness(result: AnswerResult) -> MetricScore:
    claims = scored_claims(result.final_claims)
    if result.faithfulness is None:
        status = "invalid" if result.status == "unverified" else NOT_APPLICABLE
        why = {
            "abstained": "the answer abstains, so it makes no claims",
            "no_claims": "the answer makes no checkable claims",
            "unverified": "the claims could not be verified",
            "no_contexts": NO_CONTEXTS_WHY,
        }.get(result.status, result.status)
        return MetricScore("faithfulness", None, status, why)
    supported = sum(c.verdict == "supported" for c in claims)
    failed = [c.text for c in claims if c.verdict in ("contradicted", "unsupported")]
    return MetricScore(
        "faithfulness",
        result.faithfulness,
        "ok",
        f"{supported} of {len(claims)} claims supported" + (f"; not supported: {'; '.join(failed)}" if failed else ""),
        # claims: the claims with a verdict (the score's denominator); regression weighs items by it
        {"failed_claims": failed, "claims": sum(c.verdict != "unverified" for c in claims), "supported": supported},
    )


def answer_relevancy(
    llm: LLM, model: str, question: str, result: AnswerResult, scale: SimilarityScale | None = None
) -> MetricScore:
    """Without a scale the cosines are read raw."""
    if result.status == "abstained":
        return MetricScore("answer_relevancy", None, NOT_APPLICABLE, "the answer abstains")
    reply = ask(
        llm,
        "metric_answer_relevancy",
        model,
        GENERATE_QUESTIONS,
        answer_questions_input(result.answer or ""),
    )
    pin = dict(scorer_model=model, scorer_digest=llm.digest(model), prompt_version=GENERATE_QUESTIONS.version)
    if reply.value is None:
        return MetricScore("answer_relevancy", None, "invalid", reply.invalid_reason, **pin)
    generated = [q.strip() for q in reply.value.questions if q.strip()][:3]
    if reply.value.noncommittal:
        return MetricScore("answer_relevancy", 0.0, "ok", "the answer is noncommittal", {"questions": generated}, **pin)
    if not generated:
        return MetricScore("answer_relevancy", None, "invalid", "no questions were generated from the answer", **pin)
    target = _unit(llm.embed_query(question))
    cosines = [float(_unit(llm.embed_query(q)) @ target) for q in generated]
    relative = scale.relative if scale is not None else float
    similarities = [max(0.0, relative(c)) for c in cosines]
    value = float(np.mean(similarities))
    listed = "; ".join(f"{q} ({s:.2f})" for q, s in zip(generated, similarities, strict=False))
    scaled = f" (calibrated: {scale.raw_note()})" if scale is not None and scale.measured else ""
    return MetricScore(
        "answer_relevancy",
        value,
        "ok",
        f"questions the answer answers{scaled}: {listed}",
        {"questions": generated, "similarities": similarities, "cosines": cosines},
        **pin,
    )


@register_metric("faithfulness", component="generator")  # read from the verified run: no prompt, no option
def _faithfulness(inputs: MetricInput) -> MetricScore:
    return faithfulness(inputs.result)


@register_metric(
    "answer_relevancy",
    component="generator/prompt",
    prompts=(GENERATE_QUESTIONS,),
    options=("judge_model", "embed_model"),
)
def _answer_relevancy(inputs: MetricInput) -> MetricScore:
    scale = inputs.scale
    if scale is None and inputs.llm.db is not None:  # the question's scale was not handed on: the store's
        scale = current_scale(inputs.settings, inputs.llm.db, "evaluation", inputs.llm)
    return answer_relevancy(inputs.llm, inputs.settings.judge_model, inputs.item.question, inputs.result, scale)


def _unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = np.linalg.norm(array)
    return array / norm if norm else array
