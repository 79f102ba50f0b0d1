"""The records verification passes around: passages, checked claims, and the verdict vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline import prompting
from pipeline.text import short_source

SUPPORTED, CONTRADICTED, UNSUPPORTED, UNVERIFIED = "supported", "contradicted", "unsupported", "unverified"
UNDECIDED = "undecided"  # a verifier's "not mine to decide": the next verifier in the chain tries
# a claim the extractor got wrong (pipeline/verification/extraction_check.py): kept with its reason, never scored
EXTRACTION_ERROR = "extraction_error"
VERIFIER_VERDICTS = (SUPPORTED, UNSUPPORTED, UNDECIDED)


@dataclass
class Passage:
    """A retrieved chunk as numbered in the prompt."""

    n: int
    chunk_id: int
    source: str
    text: str
    score: float
    offset: int = 0  # where text starts in the chunk: a window the context budget cut (answering/budget.py)


@dataclass
class CheckedClaim:
    claim_no: int
    text: str
    verdict: str
    verifier: str
    passage: Passage | None = None
    span: tuple[int, int] | None = None
    reason: str = ""
    answer_span: tuple[int, int] | None = None  # the answer sentence the claim came from (None: not placed)
    hint: str = ""  # what an earlier verifier of the chain found without deciding (the pre-check's signal)

    @property
    def evidence(self) -> str | None:
        return self.passage.text[self.span[0] : self.span[1]] if self.passage and self.span else None


def is_failed(claim: CheckedClaim) -> bool:
    """A claim that counts against the answer: unsupported or contradicted (not supported, not undecided)."""
    return claim.verdict not in (SUPPORTED, UNVERIFIED)


def scored_claims(claims: list[CheckedClaim]) -> list[CheckedClaim]:
    """The claims an answer is scored on: all but the extraction errors."""
    return [c for c in claims if c.verdict != EXTRACTION_ERROR]


def context_block(passages: list[Passage]) -> str:
    return prompting.number_passages([(p.n, short_source(p.source), p.text) for p in passages])
