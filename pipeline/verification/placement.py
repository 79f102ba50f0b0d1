"""Which answer sentence a claim came from: by its text, else by a content-word alignment, else none.

A claim is placed on the sentence that contains it (or that it contains), else on the sentence that holds
most of its content words (at least half of them, and at least two), never on a sentence that merely
shares a word with it. A claim no sentence holds is not placed.
"""

from __future__ import annotations

from pipeline.text import Sentence, content_words, sentences, strip_citations
from pipeline.verification.claims import CheckedClaim

MIN_SHARED_WORDS = 2
MIN_COVERAGE = 0.5


def _norm(text: str) -> str:
    return " ".join(strip_citations(text).lower().replace("*", "").split()).rstrip(".!?;:")


def place_claim(claim: str, parts: list[Sentence]) -> int | None:
    """Index of the sentence of `parts` the claim came from, or None when no sentence holds it."""
    wanted = _norm(claim)
    if wanted:
        for i, part in enumerate(parts):
            if wanted in _norm(part.text) or (_norm(part.text) and _norm(part.text) in wanted):
                return i
    words = content_words(claim)
    if not words:
        return None
    best, best_key = None, None
    for i, part in enumerate(parts):
        theirs = content_words(part.text)
        shared = len(words & theirs)
        if shared < min(MIN_SHARED_WORDS, len(words)) or shared / len(words) < MIN_COVERAGE:
            continue
        key = (shared / len(words), shared / max(len(theirs), 1), -i)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


def place_claims(answer: str, claims: list[CheckedClaim]) -> list[CheckedClaim]:
    """Each claim with `answer_span` set to its answer sentence's character span (None: not placed)."""
    parts = sentences(answer)
    for claim in claims:
        at = place_claim(claim.text, parts)
        claim.answer_span = (parts[at].start, parts[at].end) if at is not None else None
    return claims
