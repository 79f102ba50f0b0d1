"""A deterministic grounding pre-check that runs before the model verifier.

Numbers (1,000 / 1000 / one thousand; 21 million; 5% / 5 percent), years and named entities in a claim
must occur in the context; a claim that names one that occurs nowhere is unsupported, with the missing
token named and no model call. A claim found verbatim in the context (after normalisation) is supported,
also without a model call. Everything else is left to the model. It errs on the side of not deciding:
an entity counts as missing only when none of its words occurs in the context.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

SMALL = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
SCALES = {
    "hundred": 100,
    "thousand": 1_000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "trillion": 1_000_000_000_000,
}
NOT_ENTITIES = frozenset(
    """a an the this that these those it its he she they we i you his her their our my
yes no not and or but if in on at of for to from by with as is are was were be been also however although
after before during while when where which who what why how there here some many most all any each every
both either neither one two three first second third new old other such than then thus so because""".split()
)
MONTHS = frozenset("january february march april may june july august september october november december".split())

NUMBER = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*(%|percent|per cent))?"
    r"(?:\s+(hundred|thousand|million|billion|trillion))?",
    re.IGNORECASE,
)
_SMALL_WORD = "(?:" + "|".join(sorted(SMALL, key=len, reverse=True)) + ")"
WORD_NUMBER = re.compile(
    rf"\b({_SMALL_WORD}(?:[\s-]+{_SMALL_WORD})*)(?:\s+(hundred|thousand|million|billion|trillion))?"
    r"(?:\s+(thousand|million|billion))?\b",
    re.IGNORECASE,
)
CAPITALISED = re.compile(r"\b([A-Z][\w'’\-]*(?:\s+(?:of|de|van|von|la|le|du|da|al)?\s*[A-Z][\w'’\-]*)*)")
TOKEN = re.compile(r"[a-z0-9]+")


@dataclass
class PrecheckResult:
    verdict: str | None  # supported | unsupported | None (undecided: ask the model)
    reason: str = ""
    missing: list[str] = field(default_factory=list)


def fold(text: str) -> str:
    """Lower case, accents and typographic punctuation folded, white space collapsed."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.replace("’", "'").replace("–", "-").replace("—", "-").replace("\u00a0", " ")
    return " ".join(text.lower().split())


def numbers(text: str) -> dict[float, str]:
    """Numeric values in text (digits, number words, scales, percentages) -> how they were written."""
    found: dict[float, str] = {}
    for match in NUMBER.finditer(text):
        value = float(match.group(1).replace(",", ""))
        if match.group(3):
            value *= SCALES[match.group(3).lower()]
        found.setdefault(value, match.group(0).strip())
    for match in WORD_NUMBER.finditer(text):
        words = re.split(r"[\s-]+", match.group(1).strip().lower())
        value = float(sum(SMALL[w] for w in words if w in SMALL))
        for scale in (match.group(2), match.group(3)):
            if scale:
                value *= SCALES[scale.lower()]
        if match.group(2) or len(words) > 1 or value > 10:
            found.setdefault(value, match.group(0).strip())
    return found


def entities(claim: str) -> list[str]:
    """Capitalised names and acronyms; a sentence-initial capital counts only inside a longer name."""
    out = []
    for match in CAPITALISED.finditer(claim):
        name = match.group(1).strip(" -'")
        words = [w for w in name.split() if w.lower() not in NOT_ENTITIES]
        if not words:
            continue
        starts_sentence = match.start() == 0 or re.search(r"[.!?]\s*$", claim[: match.start()])
        if starts_sentence and len(name.split()) == 1 and not name.isupper():
            continue
        out.append(" ".join(words))
    return out


def _strip_claim(claim: str) -> str:
    return re.sub(r"\s*\[\d+(?:\s*,\s*\d+)*\]", "", claim).strip().rstrip(".!?;:").strip()


def precheck(claim: str, context: str) -> PrecheckResult:
    folded_claim, folded_context = fold(_strip_claim(claim)), fold(context)
    if len(folded_claim.split()) >= 3 and folded_claim in folded_context:
        return PrecheckResult("supported", "found verbatim in the retrieved sources")
    context_numbers = numbers(context)
    missing = [written for value, written in numbers(claim).items() if value not in context_numbers]
    context_tokens = set(TOKEN.findall(folded_context))
    for name in entities(claim):
        tokens = [t for t in TOKEN.findall(fold(name)) if t not in MONTHS and not t.isdigit()]
        if tokens and not any(t in context_tokens or t.rstrip("s") in context_tokens for t in tokens):
            missing.append(name)
    if missing:
        listed = ", ".join(f"'{m}'" for m in missing)
        verb = "appears" if len(missing) == 1 else "appear"
        return PrecheckResult("unsupported", f"{listed} {verb} in no retrieved source", missing)
    return PrecheckResult(None)
