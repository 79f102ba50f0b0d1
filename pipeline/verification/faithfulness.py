"""The faithfulness post-processor: extract claims, verify each against the passages, score.

Three named steps, as in ragas' metrics: `extract_claims`, `verify_claims`, `score`.
A claim is checked chunk by chunk with the verifier model (bespoke-minicheck), so the chunk that
supports a claim becomes its evidence. Claims the verifier rejects go to an LLM acting as NLI judge,
which says contradicted or unsupported and may quote the contradicting sentence; a quote that cannot
be found in the passages is dropped, never shown as evidence.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from pipeline.answering import prompts
from pipeline.config import Settings
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.verification.precheck import precheck
from pipeline.text import best_sentence, find_span, overlap, short_source, strip_citations

SUPPORTED, CONTRADICTED, UNSUPPORTED, UNVERIFIED = "supported", "contradicted", "unsupported", "unverified"
ABSTAIN_SENTENCE = "The knowledge base does not cover this question."


@dataclass
class Passage:
    """A retrieved chunk as numbered in the prompt."""
    n: int
    chunk_id: int
    source: str
    text: str
    score: float


@dataclass
class CheckedClaim:
    claim_no: int
    text: str
    verdict: str
    verifier: str
    passage: Passage | None = None
    span: tuple[int, int] | None = None
    reason: str = ""

    @property
    def evidence(self) -> str | None:
        return self.passage.text[self.span[0]:self.span[1]] if self.passage and self.span else None


@dataclass
class ClaimExtraction:
    claims: list[str] | None
    invalid_reason: str | None = None


def parse_yes_no(text: str) -> bool | None:
    """The verifier's verdict from its first word; None when it is neither yes nor no."""
    match = re.match(r"\W*([A-Za-z]+)", text or "")
    word = match.group(1).lower() if match else ""
    return {"yes": True, "no": False}.get(word)


def ask_verifier(llm: LLM, model: str, document: str, claim: str, stage: str = "verify", instructed: bool = False):
    """One Yes/No verification call in bespoke-minicheck's format; `instructed` adds a system instruction
    for general models. Replies that are neither Yes nor No are not cached."""
    user = prompts.verifier_input(document, claim)
    messages = prompts.LLM_VERIFIER.messages(user) if instructed else [{"role": "user", "content": user}]
    return llm.chat(stage, model, messages, accept=lambda text: parse_yes_no(text) is not None)


def context_block(passages: list[Passage]) -> str:
    return prompts.number_passages([(p.n, short_source(p.source), p.text) for p in passages])



