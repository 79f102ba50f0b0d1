"""The deterministic grounding pre-check as a verifier: no model call."""

from __future__ import annotations

from pipeline.text import find_span, short_source, strip_citations
from pipeline.verification.base import Verifier
from pipeline.verification.claims import SUPPORTED, UNDECIDED, UNSUPPORTED, CheckedClaim, Passage
from pipeline.verification.precheck import precheck
from pipeline.verification.registry import register_verifier

HEURISTIC_ONLY = "flagged by a heuristic (no model verifier in the chain)"


@register_verifier("precheck", options=("precheck_novel_share", "precheck_novel_words"))
class PrecheckVerifier(Verifier):
    """Unsupported when the claim names a number, percentage, time or acronym no passage (nor the question)
    gives; supported when it stands verbatim in a passage; undecided otherwise, with any weaker signal (a
    year, a name, a claim made mostly of new words) as a hint for the next verifier."""

    classify_rejected = False

    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        return self._verify_for("", claim_no, claim, passages)

    def _verify_for(self, question: str, claim_no: int, claim: str, passages: list[Passage], cited=()) -> CheckedClaim:
        result = precheck(
            claim,
            "\n\n".join(p.text for p in passages),
            question,
            self.settings.precheck_novel_share,
            self.settings.precheck_novel_words,
        )
        alone = not self.followed_by
        if result.verdict == UNSUPPORTED:
            reason = result.reason + (f" ({HEURISTIC_ONLY})" if alone else "")
            return CheckedClaim(claim_no, claim, UNSUPPORTED, self.label, reason=reason)
        if result.hints:
            # a signal too unreliable to decide: the next verifier decides, and its verdict shows the hint
            hint = f"pre-check hint: {result.reason}"
            reason = (
                f"{hint} ({HEURISTIC_ONLY}; not decided)" if alone else f"{hint}; passed on to {self.followed_by[0]}"
            )
            return CheckedClaim(claim_no, claim, UNDECIDED, self.label, reason=reason, hint=hint)
        if result.verdict == SUPPORTED:
            for passage in passages:
                span = find_span(passage.text, strip_citations(claim).rstrip(".!?;:"))
                if span:
                    return CheckedClaim(
                        claim_no,
                        claim,
                        SUPPORTED,
                        self.label,
                        passage,
                        span,
                        f"found verbatim in [{passage.n}] {short_source(passage.source)}",
                    )
        return CheckedClaim(
            claim_no,
            claim,
            UNDECIDED,
            self.label,
            reason="the pre-check found every number and name it states in the sources, "
            "but not the claim verbatim in one passage",
        )
