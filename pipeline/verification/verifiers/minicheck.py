"""bespoke-minicheck (`Document: ...\nClaim: ...` -> Yes/No), per chunk or on the whole context.

bespoke-minicheck takes its own format and no instruction, so these verifiers declare no prompt; what pins them
is the verifier model (its digest is recorded with each call)."""

from __future__ import annotations

from pipeline.answering.prompts import Prompt
from pipeline.text import best_sentence, overlap, short_source
from pipeline.verification.base import Verifier
from pipeline.verification.claims import SUPPORTED, UNDECIDED, UNSUPPORTED, CheckedClaim, Passage, context_block
from pipeline.verification.registry import register_verifier
from pipeline.verification.yes_no import ask_verifier, parse_yes_no


class YesNoVerifier(Verifier):
    """A verifier that asks a model Yes or No; a general model gets an `instruction` (which the subclass declares
    among its prompts)."""

    instruction: Prompt | None = None

    @property
    def model(self) -> str:
        return self.settings.verifier_model

    @property
    def label(self) -> str:
        return self.model

    def ask(self, document: str, claim: str) -> tuple[bool | None, str]:
        """(supported, or None when the reply is neither Yes nor No; the reply text)."""
        reply = ask_verifier(self.llm, self.model, document, claim, instruction=self.instruction)
        return parse_yes_no(reply.text), reply.text


@register_verifier("minicheck_chunk", options=("verifier_model",))
class MiniCheckChunk(YesNoVerifier):
    """Each passage in turn, the ones the sentence cites first, then best word overlap first; the first
    passage that supports the claim is its evidence."""

    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        return self._verify_for("", claim_no, claim, passages)

    def _verify_for(self, question: str, claim_no: int, claim: str, passages: list[Passage], cited=()) -> CheckedClaim:
        unreadable = []
        for passage in sorted(passages, key=lambda p: (p.n not in cited, -overlap(claim, p.text))):
            supported, text = self.ask(passage.text, claim)
            if supported is None:
                unreadable.append(text[:40])
            elif supported:
                sentence = best_sentence(passage.text, claim)
                span = (sentence.start, sentence.end) if sentence else None
                return CheckedClaim(
                    claim_no,
                    claim,
                    SUPPORTED,
                    self.label,
                    passage,
                    span,
                    f"supported by [{passage.n}] {short_source(passage.source)}",
                )
        if len(unreadable) == len(passages):
            return CheckedClaim(
                claim_no,
                claim,
                UNDECIDED,
                self.label,
                reason=f"the verifier's replies could not be read as Yes/No: {unreadable[0]!r}",
            )
        return CheckedClaim(claim_no, claim, UNSUPPORTED, self.label, reason="no passage supports it")


@register_verifier("minicheck_context", options=("verifier_model",))
class MiniCheckContext(YesNoVerifier):
    """One call with every passage; the evidence is the sentence closest to the claim."""

    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        supported, text = self.ask(context_block(passages), claim)
        if supported is None:
            return CheckedClaim(
                claim_no,
                claim,
                UNDECIDED,
                self.label,
                reason=f"the verifier's reply could not be read as Yes/No: {text[:40]!r}",
            )
        if not supported:
            return CheckedClaim(
                claim_no, claim, UNSUPPORTED, self.label, reason="the retrieved context does not support it"
            )
        scored = [(p, best_sentence(p.text, claim)) for p in passages]
        passage, sentence = max(scored, key=lambda ps: overlap(claim, ps[1].text) if ps[1] else -1.0)
        span = (sentence.start, sentence.end) if sentence else None
        return CheckedClaim(
            claim_no,
            claim,
            SUPPORTED,
            self.label,
            passage if span else None,
            span,
            "supported by the retrieved context",
        )
