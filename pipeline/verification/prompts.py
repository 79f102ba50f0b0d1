"""The faithfulness checker's prompts (pipeline/verification/faithfulness.py declares them): claims from an
answer sentence by sentence while it streams, or from a whole answer at once, and the contradicted-or-unsupported
step on a claim a verifier rejected. A verifier's own prompt lives in its module under verifiers/."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pipeline.answering.prompts import DATA_RULE, Prompt


class ClaimList(BaseModel):
    claims: list[str] = Field(description="atomic, self-contained factual claims")


class NliVerdict(BaseModel):
    verdict: Literal["contradicted", "unsupported"]
    quote: str = Field(description="the exact sentence of the context that contradicts the claim, or empty")
    reason: str


EXTRACT_CLAIMS = Prompt(
    name="extract_claims",
    version="1",
    output=ClaimList,
    system=(
        "Split the answer into atomic factual claims. Each claim is one short, self-contained sentence "
        "that can be checked on its own: replace pronouns with the names they refer to, drop citation "
        "markers like [1]. Leave out questions, greetings and statements that the knowledge base does "
        "not cover the question. Reply with JSON."
    ),
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
        "like [1]. Leave out questions, greetings and statements that the knowledge base does not cover the "
        "question. Reply with JSON."
    ),
    examples=(
        'Earlier sentence: "BERT was released by Google in 2018 [1]."\nAnswer: "It has 340 million parameters '
        'and 24 layers [2]."\n{"claims": ["BERT has 340 million parameters.", "BERT has 24 layers."]}',
    ),
)

NLI_JUDGE = Prompt(
    name="nli_judge",
    version="1",
    output=NliVerdict,
    system=(
        "A fact checker found that the claim is not supported by the context. Decide whether the "
        "context contradicts the claim (it states something incompatible, such as a different number, "
        "date or name) or merely does not mention it (unsupported). For contradicted, quote the one "
        "sentence of the context that contradicts the claim, copied exactly. For unsupported, quote "
        "nothing. " + DATA_RULE + " Reply with JSON."
    ),
)


def claims_input(question: str, answer: str) -> str:
    return f"Question: {question}\n\nAnswer:\n{answer}"


def sentence_claims_input(question: str, sentence: str, earlier: str = "") -> str:
    """One sentence of an answer, with the sentence before it for what its pronouns refer to."""
    before = f"Earlier sentence:\n{earlier}\n\n" if earlier else ""
    return f"Question: {question}\n\n{before}Answer:\n{sentence}"


def nli_input(context: str, claim: str) -> str:
    return f"Context:\n{context}\n\nClaim: {claim}"
