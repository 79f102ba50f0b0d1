"""The first step of a run given earlier turns: the question it works on. A follow-up (conversation.refers_back)
is rewritten from the bounded history into a standalone question by the model; a question that stands alone, or
has no earlier turn to lean on, is used as asked without a model call; a rewrite reply that cannot be used leaves
the question as asked (never a made-up rewrite)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline import tracing
from pipeline.answering import prompts
from pipeline.answering.context import RunContext
from pipeline.answering.conversation import STEP, History, refers_back
from pipeline.answering.events import StandaloneQuestion
from pipeline.answering.question import visible_line
from pipeline.config import Settings
from pipeline.models.llm import LLM
from pipeline.models.structured import ask


@dataclass(frozen=True)
class Reading:
    question: str  # the standalone question (also recorded on the result)
    history_text: str  # the earlier turns the generation prompt shows: a follow-up's only, else ""


def read_question(ctx: RunContext, history: History) -> Reading:
    """How the question as asked (ctx.question) reads given the earlier turns (history.given: a run without any
    has no such step)."""
    llm, settings, asked = ctx.llm, ctx.settings, ctx.question
    why = refers_back(asked)
    with tracing.step(STEP, question=asked, history=history.summary(), history_tokens=history.tokens):
        if not history.turns:
            method, standalone = "no history", asked
            message = f"no earlier turn to read the question with ({history.summary()}): used as asked"
        elif why is None:
            method, standalone = "rule", asked
            message = "the question stands alone (it refers to no earlier turn): used as asked, no rewrite"
        else:
            method, standalone, message = _rewrite_followup(llm, settings, asked, history, why)
        tracing.annotate(method=method, standalone=standalone, why=why or "")
    ctx.result.standalone_question = standalone
    ctx.emit(
        StandaloneQuestion(
            message=message,
            question=asked,
            standalone=standalone,
            method=method,
            why=why,
            turns=len(history.turns),
            dropped=history.dropped,
            skipped=history.skipped,
            history_tokens=history.tokens,
        )
    )
    return Reading(standalone, history.block() if why is not None and history.turns else "")


def _rewrite_followup(llm: LLM, settings: Settings, asked: str, history: History, why: str) -> tuple[str, str, str]:
    """(method, the standalone question, the step's message) from the model's rewrite of a follow-up."""
    result = ask(
        llm,
        "standalone_question",
        settings.generator_model,
        prompts.STANDALONE_QUESTION,
        prompts.standalone_input(history.block(), asked),
    )
    rewrite = visible_line(result.value.standalone) if result.value else ""
    problem = result.invalid_reason
    if problem is None and not rewrite:
        problem = "the rewrite is empty"
    elif problem is None and len(rewrite) > settings.max_question_chars:
        problem = f"the rewrite has {len(rewrite):,} characters, more than a question may have"
    if problem:
        tracing.annotate(fallback=problem)
        return "fallback", asked, f"a follow-up ({why}), but its rewrite could not be used ({problem}): used as asked"
    if rewrite == asked:
        return "model", asked, f"a follow-up ({why}); the model found it standalone as asked"
    return "model", rewrite, f"a follow-up ({why}): rewritten from the conversation as '{rewrite}'"
