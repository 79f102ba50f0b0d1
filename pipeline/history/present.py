"""Claims placed in the answer they came from, for any screen to mark: each sentence with its worst verdict.

A claim is placed on the answer sentence it came from: the span it carries (`answer_span`, set where the
claim is made), else the sentence that contains it, else the sentence that holds most of its content words
(at least half of them, and two or more). A claim that matches no sentence is listed as not placed: it is
never pinned on a sentence that merely shares a word with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.text import sentences
from pipeline.verification.faithfulness import SUPPORTED, CheckedClaim
from pipeline.verification.placement import place_claim

VERDICT_RANK = {"contradicted": 0, "unsupported": 1, "unverified": 2, "supported": 3}


@dataclass
class Segment:
    text: str
    verdict: str | None = None
    claim_nos: list[int] = field(default_factory=list)
    start: int = 0
    end: int = 0


@dataclass
class Placement:
    segments: list[Segment]
    unplaced: list[CheckedClaim]

    @property
    def unplaced_problems(self) -> list[CheckedClaim]:
        """Claims not placed whose verdict is not supported: the answer must not look all green."""
        return [c for c in self.unplaced if c.verdict != SUPPORTED]


def placement(answer: str, claims: list[CheckedClaim]) -> Placement:
    """The answer split into sentences, each with the worst verdict of the claims placed on it, and the
    claims that could not be placed."""
    parts = sentences(answer)
    if not parts:
        return Placement([Segment(answer, start=0, end=len(answer))], [c for c in claims])
    segments = [Segment(p.text, start=p.start, end=p.end) for p in parts]
    by_span = {(p.start, p.end): i for i, p in enumerate(parts)}
    unplaced = []
    for claim in claims:
        span = getattr(claim, "answer_span", None)
        at = by_span.get(tuple(span)) if span else None
        if at is None:
            at = place_claim(claim.text, parts)
        if at is None:
            unplaced.append(claim)
            continue
        segment = segments[at]
        segment.claim_nos.append(claim.claim_no)
        if segment.verdict is None or VERDICT_RANK[claim.verdict] < VERDICT_RANK[segment.verdict]:
            segment.verdict = claim.verdict
    return Placement(segments, unplaced)


def annotate(answer: str, claims: list[CheckedClaim]) -> list[Segment]:
    return placement(answer, claims).segments
