"""The judge's criteria as metrics on 1-5, named judge_<criterion> so that the judge's faithfulness
never collides with the component metric `faithfulness`. The rubrics are in pipeline/evaluation/judge_prompts.py;
each criterion declares its rubric prompt and the judge's options. With the setting judge_repeats K > 1 each
criterion is judged K times and scored by the mean of its valid repeats (judge.judge; the evaluation records K)."""

from __future__ import annotations

from pipeline.calibration.agreement import relevant_corrections
from pipeline.evaluation.judge import CRITERIA, OPTIONS, MetricScore, judge
from pipeline.evaluation.judge_prompts import judge_prompt
from pipeline.evaluation.metrics.generator import NO_CONTEXTS_WHY, without_contexts
from pipeline.evaluation.registry import JUDGE_SCALE, MetricInput, register_metric
from pipeline.verification.claims import context_block

# The criteria that judge the answer against its contexts: without any they do not apply.
ON_CONTEXTS = ("faithfulness", "grounding")


def judge_criterion(criterion: str):
    """The compute function of one criterion; its prompt carries the people's most relevant corrections."""

    def compute(inputs: MetricInput) -> MetricScore:
        if criterion in ON_CONTEXTS and without_contexts(inputs.result):
            return MetricScore(f"judge_{criterion}", None, "not_applicable", NO_CONTEXTS_WHY)
        corrections = relevant_corrections(  # never a correction of this golden item or question
            getattr(inputs.pin, "corrections", []),
            criterion,
            inputs.item.question,
            inputs.settings.judge_corrections_k,
            item_id=inputs.item.id,
        )
        return judge(
            inputs.llm,
            inputs.settings,
            inputs.item.question,
            inputs.result.answer or "",
            context_block(inputs.result.passages),
            inputs.item.reference,
            inputs.pin,
            criteria=(criterion,),
            corrections=corrections,
            repeats=inputs.settings.judge_repeats,
        )[0]

    return compute


for _criterion in CRITERIA:
    register_metric(
        f"judge_{_criterion}",
        component="judge",
        scale=JUDGE_SCALE,
        label=f"judge {_criterion}",
        prompts=(judge_prompt(_criterion),),
        options=OPTIONS,
    )(judge_criterion(_criterion))
