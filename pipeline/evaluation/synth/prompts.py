"""The prompts that write candidate questions, one per kind, each with its version and a JSON schema for its reply.

The passages a candidate is written from are data under 'Context:'; the kind (and, for a pair, the entity both
passages name) go before them. Replies are parsed strictly (pipeline/models/structured.py: one retry that names the
problem); a reply that still does not parse is a dropped candidate ("unreadable reply: ..."), never a question made
up here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from pipeline.prompting import DATA_RULE, Prompt, number_passages
from pipeline.text import short_source


class SynthQuestion(BaseModel):
    question: str = Field(description="the question, as a user who has not seen the passages would ask it")
    reference: str = Field(description="the reference answer, stating only facts the passages state")


class SynthNegative(BaseModel):
    question: str = Field(description="a question on the passages' subject that the passages do not answer")
    missing: str = Field(description="what the question asks that the passages do not say")


class SynthFalsePremise(BaseModel):
    question: str = Field(description="a question that takes a false statement for granted")
    false_premise: str = Field(description="the false statement the question assumes, as one sentence")
    reference: str = Field(
        description="the facts, as the passage states them, that show the premise is false; without the false statement"
    )


COMMON = (
    "You write test questions for a question-answering system over a knowledge base, from the numbered passages "
    "under 'Context:'. Write each question as a user who has not seen the passages would ask it: name the things it "
    "is about; never refer to 'the passage', 'the text', 'the document' or 'the context', and do not copy a "
    "sentence of a passage. " + DATA_RULE + " "
)
TASKS = {
    "fact": (
        SynthQuestion,
        "Write one question that a single fact stated in passage [1] answers, and its reference answer: one or two "
        "sentences that state that fact using only what the passage says.",
    ),
    "multi_hop": (
        SynthQuestion,
        "The two passages come from different documents and both mention the term given under 'Shared:'. Write one "
        "question that can only be answered by joining a fact from passage [1] with a fact from passage [2] through "
        "that term, and its reference answer: the answer, with the fact from each passage it rests on, using only "
        "what the passages say.",
    ),
    "numeric": (
        SynthQuestion,
        "Write one question whose answer is a number, quantity, date or percentage stated in passage [1], and its "
        "reference answer: that figure with what it measures, as the passage gives it.",
    ),
    "comparison": (
        SynthQuestion,
        "Write one question that compares something passage [1] describes with something passage [2] describes "
        "(which is larger, older, faster, or how they differ), and its reference answer: the comparison, with the "
        "facts from each passage it rests on, using only what the passages say.",
    ),
    "negative": (
        SynthNegative,
        "Write one question on the subject of the passages that a user of this knowledge base might plausibly ask "
        "but that the passages do NOT answer (a detail, date, name or figure they do not state). Do not answer it; "
        "under missing, say what it asks that the passages do not say.",
    ),
    "false_premise": (
        SynthFalsePremise,
        "Write one question that takes for granted a statement that passage [1] contradicts (a changed figure, name, "
        "date or relation), so that a careful answer must correct it instead of answering along. Under "
        "false_premise, give that false statement as one sentence; under reference, the facts as the passage states "
        "them that show it is false, without repeating the false statement.",
    ),
}
VERSION = "1"
PROMPTS_BY_KIND = {
    kind: Prompt(name=f"synth_{kind}", version=VERSION, output=output, system=COMMON + task + " Reply with JSON.")
    for kind, (output, task) in TASKS.items()
}
PROMPTS = tuple(PROMPTS_BY_KIND.values())


def synth_input(kind: str, passages: list[tuple[str, str]], shared: str | None = None) -> str:
    """The user message: the kind, the entity a pair shares, then the passages as (source, text), numbered."""
    head = f"Kind: {kind}\n" + (f"Shared: {shared}\n" if shared else "")
    context = number_passages([(n, short_source(source), text) for n, (source, text) in enumerate(passages, 1)])
    return f"{head}\nContext:\n{context}"
