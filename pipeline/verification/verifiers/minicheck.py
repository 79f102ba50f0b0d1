"""bespoke-minicheck (`Document: ...\nClaim: ...` -> Yes/No), per chunk or on the whole context.

bespoke-minicheck takes its own format and no instruction, so these verifiers declare no prompt; what pins them
is the verifier model (its digest is recorded with each call)."""

from __future__ import annotations

from collections import Counter

from pipeline.prompting import Prompt
from pipeline.text import best_sentence, overlap, short_source
from pipeline.verification.base import Item, Verifier
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

    def _verify_sentences(self, question: str, items: list[Item], passages: list[Passage]) -> list[CheckedClaim]:
        """Each answer sentence in at most two calls: against a document of the passages it cites together (in rank
        order, numbered as in the context block), then, where it cites none or they do not support it, against the
        whole context. Sentences citing the same passages are asked in a row, and the whole-context calls come last
        with one document for all, so that consecutive calls begin with the same `Document: ...` (the server's
        prompt cache). A sentence neither supports is rejected (in auto it is then decomposed into atomic claims,
        each checked passage by passage)."""
        documents = [[p for p in passages if p.n in cited] for _, _, cited in items]
        verdicts: list[CheckedClaim | None] = [None] * len(items)
        unreadable: list[list[str]] = [[] for _ in items]
        for i in sorted((i for i, doc in enumerate(documents) if doc), key=lambda i: [p.n for p in documents[i]]):
            verdicts[i] = self._ask_document(items[i], documents[i], unreadable[i], "its cited passages")
        whole = [i for i, verdict in enumerate(verdicts) if verdict is None and len(documents[i]) < len(passages)]
        for i in whole:
            verdicts[i] = self._ask_document(items[i], passages, unreadable[i], "the retrieved context")
        asked = [1 + (0 < len(documents[i]) < len(passages)) for i in range(len(items))]
        return [
            verdict
            or self._rejected(
                claim_no,
                claim,
                unreadable[i],
                asked[i],
                "neither its cited passages nor the retrieved context support it"
                if asked[i] == 2
                else "the retrieved context does not support it",
            )
            for i, (verdict, (claim_no, claim, _)) in enumerate(zip(verdicts, items, strict=True))
        ]

    def _ask_document(self, item: Item, document: list[Passage], unreadable: list[str], what: str):
        """The sentence supported by the passages of `document` together (its evidence from the passage that shares
        most words with it), or None."""
        claim_no, claim, _ = item
        supported, text = self.ask(context_block(document), claim)
        if supported is None:
            unreadable.append(text[:40])
        if not supported:
            return None
        passage, span = evidence_in(document, claim)
        return CheckedClaim(claim_no, claim, SUPPORTED, self.label, passage, span, f"supported by {what}")

    def _rejected(
        self, claim_no: int, claim: str, unreadable: list[str], asked: int, why: str = "no passage supports it"
    ) -> CheckedClaim:
        if len(unreadable) == asked:
            return CheckedClaim(
                claim_no,
                claim,
                UNDECIDED,
                self.label,
                reason=f"the verifier's replies could not be read as Yes/No: {unreadable[0]!r}",
            )
        return CheckedClaim(claim_no, claim, UNSUPPORTED, self.label, reason=why)


def evidence_in(passages: list[Passage], claim: str) -> tuple[Passage | None, tuple[int, int] | None]:
    """(the passage whose closest sentence shares most words with the claim, that sentence's span); the earlier
    passage on a tie; (None, None) when no passage has a sentence."""
    scored = [(p, best_sentence(p.text, claim)) for p in passages]
    passage, sentence = max(scored, key=lambda ps: overlap(claim, ps[1].text) if ps[1] else -1.0)
    return (passage, (sentence.start, sentence.end)) if sentence else (None, None)


@register_verifier("minicheck_chunk", options=("verifier_model",))
class MiniCheckChunk(YesNoVerifier):
    """Each passage in turn, the ones the sentence cites first, then best word overlap first; the first
    passage that supports the claim is its evidence.

    Claims given together (one slot) are asked passage by passage: at each step, the passage most of the waiting
    claims would try next is asked about each of them, one call after another, so consecutive calls begin with the
    same `Document: ...`, which the server's prompt cache holds. Each claim makes exactly the calls it would make
    alone, in its own order; only their interleaving changes."""

    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        return self._verify_for("", claim_no, claim, passages)

    def _verify_for(self, question: str, claim_no: int, claim: str, passages: list[Passage], cited=()) -> CheckedClaim:
        return self._verify_many(question, [(claim_no, claim, cited)], passages)[0]

    def _verify_many(self, question: str, items: list[Item], passages: list[Passage]) -> list[CheckedClaim]:
        order = [
            sorted(passages, key=lambda p: (p.n not in cited, -overlap(claim, p.text))) for _, claim, cited in items
        ]
        rank = {p.n: at for at, p in enumerate(passages)}
        tried = [0] * len(items)
        unreadable: list[list[str]] = [[] for _ in items]
        verdicts: list[CheckedClaim | None] = [None] * len(items)
        while waiting := [i for i, verdict in enumerate(verdicts) if verdict is None]:
            wanted = Counter(order[i][tried[i]].n for i in waiting)
            n = max(wanted, key=lambda k: (wanted[k], -rank[k]))
            for i in (i for i in waiting if order[i][tried[i]].n == n):
                claim_no, claim, _ = items[i]
                passage = order[i][tried[i]]
                tried[i] += 1
                supported, text = self.ask(passage.text, claim)
                if supported:
                    verdicts[i] = self._supported(claim_no, claim, passage)
                    continue
                if supported is None:
                    unreadable[i].append(text[:40])
                if tried[i] == len(passages):
                    verdicts[i] = self._rejected(claim_no, claim, unreadable[i], len(passages))
        return verdicts

    def _supported(self, claim_no: int, claim: str, passage: Passage) -> CheckedClaim:
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
        passage, span = evidence_in(passages, claim)
        return CheckedClaim(claim_no, claim, SUPPORTED, self.label, passage, span, "supported by the retrieved context")
