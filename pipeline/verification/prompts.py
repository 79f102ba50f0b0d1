"""The faithfulness checker's prompts (pipeline/verification/faithfulness.py declares them): claims from an
answer sentence by sentence while it streams, or from a whole answer at once (on its own, or after the generation's
context on one slot), and the contradicted-or-unsupported step on a claim a verifier rejected. A verifier's own
prompt lives in its module under verifiers/."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pipeline.prompting import CONTEXT_SYSTEM, Prompt


class ClaimList(BaseModel):
    claims: list[str] = Field(description="atomic, self-contained factual claims")


class NliVerdict(BaseModel):
    verdict: Literal["contradicted", "unsupported"]
    quote: str = Field(description="the exact sentence of the context that contradicts the claim, or empty")
    reason: str


# What every claim extraction asks of a claim, and what it leaves out.
CLAIM_FORM = (
    "Each claim is one short, self-contained sentence that can be checked on its own: replace pronouns with the "
    "names they refer to, drop citation markers like [1]."
)
LEAVE_OUT = (
    "Leave out questions, greetings and statements that the knowledge base does not cover the question. Reply with "
    "JSON."
)

EXTRACT_CLAIMS = Prompt(
    name="extract_claims",
    version="1",
    output=ClaimList,
    system=f"Split the answer into atomic factual claims. {CLAIM_FORM} {LEAVE_OUT}",
    examples=(
        'Answer: "BERT was released by Google in 2018 [1]. It has 340 million parameters [2]."\n'
        '{"claims": ["BERT was released by Google in 2018.", "BERT has 340 million parameters."]}',
    ),
)

EXTRACT_SENTENCE_CLAIMS = Prompt(
    name="extract_sentence_claims",
    version="1",
    output=ClaimList,
    system=(
        "Split the sentence under 'Answer:' into atomic factual claims. Each claim is one short, "
        "self-contained sentence that can be checked on its own: replace pronouns with the names they "
        "refer to (the question and the earlier sentence say who or what they are), drop citation markers "
        f"like [1]. {LEAVE_OUT}"
    ),
    examples=(
        'Earlier sentence: "BERT was released by Google in 2018 [1]."\nAnswer: "It has 340 million parameters '
        'and 24 layers [2]."\n{"claims": ["BERT has 340 million parameters.", "BERT has 24 layers."]}',
    ),
)

# The whole answer's claims on one slot, after the generation's own context and question: the server's prompt
# cache holds that prefix from the generation, and the contradicted-or-unsupported step that follows shares it.
EXTRACT_CLAIMS_IN_CONTEXT = Prompt(
    name="extract_claims_in_context",
    version="1",
    output=ClaimList,
    system=CONTEXT_SYSTEM,
    examples=EXTRACT_CLAIMS.examples,
    task=(
        f"Task: Split the text under 'Answer:' into atomic factual claims. {CLAIM_FORM} List every claim the answer "
        f"makes, whether the passages support it or not: they are checked later. {LEAVE_OUT}"
    ),
)

NLI_JUDGE = Prompt(
    name="nli_judge",
    version="2",
    output=NliVerdict,
    system=CONTEXT_SYSTEM,
    task=(
        "Task: A fact checker found that the claim below, under 'Claim:', is not supported by the context. "
        "Decide whether the context contradicts the claim (it states something incompatible, such as a different "
        "number, date or name) or merely does not mention it (unsupported). For contradicted, quote the one "
        "sentence of the context that contradicts the claim, copied exactly. For unsupported, quote nothing. "
        "Reply with JSON."
    ),
)


def claims_input(question: str, answer: str) -> str:
    return f"Question: {question}\n\nAnswer:\n{answer}"


def sentence_claims_input(question: str, sentence: str, earlier: str = "") -> str:
    """One sentence of an answer, with the sentence before it for what its pronouns refer to."""
    before = f"Earlier sentence:\n{earlier}\n\n" if earlier else ""
    return f"Question: {question}\n\n{before}Answer:\n{sentence}"


def claims_in_context_input(lead: str, answer: str) -> str:
    """`lead`: the generation's user message up to its question (generate_input without feedback)."""
    return f"{lead}\n\nAnswer:\n{answer}"


def nli_input(context: str) -> str:
    return f"Context:\n{context}"


def nli_claim(claim: str) -> str:
    """What follows NLI_JUDGE's task: consecutive calls on one context share all before it."""
    return f"Claim: {claim}"
