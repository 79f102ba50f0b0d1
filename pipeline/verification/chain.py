"""The configured chain of verifiers: each claim goes down the chain until one decides it."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pipeline.config import Settings
from pipeline.errors import ConfigError
from pipeline.models.llm import LLM
from pipeline.verification.base import Item, Verifier
from pipeline.verification.claims import UNDECIDED, UNVERIFIED, CheckedClaim, Passage
from pipeline.verification.registry import verifier_class


def effective_chain(settings: Settings) -> list[str]:
    """`verifier_chain` as adjusted by the older settings: precheck_enabled=false drops the pre-check,
    verify_scope=context swaps minicheck_chunk for minicheck_context."""
    names = [n.strip() for n in settings.verifier_chain.split(",") if n.strip()]
    if not settings.precheck_enabled:
        names = [n for n in names if n != "precheck"]
    if settings.verify_scope == "context":
        names = ["minicheck_context" if n == "minicheck_chunk" else n for n in names]
    return names


class VerifierChain:
    # the settings that make the chain (effective_chain); a run records the effective chain as verifier_chain
    options = ("verifier_chain", "precheck_enabled", "verify_scope")

    def __init__(self, names: Sequence[str], llm: LLM, settings: Settings):
        if not names:
            raise ConfigError(
                "the verifier chain is empty", fix="set WORKBENCH_VERIFIER_CHAIN, e.g. precheck,minicheck_chunk"
            )
        self.verifiers: list[Verifier] = [verifier_class(name)(llm, settings) for name in names]
        for at, verifier in enumerate(self.verifiers):
            verifier.followed_by = tuple(names[at + 1 :])

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.verifiers]

    def verify(
        self, claim_no: int, claim: str, passages: list[Passage], question: str = "", cited: Collection[int] = ()
    ) -> tuple[CheckedClaim, Verifier]:
        """(the first decided verdict, the verifier that gave it); when none decides, the claim is
        unverified with the last verifier's reason."""
        return self.verify_many([(claim_no, claim, cited)], passages, question)[0]

    def verify_many(
        self, items: Sequence[Item], passages: list[Passage], question: str = "", sentences: bool = False
    ) -> list[tuple[CheckedClaim, Verifier]]:
        """`verify` on each item, each verifier given at once the claims the ones before it left undecided.
        `sentences`: the items are answer sentences as they stand (each verifier's `verify_sentences`)."""
        out: list[tuple[CheckedClaim, Verifier] | None] = [None] * len(items)
        last: list[CheckedClaim | None] = [None] * len(items)
        # a hint an earlier verifier passed on (the pre-check's "'X' appears in no retrieved source")
        hints = [""] * len(items)
        waiting = list(range(len(items)))
        for verifier in self.verifiers:
            if not waiting:
                break
            ask = verifier.verify_sentences if sentences else verifier.verify_many
            verdicts = ask([items[i] for i in waiting], passages, question)
            for i, checked in zip(waiting, verdicts, strict=True):
                if checked.verdict != UNDECIDED:
                    if hints[i] and not checked.hint:
                        checked.hint, checked.reason = hints[i], f"{checked.reason} ({hints[i]})".strip()
                    out[i] = (checked, verifier)
                else:
                    last[i], hints[i] = checked, hints[i] or checked.hint
            waiting = [i for i in waiting if out[i] is None]
        for i in waiting:
            out[i] = (self._unverified(last[i], hints[i]), self.verifiers[-1])
        return out

    def _unverified(self, checked: CheckedClaim, hint: str) -> CheckedClaim:
        """A claim no verifier decided: unverified with the last verifier's reason."""
        reason = (
            checked.reason if len(self.verifiers) == 1 else f"{checked.reason} (undecided by {', '.join(self.names)})"
        )
        if hint and hint not in reason:
            reason = f"{reason} ({hint})"
        return CheckedClaim(checked.claim_no, checked.text, UNVERIFIED, checked.verifier, reason=reason, hint=hint)
