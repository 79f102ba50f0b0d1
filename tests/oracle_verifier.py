"""An oracle verifier for tests: it knows the answer being checked and its labelled hallucination spans (RAGTruth's
human labels), and says No exactly for a claim whose text overlaps one of them, Yes for any other.

It registers as the built-in verifiers do (`@register_verifier`), under the name "oracle"; a test sets the record
being checked with `reading(answer, spans)` and names it in `verifier_chain`. A claim is found in the answer by its
text (citation markers, case, white space and a final stop aside), else on the answer sentence that holds it
(pipeline.verification.placement); a claim found nowhere is left undecided, never guessed.
"""

from __future__ import annotations

from contextlib import contextmanager

from pipeline.text import find_span, sentences, strip_citations
from pipeline.verification.base import Verifier
from pipeline.verification.claims import SUPPORTED, UNDECIDED, UNSUPPORTED, CheckedClaim, Passage
from pipeline.verification.placement import place_claim
from pipeline.verification.registry import register_verifier, unregister_verifier

NAME = "oracle"
_record: dict = {"answer": "", "spans": ()}


@contextmanager
def reading(answer: str, spans):
    """Check claims against this answer's labelled spans ([{start, end}, ...] or [(start, end)])."""
    _record["answer"] = answer
    _record["spans"] = tuple((s["start"], s["end"]) if isinstance(s, dict) else tuple(s) for s in spans)
    try:
        yield
    finally:
        _record["answer"], _record["spans"] = "", ()


def located(claim: str, answer: str) -> tuple[int, int] | None:
    """Where the claim's text stands in the answer, or the span of the answer sentence that holds it."""
    text = strip_citations(claim).strip().rstrip(".!?;:").strip()
    span = find_span(answer, text)
    if span is None and text:
        parts = sentences(answer)
        at = place_claim(claim, parts)
        span = (parts[at].start, parts[at].end) if at is not None else None
    return span


def overlaps(span: tuple[int, int], labelled) -> bool:
    return any(span[0] < end and start < span[1] for start, end in labelled)


def register() -> None:
    register_verifier(NAME)(OracleVerifier)


def unregister() -> None:
    unregister_verifier(NAME)


class OracleVerifier(Verifier):
    classify_rejected = False  # its No is the label itself: no contradicted-or-unsupported step

    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        span = located(claim, _record["answer"])
        if span is None:
            return CheckedClaim(claim_no, claim, UNDECIDED, NAME, reason="the claim was not found in the answer")
        if overlaps(span, _record["spans"]):
            return CheckedClaim(claim_no, claim, UNSUPPORTED, NAME, reason="overlaps a labelled hallucination span")
        return CheckedClaim(claim_no, claim, SUPPORTED, NAME, passages[0], None, "overlaps no labelled span")
