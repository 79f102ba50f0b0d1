"""LLM-as-judge: correctness, helpfulness, faithfulness, grounding and topicality on anchored 1-5 rubrics.

A reply that does not parse after one retry is kept as invalid with its reason; no score is invented.
Every score carries the judge pin: judge model, its digest and its criterion's prompt version. The run's pin
names the version of the first three criteria (judge-v1, plus a correction set's suffix); a criterion with
its own version (JUDGE_PROMPT_VERSIONS in judge_prompts.py, beside this module) stores that one, with the same
suffix. Each criterion is a metric (metrics/judge_criteria.py) that declares its rubric prompt and the settings
the judge reads, so an evaluation records them (registry.evaluation_config).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config import Settings
from pipeline.evaluation import judge_prompts as prompts
from pipeline.models.llm import LLM
from pipeline.models.structured import ask

CRITERIA = tuple(prompts.RUBRICS)  # correctness, helpfulness, faithfulness, grounding, topicality


@dataclass
class JudgePin:
    model: str
    digest: str
    prompt_version: str

    def label(self) -> str:
        return f"{self.model}@{self.digest[:12]} / {self.prompt_version}"

    def version_for(self, criterion: str) -> str:
        """The prompt version the criterion's scores carry under this pin."""
        return criterion_version(self.prompt_version, prompts.JUDGE_PROMPT_VERSIONS[criterion])


def criterion_version(run_version: str, own_version: str) -> str:
    """A criterion's prompt version under a run's pin: its own version in place of judge-v1, keeping the
    correction set's suffix ("judge-v1+corrections-v2" -> "judge-grounding-v1+corrections-v2")."""
    base = prompts.JUDGE_PROMPT_VERSION
    if own_version == base or not run_version.startswith(base):
        return run_version
    return own_version + run_version[len(base) :]


def own_versions(criteria) -> dict[str, str]:
    """The criteria among these with a prompt version of their own (recorded in a run's configuration)."""
    return {
        c: prompts.JUDGE_PROMPT_VERSIONS[c]
        for c in criteria
        if prompts.JUDGE_PROMPT_VERSIONS[c] != prompts.JUDGE_PROMPT_VERSION
    }


def recorded_version(metric: str, run_version: str, config: dict) -> str:
    """The prompt version of a run's scores of a metric: for a judge criterion whose own version the run's
    configuration records, that version under the run's pin; otherwise the run's pin version."""
    own = (config or {}).get("judge_prompt_versions", {}).get(metric.removeprefix("judge_"))
    return criterion_version(run_version, own) if metric.startswith("judge_") and own else run_version


def rubric(criterion: str) -> tuple[str, dict[int, str]]:
    """(what the criterion asks, its anchor text for each score 5..1), as the judge's prompt states them."""
    description, anchors = prompts.RUBRICS[criterion]
    return description, dict(sorted(anchors.items(), reverse=True))


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


# the settings the judge's scores depend on: its model, and how many of people's corrections go into a prompt
OPTIONS = ("judge_model", "judge_corrections_k")


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
        common = dict(scorer_model=pin.model, scorer_digest=pin.digest, prompt_version=pin.version_for(criterion))
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
