"""The verifier interface: one claim against the passages -> supported, unsupported or undecided.

Template method, as llama-index-core's `BaseNodePostprocessor.postprocess_nodes` around
`_postprocess_nodes`: `verify` validates the input and the verdict, `_verify` does the work.
Undecided hands the claim to the next verifier of the chain.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import ClassVar

from pipeline.config import Settings
from pipeline.models.llm import LLM
from pipeline.prompting import Prompt
from pipeline.verification.claims import UNSUPPORTED, VERIFIER_VERDICTS, CheckedClaim, Passage

Item = tuple[int, str, Collection[int]]  # (claim number, claim, the numbers of the passages its sentence cites)


class Verifier(ABC):
    name: ClassVar[str] = ""  # set by @register_verifier
    # Set by @register_verifier(name, prompts=..., options=...): the prompts it sends and the settings its verdicts
    # depend on; a run records both (pipeline/declarations.py).
    prompts: ClassVar[tuple[Prompt, ...]] = ()
    options: ClassVar[tuple[str, ...]] = ()
    # A rejection goes on to the NLI step (contradicted or unsupported) unless the verifier's own
    # reason already says why, as the pre-check's "'1999' appears in no retrieved source" does.
    classify_rejected: ClassVar[bool] = True
    # the verifiers after this one in its chain (set by VerifierChain): who decides what this one passes on
    followed_by: tuple[str, ...] = ()

    def __init__(self, llm: LLM, settings: Settings):
        self.llm = llm
        self.settings = settings

    @property
    def label(self) -> str:
        """What a claim's `verifier` column says: the model for model verifiers."""
        return self.name

    def verify(
        self, claim_no: int, claim: str, passages: list[Passage], question: str = "", cited: Collection[int] = ()
    ) -> CheckedClaim:
        """`cited`: the numbers of the passages the answer sentence cites, which a verifier that tries
        passages one by one tries first."""
        return self.verify_many([(claim_no, claim, cited)], passages, question)[0]

    def verify_many(self, items: Sequence[Item], passages: list[Passage], question: str = "") -> list[CheckedClaim]:
        """One verdict per (claim number, claim, cited passage numbers), in order. Given together, a verifier
        that sends calls may order them across the claims (one slot: consecutive calls that share a passage
        let the server's prompt cache hold it)."""
        return self._checked(self._verify_many, items, passages, question)

    def verify_sentences(
        self, items: Sequence[Item], passages: list[Passage], question: str = ""
    ) -> list[CheckedClaim]:
        """`verify_many` on answer sentences as they stand (pipeline/verification/sentence_first.py). A verifier
        that reads passages one at a time overrides `_verify_sentences` to read a sentence's cited passages
        together, then the whole context, in one call each."""
        return self._checked(self._verify_sentences, items, passages, question)

    def _checked(self, work, items: Sequence[Item], passages: list[Passage], question: str) -> list[CheckedClaim]:
        """`work(question, items, passages)` on valid input, its verdicts checked."""
        for claim_no, claim, _ in items:
            if not claim or not claim.strip():
                raise ValueError(f"{self.name}: claim {claim_no} is empty")
        if not passages:
            return [
                CheckedClaim(claim_no, claim, UNSUPPORTED, self.label, reason="there is no passage to check it against")
                for claim_no, claim, _ in items
            ]
        checked = work(question, list(items), passages) if items else []
        for (claim_no, claim, _), verdict in zip(items, checked, strict=True):
            if verdict.verdict not in VERIFIER_VERDICTS:
                raise ValueError(
                    f"verifier {self.name} returned {verdict.verdict!r}; a verifier says one of "
                    f"{', '.join(VERIFIER_VERDICTS)}"
                )
            if (verdict.claim_no, verdict.text) != (claim_no, claim):
                raise ValueError(f"verifier {self.name} answered for another claim than claim {claim_no}")
        return checked

    def _verify_many(self, question: str, items: list[Item], passages: list[Passage]) -> list[CheckedClaim]:
        """`_verify_for` on each claim in turn; a verifier that can share work across claims overrides this."""
        return [self._verify_for(question, claim_no, claim, passages, cited) for claim_no, claim, cited in items]

    def _verify_sentences(self, question: str, items: list[Item], passages: list[Passage]) -> list[CheckedClaim]:
        """Sentences as any claims are, by default."""
        return self._verify_many(question, items, passages)

    def _verify_for(
        self, question: str, claim_no: int, claim: str, passages: list[Passage], cited: Collection[int] = ()
    ) -> CheckedClaim:
        """`_verify` knowing the question asked and the cited passages; a verifier that reads them overrides
        this."""
        return self._verify(claim_no, claim, passages)

    @abstractmethod
    def _verify(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        """The verdict on one claim; passages is never empty."""
