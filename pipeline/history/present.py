"""Claims placed in the answer they came from, for any screen to mark: each sentence with its worst verdict.

A claim is placed on the answer sentence it came from: the span it carries (`answer_span`, set where the
claim is made), else the sentence that contains it, else the sentence that holds most of its content words
(at least half of them, and two or more). A claim that matches no sentence is listed as not placed: it is
never pinned on a sentence that merely shares a word with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.text import sentences
from pipeline.verification.claims import Verdict, scored_claims
from pipeline.verification.faithfulness import SUPPORTED, CheckedClaim
from pipeline.verification.placement import place_claim
from pipeline.vocabulary import Status


@dataclass(frozen=True)
class VerdictStyle:
    """How every screen shows a verdict: the pages in Streamlit's colour with a Material icon, the terminal in
    a Rich style."""

    color: str  # Streamlit's colour name: :green-background[...], :green-badge[...]
    icon: str  # a Material Symbol, shipped with Streamlit (emoji render as empty boxes without an emoji font)
    terminal: str  # a Rich style


# Worst first: a sentence holding several claims is marked by the first of its verdicts in this order.
VERDICT_STYLES = {
    Verdict.CONTRADICTED: VerdictStyle("red", ":material/cancel:", "red"),
    Verdict.UNSUPPORTED: VerdictStyle("orange", ":material/warning:", "yellow"),
    Verdict.UNVERIFIED: VerdictStyle("violet", ":material/help:", "magenta"),
    Verdict.SUPPORTED: VerdictStyle("green", ":material/check_circle:", "green"),
    # not the answer's claim: marks no sentence (scored_claims leaves it out), shown in the claim lists
    Verdict.EXTRACTION_ERROR: VerdictStyle("gray", ":material/content_cut:", "dim"),
}
VERDICT_RANK = {verdict: rank for rank, verdict in enumerate(VERDICT_STYLES)}


def verdict_label(verdict: str) -> str:
    """A claim's verdict in words, as every page shows it: 'extraction error', not the stored 'extraction_error'."""
    return str(verdict).replace("_", " ")


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
    claims that could not be placed; extraction errors (not the answer's claims) mark nothing."""
    claims = scored_claims(claims)
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


@dataclass
class InvalidReplies:
    stage: str
    invalid: int
    total: int


def invalid_replies(result, grades: list[dict], scores: list[dict]) -> list[InvalidReplies]:
    """Structured replies of one run that stayed invalid after their retry, per stage (only stages the run
    made): context grades, claim extractions, contradicted-or-unsupported verdicts and judge scores."""
    claims = [c for a in result.attempts for c in a.claims]
    extracted = [a for a in result.attempts if a.record.status not in (Status.ABSTAINED,)]
    nli = [c for c in claims if "+" in (c.verifier or "") or "could not be decided" in (c.reason or "")]
    judged = [s for s in scores if str(s.get("metric", "")).startswith("judge_")]
    rows = [
        InvalidReplies("context grade", sum(g.get("relevant") is None for g in grades), len(grades)),
        InvalidReplies(
            "claim extraction",
            sum("invalid" in (a.record.error or "") for a in extracted),
            len(extracted),
        ),
        InvalidReplies(
            "contradicted-or-unsupported verdict",
            sum("could not be decided" in (c.reason or "") for c in nli),
            len(nli),
        ),
        InvalidReplies("judge score", sum(s.get("status") == "invalid" for s in judged), len(judged)),
    ]
    return [r for r in rows if r.total]


def invalid_line(rows: list[InvalidReplies]) -> str:
    """ "Structured replies invalid after a retry: judge score 3 of 3 (100%) · ..."; empty when none was made."""
    if not rows:
        return ""
    parts = [f"{r.stage} {r.invalid} of {r.total} ({r.invalid / r.total:.0%})" for r in rows]
    return "Structured replies invalid after a retry: " + " · ".join(parts)
