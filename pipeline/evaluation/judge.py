"""LLM-as-judge: correctness, helpfulness, faithfulness, grounding and topicality on anchored 1-5 rubrics.

A reply that does not parse after one retry is kept as invalid with its reason; no score is invented.
Every score carries the judge pin: judge model, its digest and its criterion's prompt version. The run's pin
names the version of the first three criteria (judge-v1, plus a correction set's suffix); a criterion with
its own version (JUDGE_PROMPT_VERSIONS in judge_prompts.py, beside this module) stores that one, with the same
suffix. Each criterion is a metric (metrics/judge_criteria.py) that declares its rubric prompt and the settings
the judge reads, so an evaluation records them (registry.evaluation_config).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    # criterion -> the aligned version its judge uses (store/judge_versions.py: version, clarification, examples);
    # each one is named in prompt_version ("+aligned-correctness-v2"), so it is part of the metric's identity
    aligned: dict = field(default_factory=dict)

    def label(self) -> str:
        return f"{self.model}@{self.digest[:12]} / {self.prompt_version}"

    def version_for(self, criterion: str) -> str:
        """The prompt version the criterion's scores carry under this pin (naming its own aligned version only)."""
        return criterion_version(self.prompt_version, prompts.JUDGE_PROMPT_VERSIONS[criterion], criterion)


ALIGNED = "+aligned-"


def aligned_suffix(aligned: dict) -> str:
    """The part of a run's prompt version that names the aligned versions its judge used, in criterion order."""
    return "".join(f"{ALIGNED}{c}-v{aligned[c]['version']}" for c in ALL_CRITERIA if c in aligned)


def with_aligned(pin: JudgePin, aligned: dict) -> JudgePin:
    """The pin of a judge that uses these aligned versions (criterion -> version row): a new prompt version."""
    if not aligned:
        return pin
    return replace(pin, prompt_version=pin.prompt_version + aligned_suffix(aligned), aligned=dict(aligned))


def _only_own_aligned(version: str, criterion: str | None) -> str:
    """A run's prompt version with the aligned parts of other criteria left out (a criterion's identity does not
    change when another criterion is aligned)."""
    head, *parts = version.split(ALIGNED)
    own = [p for p in parts if criterion is not None and p.rsplit("-v", 1)[0] == criterion]
    return head + "".join(ALIGNED + p for p in own)


def criterion_version(run_version: str, own_version: str, criterion: str | None = None) -> str:
    """A criterion's prompt version under a run's pin: its own version in place of judge-v1, keeping the
    correction set's suffix ("judge-v1+corrections-v2" -> "judge-grounding-v1+corrections-v2") and its own aligned
    version's, not another criterion's."""
    run_version = _only_own_aligned(run_version, criterion) if ALIGNED in run_version else run_version
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
    criterion = metric.removeprefix("judge_")
    own = (config or {}).get("judge_prompt_versions", {}).get(criterion)
    if metric.startswith("judge_") and own:
        return criterion_version(run_version, own, criterion)
    if ALIGNED in run_version:  # a metric other than this criterion's judge is not named by its aligned version
        return _only_own_aligned(run_version, criterion if metric.startswith("judge_") else None)
    return run_version


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
# many times it judges each item and at what temperature (an evaluation records judge_repeats and
# judge_repeat_temperature only when judge_repeats is not 1: registry.py)
OPTIONS = ("judge_model", "judge_corrections_k", "judge_repeats", "judge_repeat_temperature")


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
        aligned = pin.aligned.get(criterion) or {}
        examples = tuple(prompts.aligned_example(e) for e in aligned.get("examples", ()))
        examples += tuple(prompts.correction_example(c) for c in corrections if c.criterion == criterion)
        common = dict(scorer_model=pin.model, scorer_digest=pin.digest, prompt_version=pin.version_for(criterion))
        asked = [
            _judged(
                llm,
                settings,
                criterion,
                prompts.judge_prompt(criterion, examples, aligned.get("clarification") or ""),
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


def repeat_options(settings: Settings, repeat: int) -> dict:
    """The sampling options of a judge repeat after the first: its seed and the repeats' own temperature
    (judge_repeat_temperature), so that repeats sample the judge's spread."""
    return {"seed": repeat_seed(settings, repeat), "temperature": settings.judge_repeat_temperature}


def _judged(llm: LLM, settings: Settings, criterion: str, prompt, user: str, repeat: int, common: dict) -> MetricScore:
    """One judging of one criterion. The first repeat is asked as a single judging is (the models' temperature; the
    response cache may answer it); a later one bypasses the cache and is sampled at the repeats' own temperature
    with its own seed, so it asks the model again and shows how far the judge's score moves."""
    later = repeat > 1
    result = ask(
        llm,
        f"judge_{criterion}",
        settings.judge_model,
        prompt,
        user,
        options=repeat_options(settings, repeat) if later else None,
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
