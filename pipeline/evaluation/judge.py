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
# the criteria of a conversation's turns (question_rewrite): metrics like the above, not rated by people
TURN_CRITERIA = tuple(prompts.TURN_RUBRICS)
ALL_CRITERIA = CRITERIA + TURN_CRITERIA


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
    description, anchors = {**prompts.RUBRICS, **prompts.TURN_RUBRICS}[criterion]
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
    # a judge criterion scored K > 1 times (setting judge_repeats): every repeat, as {repeat, seed, value, status,
    # explanation}; the score above is the mean of the valid ones. Empty when scored once.
    repeats: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, value: float | None, status: str, explanation: str, details: dict | None = None, **pin) -> MetricScore:
        """A metric plugin's score, without its name: the registry stamps the metric's name on it."""
        return cls("", value, status, explanation, details or {}, **pin)


# the settings the judge's scores depend on: its model, how many of people's corrections go into a prompt, and how
# many times it judges each item (an evaluation records judge_repeats only when it is not 1: registry.py)
OPTIONS = ("judge_model", "judge_corrections_k", "judge_repeats")


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
    repeats: int = 1,
    user: str | None = None,
) -> list[MetricScore]:
    """Scores for each criterion; `corrections` (people's past corrections) go into the prompt as examples.
    `repeats` K > 1: each criterion is judged K times and scored by the mean of the valid repeats (repeat_seed).
    `user`: the judge's input when it is not the question, answer, context and reference (a turn criterion's)."""
    scores = []
    for criterion in criteria:
        examples = tuple(prompts.correction_example(c) for c in corrections if c.criterion == criterion)
        common = dict(scorer_model=pin.model, scorer_digest=pin.digest, prompt_version=pin.version_for(criterion))
        asked = [
            _judged(
                llm,
                settings,
                criterion,
                prompts.judge_prompt(criterion, examples),
                user if user is not None else prompts.judge_input(question, answer, context, reference),
                repeat,
                common,
            )
            for repeat in range(1, repeats + 1)
        ]
        scores.append(asked[0] if repeats == 1 else _mean_of_repeats(asked, settings, common))
    return scores


def repeat_seed(settings: Settings, repeat: int) -> int:
    """The sampling seed of a judge repeat (1-based): the seed setting for the first, then one more each."""
    return settings.seed + repeat - 1


def _judged(llm: LLM, settings: Settings, criterion: str, prompt, user: str, repeat: int, common: dict) -> MetricScore:
    """One judging of one criterion. The first repeat is asked as a single judging is (the response cache may
    answer it); a later one bypasses the cache and sends its own seed, so it asks the model again."""
    later = repeat > 1
    result = ask(
        llm,
        f"judge_{criterion}",
        settings.judge_model,
        prompt,
        user,
        options={"seed": repeat_seed(settings, repeat)} if later else None,
        cache=not later,
    )
    if result.value is None:
        return MetricScore(
            f"judge_{criterion}", None, "invalid", result.invalid_reason, {"raw": result.raw[:500]}, **common
        )
    return MetricScore(f"judge_{criterion}", float(result.value.score), "ok", result.value.reasoning.strip(), **common)


def _mean_of_repeats(asked: list[MetricScore], settings: Settings, common: dict) -> MetricScore:
    """One criterion's score from its repeats: the mean of the valid ones (invalid when none is), with every
    repeat kept; never a score made up for an invalid repeat."""
    repeats = [
        {
            "repeat": i,
            "seed": repeat_seed(settings, i),
            "value": s.value,
            "status": s.status,
            "explanation": s.explanation,
        }
        for i, s in enumerate(asked, start=1)
    ]
    valid = [s for s in asked if s.status == "ok"]
    metric, k = asked[0].metric, len(asked)
    details = {"repeats": k, "valid_repeats": len(valid), "values": [s.value for s in asked]}
    if not valid:
        why = f"all {k} repeats invalid; the first: {asked[0].explanation}"
        return MetricScore(metric, None, "invalid", why, {**details, **asked[0].details}, repeats=repeats, **common)
    values = ", ".join("invalid" if s.value is None else f"{s.value:g}" for s in asked)
    why = f"mean of {len(valid)} valid of {k} repeats ({values}); first valid reasoning: {valid[0].explanation}"
    mean = sum(s.value for s in valid) / len(valid)
    return MetricScore(metric, mean, "ok", why, details, repeats=repeats, **common)
