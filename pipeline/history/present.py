"""Claims placed in the answer they came from, for any screen to mark: each sentence with its worst verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.text import content_words, sentences
from pipeline.verification.faithfulness import CheckedClaim

VERDICT_RANK = {"contradicted": 0, "unsupported": 1, "unverified": 2, "supported": 3}


@dataclass
class Segment:
    text: str
    verdict: str | None = None
    claim_nos: list[int] = field(default_factory=list)


def annotate(answer: str, claims: list[CheckedClaim]) -> list[Segment]:
    """The answer split into sentences, each with the worst verdict of the claims drawn from it.

    Claims are rephrased by the extractor, so each claim is placed on the answer sentence that shares
    the most content words with it.
    """
    parts = sentences(answer)
    if not parts:
        return [Segment(answer)]
    segments = [Segment(p.text) for p in parts]
    for claim in claims:
        words = content_words(claim.text)
        scores = [len(words & content_words(p.text)) for p in parts]
        best = max(range(len(parts)), key=lambda i: scores[i])
        if scores[best] == 0:
            continue
        segment = segments[best]
        segment.claim_nos.append(claim.claim_no)
        if segment.verdict is None or VERDICT_RANK[claim.verdict] < VERDICT_RANK[segment.verdict]:
            segment.verdict = claim.verdict
    return segments