class FaithfulnessChecker:
    """classify=False skips the contradicted-or-unsupported step (a detector only needs supported or not);
    llm_verifier=True asks the verifier model with an instruction, for general LLMs instead of minicheck."""

    def __init__(self, llm: LLM, settings: Settings, classify: bool = True, llm_verifier: bool = False):
        self.llm = llm
        self.settings = settings
        self.classify = classify
        self.llm_verifier = llm_verifier

    def _ask_verifier(self, document: str, claim: str):
        return ask_verifier(self.llm, self.settings.verifier_model, document, claim, instructed=self.llm_verifier)

    # step 1
    def extract_claims(self, question: str, answer: str) -> ClaimExtraction:
        result = ask(self.llm, "extract_claims", self.settings.claim_model, prompts.EXTRACT_CLAIMS,
                     prompts.claims_input(question, answer))
        if result.value is None:
            return ClaimExtraction(None, result.invalid_reason)
        claims = [" ".join(c.split()) for c in result.value.claims if c and c.strip()]
        return ClaimExtraction(list(dict.fromkeys(claims)))

    # step 2
    def verify_claims(self, claims: list[str], passages: list[Passage],
                      on_verdict: Callable[[CheckedClaim], None] | None = None) -> list[CheckedClaim]:
        def check(numbered: tuple[int, str]) -> CheckedClaim:
            verdict = self.verify_claim(numbered[0], numbered[1], passages)
            if on_verdict:
                on_verdict(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=self.settings.verify_concurrency) as pool:
            return list(pool.map(check, enumerate(claims, start=1)))

    def verify_claim(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        if self.settings.precheck_enabled:
            decided = self.precheck_claim(claim_no, claim, passages)
            if decided is not None:
                return decided
        if self.settings.verify_scope == "context":
            return self.verify_against_context(claim_no, claim, passages)
        ordered = sorted(passages, key=lambda p: -overlap(claim, p.text))
        invalid = []
        for passage in ordered:
            reply = self._ask_verifier(passage.text, claim)
            supported = parse_yes_no(reply.text)
            if supported is None:
                invalid.append(reply.text[:40])
            elif supported:
                sentence = best_sentence(passage.text, claim)
                span = (sentence.start, sentence.end) if sentence else None
                return CheckedClaim(claim_no, claim, SUPPORTED, self.settings.verifier_model, passage, span,
                                    f"supported by [{passage.n}] {short_source(passage.source)}")
        if invalid and len(invalid) == len(ordered):
            return CheckedClaim(claim_no, claim, UNVERIFIED, self.settings.verifier_model,
                                reason=f"the verifier's replies could not be read as Yes/No: {invalid[0]!r}")
        return self.classify_rejected(claim_no, claim, passages)

    def precheck_claim(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim | None:
        """The deterministic pre-check's verdict, or None when it leaves the claim to the model."""
        result = precheck(claim, "\n\n".join(p.text for p in passages))
        if result.verdict == UNSUPPORTED:
            return CheckedClaim(claim_no, claim, UNSUPPORTED, "precheck", reason=result.reason)
        if result.verdict == SUPPORTED:
            for passage in passages:
                span = find_span(passage.text, strip_citations(claim).rstrip(".!?;:"))
                if span:
                    return CheckedClaim(claim_no, claim, SUPPORTED, "precheck", passage, span,
                                        f"found verbatim in [{passage.n}] {short_source(passage.source)}")
        return None

    def verify_against_context(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        """One verifier call with every passage (verify_scope = context); evidence = the closest sentence."""
        reply = self._ask_verifier(context_block(passages), claim)
        supported = parse_yes_no(reply.text)
        if supported is None:
            return CheckedClaim(claim_no, claim, UNVERIFIED, self.settings.verifier_model,
                                reason=f"the verifier's reply could not be read as Yes/No: {reply.text[:40]!r}")
        if not supported:
            return self.classify_rejected(claim_no, claim, passages)
        scored = [(p, best_sentence(p.text, claim)) for p in passages]
        passage, sentence = max(scored, key=lambda ps: overlap(claim, ps[1].text) if ps[1] else -1.0)
        span = (sentence.start, sentence.end) if sentence else None
        return CheckedClaim(claim_no, claim, SUPPORTED, self.settings.verifier_model,
                            passage if span else None, span, "supported by the retrieved context")

    def classify_rejected(self, claim_no: int, claim: str, passages: list[Passage]) -> CheckedClaim:
        if not self.classify:
            return CheckedClaim(claim_no, claim, UNSUPPORTED, self.settings.verifier_model,
                                reason="no passage supports it")
        result = ask(self.llm, "nli", self.settings.nli_model, prompts.NLI_JUDGE,
                     prompts.nli_input(context_block(passages), claim))
        verifier = f"{self.settings.verifier_model} + {self.settings.nli_model}"
        if result.value is None:
            return CheckedClaim(claim_no, claim, UNSUPPORTED, self.settings.verifier_model,
                                reason=f"no passage supports it; contradicted-or-unsupported could not be "
                                       f"decided ({result.invalid_reason})")
        verdict, reason = result.value.verdict, result.value.reason.strip()
        passage, span = locate_quote(result.value.quote, passages)
        if result.value.quote.strip() and span is None:
            reason += " (the quoted text was not found in the sources, so it is not shown)"
        if verdict == CONTRADICTED and span is None:
            verdict = UNSUPPORTED
            reason += " (marked unsupported: a contradiction needs a quote found in the sources)"
        return CheckedClaim(claim_no, claim, verdict, verifier, passage, span, reason.strip())

    # step 3
    @staticmethod
    def score(checked: list[CheckedClaim]) -> tuple[float | None, str]:
        """(faithfulness, status): supported / claims with a verdict; None when there is nothing to score."""
        if not checked:
            return None, "no_claims"
        decided = [c for c in checked if c.verdict != UNVERIFIED]
        if not decided:
            return None, "unverified"
        return sum(c.verdict == SUPPORTED for c in decided) / len(decided), "verified"


def locate_quote(quote: str, passages: list[Passage]) -> tuple[Passage | None, tuple[int, int] | None]:
    for passage in passages:
        span = find_span(passage.text, quote)
        if span:
            return passage, span
    return None, None
