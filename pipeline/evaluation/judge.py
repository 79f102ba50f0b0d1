"""LLM-as-judge: correctness, helpfulness and faithfulness on anchored 1-5 rubrics.

A reply that does not parse after one retry is kept as invalid with its reason; no score is invented.
Every score carries the judge pin: judge model, its digest and the prompt version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.answering import prompts
from pipeline.config import Settings
from pipeline.models.llm import LLM
from pipeline.models.structured import ask

CRITERIA = ("correctness", "helpfulness", "faithfulness")


@dataclass
class JudgePin:
    model: str
    digest: str
    prompt_version: str

    def label(self) -> str:
        return f"{self.model}@{self.digest[:12]} / {self.prompt_version}"


@dataclass
class MetricScore:
    """One metric of one item: a value, or a status that says why there is none."""

    metric: str
    value: float | None
    status: str  # ok | invalid | not_applicable
    explanation: str
    details: dict = field(default_factory=dict)
    scorer_model: str | None = None
    scorer_digest: str | None = None
    prompt_version: str | None = None


def judge_pin(llm: LLM, settings: Settings) -> JudgePin:
    return JudgePin(settings.judge_model, llm.digest(settings.judge_model), prompts.JUDGE_PROMPT_VERSION)


def judge(
    llm: LLM,
    settings: Settings,
    question: str,
    answer: str,
    context: str,
    reference: str | None,
    pin: JudgePin,
    criteria=CRITERIA,
    corrections=(),
) -> list[MetricScore]:
    """Scores for each criterion; `corrections` (people's past corrections) go into the prompt as examples."""
    scores = []
    for criterion in criteria:
        examples = tuple(prompts.correction_example(c) for c in corrections if c.criterion == criterion)
        result = ask(
            llm,
            f"judge_{criterion}",
            settings.judge_model,
            prompts.judge_prompt(criterion, examples),
            prompts.judge_input(question, answer, context, reference),
        )
        common = dict(scorer_model=pin.model, scorer_digest=pin.digest, prompt_version=pin.prompt_version)
        if result.value is None:
            scores.append(
                MetricScore(
                    f"judge_{criterion}", None, "invalid", result.invalid_reason, {"raw": result.raw[:500]}, **common
                )
            )
        else:
            scores.append(
                MetricScore(
                    f"judge_{criterion}", float(result.value.score), "ok", result.value.reasoning.strip(), **common
                )
            )
    return scores
