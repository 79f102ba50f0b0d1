"""Sentences first, atomic claims where one fails (setting `claim_granularity`).

Bespoke-MiniCheck is trained and ranked on a sentence of a model's answer checked against a document, so each
answer sentence is first verified as it stands (its citations dropped), down the verifier chain (the pre-check
first where the chain has it). A model verifier reads it in one call against a document of the passages it cites
together (in rank order, numbered as in the context block); a sentence that cites none, or that those do not
support, gets one more call against the whole retrieved context, laid out the same for every sentence so that the
server's prompt cache holds it. A sentence a verifier supports is one claim with its evidence (the passage of
that document sharing most words with it). Only a sentence that fails there is decomposed into atomic claims,
which are then verified passage by passage and classified as any claim is, so that what is false is named
exactly.

- auto: sentences first, atomic claims only for a sentence that fails;
- sentence: each sentence is one claim, never split (a failing sentence is classified as a whole);
- atomic: every sentence is split into atomic claims (no sentence pass).

The callers (the streamed answer loop, given answers) decide how a failing sentence is decomposed: on its own
as it streams, or together with the answer's other failing sentences in one extraction call.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pipeline import tracing
from pipeline.text import strip_citations
from pipeline.verification.base import Item
from pipeline.verification.claims import SUPPORTED, CheckedClaim, Passage

AUTO, SENTENCE, ATOMIC = "auto", "sentence", "atomic"
GRANULARITIES = (AUTO, SENTENCE, ATOMIC)


def granularity_of(config: dict | None) -> str:
    """The claim granularity a run or evaluation recorded; one recorded before the setting existed was atomic."""
    return (config or {}).get("claim_granularity") or ATOMIC


def claims_label(config: dict | None) -> str:
    """What is shown beside a faithfulness figure: the claims it counts ("claims: auto")."""
    return f"claims: {granularity_of(config)}"


def sentence_claim(text: str) -> str:
    """A sentence as the claim it is checked as: its citation markers dropped, on one line."""
    return " ".join(strip_citations(text).split())


def checks_sentences(granularity: str) -> bool:
    """Whether sentences are verified as they stand before any extraction."""
    return granularity != ATOMIC


def stands(granularity: str, verdict: CheckedClaim) -> bool:
    """Whether a sentence's own verdict is final (else the sentence is decomposed into atomic claims)."""
    return granularity == SENTENCE or verdict.verdict == SUPPORTED


def verify_sentences(
    checker,
    items: Sequence[Item],
    passages: list[Passage],
    question: str,
    granularity: str,
    together: bool = False,
    deferred: list[CheckedClaim] | None = None,
) -> list[CheckedClaim]:
    """Each (number, sentence claim, the passages it cites) down the verifier chain, in order. `together`: in this
    thread, every verifier given all the sentences at once, so that consecutive calls share a passage (one slot);
    else each sentence on a pool verify_concurrency wide. A rejected sentence is classified (now, or put in
    `deferred`) only where it stands as a claim (granularity sentence); in auto it is decomposed instead."""
    if not items:
        return []
    # auto: a rejected sentence is not classified (its atomic claims are); collected here and dropped
    rejected = deferred if granularity == SENTENCE else []
    if granularity == SENTENCE and deferred is None:
        rejected = None  # classified now, as verify_claims does without a deferred list
    with tracing.step("verify sentences", sentences=len(items), granularity=granularity):
        if together or len(items) == 1:
            return checker.verify_sentences(list(items), passages, question, rejected)
        with ThreadPoolExecutor(max_workers=checker.settings.verify_concurrency) as pool:
            futures = [
                tracing.submit(pool, checker.verify_sentences, [item], passages, question, rejected) for item in items
            ]
            return [verdict for future in futures for verdict in future.result()]
