"""The judge's criteria as metrics on 1-5, named judge_<criterion> so that the judge's faithfulness
never collides with the component metric `faithfulness`. The rubrics are in pipeline/evaluation/judge_prompts.py;
each criterion declares its rubric prompt and the judge's options. With the setting judge_repeats K > 1 each
criterion is judged K times and scored by the mean of its valid repeats (judge.judge; the evaluation records K).

judge_question_rewrite scores a turn of a conversation: did the standalone question retrieval used keep the user's
meaning, given the earlier turns? It applies only where a question was rewritten: not to a first turn or a single
question (no history), not to a question the rule used as asked (conversation.refers_back found no reference to an
earlier turn), not to an imported answer (its pipeline's rewrite is not known here)."""

from __future__ import annotations

from pipeline.answering.conversation import bounded, refers_back
from pipeline.evaluation.corrections import relevant_corrections
from pipeline.evaluation.judge import CRITERIA, OPTIONS, MetricScore, judge
from pipeline.evaluation.judge_prompts import judge_prompt, rewrite_input
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


REWRITE = "question_rewrite"


def rewrite_not_applicable(inputs: MetricInput) -> str | None:
    """Why judge_question_rewrite does not apply to this item (None: it does)."""
    if inputs.item.given:
        return "an imported answer: the standalone question its pipeline searched with (if any) is not known here"
    if not inputs.history:
        return "no earlier turn: the question was read as it stands (a first turn, or a single question)"
    if refers_back(inputs.result.question) is None:
        return "the question stands alone (it refers to no earlier turn): the rule used it as asked, no rewrite"
    return None


@register_metric(
    f"judge_{REWRITE}",
    component="judge",
    scale=JUDGE_SCALE,
    label="judge rewrite",
    prompts=(judge_prompt(REWRITE),),
    options=(*OPTIONS, "conversation_history_tokens"),
    turns_only=True,
)
def judge_question_rewrite(inputs: MetricInput) -> MetricScore:
    """Did the standalone question keep the user's meaning, given the earlier turns (those the rewrite read, within
    conversation_history_tokens)? Judged on an anchored 1-5 rubric; not applicable where nothing was rewritten."""
    why = rewrite_not_applicable(inputs)
    if why is not None:
        return MetricScore(f"judge_{REWRITE}", None, "not_applicable", why)
    result = inputs.result
    history = bounded(inputs.history, inputs.settings.conversation_history_tokens).block()
    return judge(
        inputs.llm,
        inputs.settings,
        result.question,
        "",
        "",
        None,
        inputs.pin,
        criteria=(REWRITE,),
        repeats=inputs.settings.judge_repeats,
        user=rewrite_input(history, result.question, result.standalone_question or result.question),
    )[0]
