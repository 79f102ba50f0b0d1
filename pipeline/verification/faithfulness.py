"""The faithfulness post-processor: extract claims, verify each against the passages, score.

Three named steps, as in ragas' metrics: `extract_claims`, `verify_claims`, `score`.
Each claim goes down the configured verifier chain (setting `verifier_chain`, default the
deterministic pre-check then bespoke-minicheck per chunk, so the chunk that supports a claim becomes
its evidence). Claims a verifier rejects go to an LLM acting as NLI judge, which says contradicted or
unsupported and may quote the contradicting sentence; a quote that cannot be found in the passages is
dropped, never shown as evidence.

The checker is also a LlamaIndex `BaseEvaluator`: `evaluate(query, response, contexts)`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from llama_index.core.evaluation import BaseEvaluator, EvaluationResult

from pipeline import tracing
from pipeline.config import Settings
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.prompting import Prompt
from pipeline.text import find_span, is_meta_statement
from pipeline.verification.base import Item
from pipeline.verification.chain import VerifierChain, effective_chain
from pipeline.verification.claims import (  # noqa: F401 (re-exported)
    CONTRADICTED,
    EXTRACTION_ERROR,
    SUPPORTED,
    UNDECIDED,
    UNSUPPORTED,
    UNVERIFIED,
    CheckedClaim,
    Passage,
    context_block,
    scored_claims,
)
from pipeline.verification.extraction_check import extraction_errors
from pipeline.verification.prompts import (
    EXTRACT_CLAIMS,
    EXTRACT_CLAIMS_IN_CONTEXT,
    EXTRACT_SENTENCE_CLAIMS,
    NLI_JUDGE,
    claims_in_context_input,
    claims_input,
    nli_claim,
    nli_input,
    sentence_claims_input,
)
from pipeline.verification.yes_no import ask_verifier, parse_yes_no  # noqa: F401 (re-exported)
from pipeline.vocabulary import Status

ABSTAIN_SENTENCE = "The knowledge base does not cover this question."


@dataclass
class ClaimExtraction:
    claims: list[str] | None
    invalid_reason: str | None = None


class FaithfulnessChecker(BaseEvaluator):
    """classify=False skips the contradicted-or-unsupported step (a detector only needs supported or not);
    `chain` names the verifiers to run (default: the settings' effective chain)."""

    # What it declares for the runs it checks (pipeline/declarations.py): claims sentence by sentence (or, on one
    # slot, of the written answer: after its context where the claim model is the generator's, else on its own) and
    # the contradicted-or-unsupported step, with the models they use; the chain declares its own and each verifier
    # its own. answer_prompts: whole answers on their own (evaluate(), the detector bench).
    prompts = (EXTRACT_SENTENCE_CLAIMS, EXTRACT_CLAIMS_IN_CONTEXT, EXTRACT_CLAIMS, NLI_JUDGE)
    options = ("claim_model", "nli_model", "claim_granularity")
    answer_prompts = (EXTRACT_CLAIMS,)

    def __init__(self, llm: LLM, settings: Settings, classify: bool = True, chain: Sequence[str] | None = None):
        self.llm = llm
        self.settings = settings
        self.classify = classify
        self.chain = VerifierChain(effective_chain(settings) if chain is None else chain, llm, settings)
        self._rejections: dict[tuple, tuple] = {}  # (claim, passages) -> the chain's rejection and its verifier

    # step 1
    def extract_claims(self, question: str, answer: str, lead: str = "") -> ClaimExtraction:
        """`lead`: the generation's user message up to its question, which the call then starts with (one slot:
        the prompt cache holds it from the generation, and the contradicted-or-unsupported calls share it)."""
        prompt, data = (
            (EXTRACT_CLAIMS_IN_CONTEXT, claims_in_context_input(lead, answer))
            if lead
            else (EXTRACT_CLAIMS, claims_input(question, answer))
        )
        return _extraction(ask(self.llm, "extract_claims", self.settings.claim_model, prompt, data))

    def extract_sentence_claims(self, question: str, sentence: str, earlier: str = "") -> ClaimExtraction:
        """Step 1 on one sentence of an answer that is still being written (`earlier`: the sentence before)."""
        result = ask(
            self.llm,
            "extract_claims",
            self.settings.claim_model,
            EXTRACT_SENTENCE_CLAIMS,
            sentence_claims_input(question, sentence, earlier),
        )
        return _extraction(result)

    # step 1½
    def verify_extracted(
        self,
        claims: list[str],
        text: str,
        passages: list[Passage],
        question: str = "",
        earlier: str = "",
        examples: str = "",
        made_before: Sequence[str] = (),
        **verify: Any,
    ) -> list[CheckedClaim]:
        """Step 2 on the claims extracted from `text` that belong to it; the others (a copy of the question or of
        the prompt's example, text not in `text`, a repeat of `made_before` or of each other) are kept in order as
        extraction errors with their reason, unverified and unscored (extraction_check.py)."""
        reasons = extraction_errors(claims, text, question, earlier, examples, made_before)
        kept = [c for c, why in zip(claims, reasons, strict=True) if why is None]
        verified = self.verify_claims(kept, passages, question=question, **verify) if kept else []
        return with_extraction_errors(claims, reasons, iter(verified), verify.get("first_no", 1))

    # step 2
    def verify_claims(
        self,
        claims: list[str],
        passages: list[Passage],
        question: str = "",
        cited: Collection[int] = (),
        first_no: int = 1,
        deferred: list[CheckedClaim] | None = None,
        together: bool = False,
    ) -> list[CheckedClaim]:
        """Each claim down the chain; `question` lets the pre-check accept names the user asked about;
        `cited` passages are tried first; claims are numbered from `first_no`. With a `deferred` list, a rejected
        claim is left unsupported and put there instead of being classified now (see classify_rejected).
        `together`: in this thread, each verifier given all the claims at once (verify_together: one slot)."""
        if together:
            items = [(n, claim, cited) for n, claim in enumerate(claims, start=first_no)]
            return self.verify_together(items, passages, question, deferred)

        def check(claim_no: int, claim: str) -> CheckedClaim:
            with tracing.step(f"verify claim {claim_no}"):
                verdict = self.verify_claim(claim_no, claim, passages, question, cited, deferred)
                tracing.annotate(verdict=verdict.verdict, verifier=verdict.verifier)
            return verdict

        with ThreadPoolExecutor(max_workers=self.settings.verify_concurrency) as pool:
            futures = [tracing.submit(pool, check, n, claim) for n, claim in enumerate(claims, start=first_no)]
            return [future.result() for future in futures]

    def verify_claim(
        self,
        claim_no: int,
        claim: str,
        passages: list[Passage],
        question: str = "",
        cited: Collection[int] = (),
        deferred: list[CheckedClaim] | None = None,
    ) -> CheckedClaim:
        ((checked, verifier),) = self._down_the_chain([(claim_no, claim, cited)], passages, question)
        return self._after_chain(checked, verifier, passages, deferred)

    def verify_together(
        self,
        items: Sequence[Item],
        passages: list[Passage],
        question: str = "",
        deferred: list[CheckedClaim] | None = None,
    ) -> list[CheckedClaim]:
        """Step 2 on several claims in one thread, each verifier given them at once (the one-slot schedule: a
        verifier may then order its calls so that consecutive ones share a passage); `items` are (claim number,
        claim, the passages its sentence cites)."""
        with tracing.step("verify claims passage by passage", claims=len(items)):
            decided = self._down_the_chain(items, passages, question)
            tracing.annotate(verdicts=[checked.verdict for checked, _ in decided])
        return [self._after_chain(checked, verifier, passages, deferred) for checked, verifier in decided]

    def verify_sentences(
        self,
        items: Sequence[Item],
        passages: list[Passage],
        question: str = "",
        deferred: list[CheckedClaim] | None = None,
    ) -> list[CheckedClaim]:
        """Answer sentences as they stand down the chain, each verifier's `verify_sentences` (a model verifier: the
        cited passages together, then the whole context, one call each). A rejection is not kept for the sentence's
        atomic claims: those are checked passage by passage whatever the sentence's verdict."""
        with tracing.step("verify sentences against their documents", sentences=len(items)):
            decided = self.chain.verify_many(items, passages, question, sentences=True)
            tracing.annotate(verdicts=[checked.verdict for checked, _ in decided])
        return [self._after_chain(checked, verifier, passages, deferred) for checked, verifier in decided]

    def _down_the_chain(self, items: Sequence[Item], passages: list[Passage], question: str) -> list[tuple]:
        """The chain's (verdict, verifier) for each item; a claim the chain already rejected against these passages
        takes that rejection again without a call (the same claim checked again against the same passages: a
        rejection tried every passage, so the order it tried them in does not matter). A sentence's own rejection
        (verify_sentences: on documents, not passage by passage) is never reused here."""
        key = tuple((p.n, p.chunk_id, p.offset, len(p.text)) for p in passages)
        out: list[tuple | None] = [None] * len(items)
        for at, (claim_no, claim, _) in enumerate(items):
            known = self._rejections.get((claim, key))
            if known is not None:
                out[at] = (dataclasses.replace(known[0], claim_no=claim_no), known[1])
        asked = [at for at, decided in enumerate(out) if decided is None]
        decided = self.chain.verify_many([items[at] for at in asked], passages, question) if asked else []
        for at, (checked, verifier) in zip(asked, decided, strict=True):
            out[at] = (checked, verifier)
            if checked.verdict == UNSUPPORTED:
                self._rejections[(checked.text, key)] = (dataclasses.replace(checked), verifier)
        return out

    def _after_chain(
        self, checked: CheckedClaim, verifier, passages: list[Passage], deferred: list[CheckedClaim] | None
    ) -> CheckedClaim:
        """A rejection is classified contradicted or unsupported now, or put in `deferred` when there is one."""
        if checked.verdict == UNSUPPORTED and verifier.classify_rejected and self.classify and passages:
            if deferred is not None:
                deferred.append(checked)
                return checked
            return self.classify_rejected(checked, passages)
        return checked

    def classify_rejected(self, rejected: CheckedClaim, passages: list[Passage]) -> CheckedClaim:
        """Contradicted (with a quote found in the sources) or unsupported, by the NLI model."""
        claim_no, claim = rejected.claim_no, rejected.text
        result = ask(
            self.llm,
            "nli",
            self.settings.nli_model,
            NLI_JUDGE,
            nli_input(context_block(passages)),
            last=nli_claim(claim),
        )
        if result.value is None:
            return CheckedClaim(
                claim_no,
                claim,
                UNSUPPORTED,
                rejected.verifier,
                reason=f"{rejected.reason}; contradicted-or-unsupported could not be decided ({result.invalid_reason})",
                hint=rejected.hint,
            )
        verdict, reason = result.value.verdict, result.value.reason.strip()
        passage, span = locate_quote(result.value.quote, passages)
        if result.value.quote.strip() and span is None:
            reason += " (the quoted text was not found in the sources, so it is not shown)"
        if verdict == CONTRADICTED and span is None:
            verdict = UNSUPPORTED
            reason += " (marked unsupported: a contradiction needs a quote found in the sources)"
        if rejected.hint and rejected.hint not in reason:  # the pre-check's signal stays in view
            reason += f" ({rejected.hint})"
        return CheckedClaim(
            claim_no,
            claim,
            verdict,
            f"{rejected.verifier} + {self.settings.nli_model}",
            passage,
            span,
            reason.strip(),
            hint=rejected.hint,
        )

    # step 3
    @staticmethod
    def score(checked: list[CheckedClaim]) -> tuple[float | None, str]:
        """(faithfulness, status): supported / claims with a verdict; None when there is nothing to score."""
        checked = scored_claims(checked)
        if not checked:
            return None, Status.NO_CLAIMS
        decided = [c for c in checked if c.verdict != UNVERIFIED]
        if not decided:
            return None, Status.UNVERIFIED
        return sum(c.verdict == SUPPORTED for c in decided) / len(decided), Status.VERIFIED

    # LlamaIndex's evaluator interface
    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """The three steps on a response and its contexts. passing = faithfulness at or above the
        threshold; an answer without claims has no score and no passing verdict."""
        if response is None or contexts is None:
            raise ValueError("evaluate needs the response and its contexts")
        passages = [Passage(n, -n, "context", text, 0.0) for n, text in enumerate(contexts, start=1)]
        common = dict(query=query, response=response, contexts=list(contexts))
        extraction = self.extract_claims(query or "", response)
        if extraction.claims is None:
            return EvaluationResult(
                **common,
                invalid_result=True,
                invalid_reason=f"claims could not be extracted: {extraction.invalid_reason}",
            )
        checked = self.verify_extracted(
            extraction.claims, response, passages, question=query or "", examples=example_text(EXTRACT_CLAIMS)
        )
        faithfulness, status = self.score(checked)
        feedback = (
            "\n".join(f"{c.verdict}: {c.text} ({c.reason})" for c in checked)
            or "the response makes no checkable claims"
        )
        if status == Status.UNVERIFIED:
            return EvaluationResult(
                **common, feedback=feedback, invalid_result=True, invalid_reason="no claim could be verified"
            )
        passing = None if faithfulness is None else faithfulness >= self.settings.faithfulness_threshold
        return EvaluationResult(**common, passing=passing, score=faithfulness, feedback=feedback)

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        return await asyncio.to_thread(self.evaluate, query, response, contexts)

    def _get_prompts(self) -> dict:
        return {}  # our prompts are typed, versioned objects (verification/prompts.py), not LlamaIndex templates

    def _update_prompts(self, prompts_dict: dict) -> None:
        if prompts_dict:
            raise NotImplementedError("the checker's prompts are versioned in pipeline/verification/prompts.py")


def with_extraction_errors(
    claims: list[str], reasons: list[str | None], verified: Iterator[CheckedClaim], first: int = 1
) -> list[CheckedClaim]:
    """The claims in order, numbered from `first`: the next of `verified` for each one kept, an extraction error
    with its reason for each other."""
    out = []
    for n, (claim, why) in enumerate(zip(claims, reasons, strict=True), start=first):
        checked = (
            next(verified) if why is None else CheckedClaim(n, claim, EXTRACTION_ERROR, "extraction check", reason=why)
        )
        checked.claim_no = n
        out.append(checked)
    return out


def example_text(prompt: Prompt) -> str:
    """A prompt's examples as one text: a claim copied from them is an extraction error."""
    return "\n".join(prompt.examples)


def _extraction(result) -> ClaimExtraction:
    """Claims of a structured reply: meta statements and repeats left out; invalid with its reason."""
    if result.value is None:
        return ClaimExtraction(None, result.invalid_reason)
    claims = [" ".join(c.split()) for c in result.value.claims if c and c.strip() and not is_meta_statement(c)]
    return ClaimExtraction(list(dict.fromkeys(claims)))


def locate_quote(quote: str, passages: list[Passage]) -> tuple[Passage | None, tuple[int, int] | None]:
    for passage in passages:
        span = find_span(passage.text, quote)
        if span:
            return passage, span
    return None, None
