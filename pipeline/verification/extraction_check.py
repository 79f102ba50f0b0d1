"""Claims that belong to their sentence: what the claim extractor returns is checked before anything is verified.

A claim is an extraction error when it does not come from the answer text it was extracted from: it copies the
question, the extraction prompt's own example, or text found nowhere in its sentence (another passage, a
guess), or it repeats a claim already made in the same answer. Such a claim is kept in the run with its reason
(verdict `extraction_error`), never verified and never counted in faithfulness.

A claim "comes from" its sentence when at least half of its content words are in the sentence (with the sentence
before it, which pronouns refer to); a claim whose content words are mostly the question's or the example's, and
not the sentence's, copies them.
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.text import content_words, strip_citations

FROM_SENTENCE = 0.5  # share of a claim's content words that must be in its sentence (with the one before)
COPIED = 0.8  # share of a claim's content words in the question or the example that makes it a copy


def _share(words: set[str], pool: set[str]) -> float:
    return len(words & pool) / len(words) if words else 1.0


def claim_key(claim: str) -> str:
    """The claim as repeats are recognised: lower case, citations, punctuation and spacing ignored."""
    text = strip_citations(claim).lower()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text).split())


def extraction_error(
    claim: str, sentence: str, question: str = "", earlier: str = "", examples: str = ""
) -> str | None:
    """Why a claim extracted from `sentence` is not one of its claims; None when it is."""
    if claim.rstrip().endswith("?"):
        return "a question, not a claim (copies the question)"
    words = content_words(claim)
    if not words or _share(words, content_words(sentence)) >= FROM_SENTENCE:
        return None
    if _share(words, content_words(question)) >= COPIED:
        return "copies the question, not a statement of its answer sentence"
    if examples and _share(words, content_words(examples)) >= COPIED:
        return "copies the extraction prompt's example, not its answer sentence"
    if _share(words, content_words(f"{earlier} {sentence}")) >= FROM_SENTENCE:
        return None  # its names come from the sentence before (a pronoun replaced)
    return "not in its answer sentence (from another passage, or made up by the extractor)"


REPEAT = "repeats an earlier claim of the same answer"


def repeats(claim: str, made: Iterable[str]) -> bool:
    """Whether the claim says again one of `made` (the answer's claims so far)."""
    key = claim_key(claim)
    return any(claim_key(m) == key for m in made)


def extraction_errors(
    claims: Iterable[str],
    sentence: str,
    question: str = "",
    earlier: str = "",
    examples: str = "",
    made_before: Iterable[str] = (),
) -> list[str | None]:
    """A reason (or None) per claim; a claim that repeats an earlier one of the list, or one of `made_before`
    (the answer's claims so far), is a repeat."""
    seen = {claim_key(c) for c in made_before}
    reasons = []
    for claim in claims:
        key = claim_key(claim)
        reason = REPEAT if key in seen else None
        reasons.append(reason or extraction_error(claim, sentence, question, earlier, examples))
        seen.add(key)
    return reasons
