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

from pipeline.text import LINE_MARKER, content_words, strip_references

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


def numbers(text: str, small_words: bool = False) -> dict[float, str]:
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
        if small_words or match.group(2) or len(words) > 1 or value > 10:
            found.setdefault(value, match.group(0).strip())
    return found


UNITS = frozenset("fahrenheit celsius kelvin f c k".split())
# Words that open or link sentences in answers and are capitalised without being names.
DISCOURSE = frozenset(
    """according based note notes additionally overall therefore finally firstly secondly lastly moreover
furthermore in on at for to from by with as step steps answer question passage passages source sources
summary conclusion example instance please do don't try use make add""".split()
)
# "Based on the passages, ...", "According to passage 2, ...": attributions, not content.
ATTRIBUTION = re.compile(
    r"^(?:(?:based|according)\s+(?:on|to)\s+(?:the\s+)?(?:given|provided|above|following)?\s*"
    r"(?:information|passages?|sources?|context|text)?(?:\s*\d+)?\s*(?:provided|given|above)?\s*,\s*)",
    re.IGNORECASE,
)
LABEL = re.compile(r"^\**[^:.!?]{1,40}?\**:\s+(?=\S)")
STEP_REFERENCE = re.compile(r"\bsteps?\s+\d+(?:\s*(?:,|and|&|-|to|or)\s*\d+)*", re.IGNORECASE)
CONVERSIONS = (
    lambda v: (v - 32) * 5 / 9,  # °F -> °C
    lambda v: v * 9 / 5 + 32,  # °C -> °F
    lambda v: v * 2.54,  # in -> cm
    lambda v: v / 2.54,
    lambda v: v * 1.609,  # mi -> km
    lambda v: v / 1.609,
    lambda v: v * 0.4536,  # lb -> kg
    lambda v: v / 0.4536,
)


def entities(claim: str) -> list[str]:
    """Capitalised names and acronyms; a capital that opens a sentence, a clause after a colon, a quote
    or a list item counts only inside a longer name; units and single letters are not names."""
    out = []
    for match in CAPITALISED.finditer(claim):
        name = match.group(1).strip(" -'")
        words = [w for w in name.split() if w.lower() not in NOT_ENTITIES and w.lower() not in DISCOURSE]
        words = [w for w in words if w.lower().strip("'’") not in UNITS and len(w) > 1]
        if not words:
            continue
        before = claim[: match.start()]
        starts_sentence = not before.strip() or re.search(r"(?:[.!?:;\"“(*•]|\s-)\s*$", before)
        if starts_sentence and len(words) == 1 and not name.isupper():
            continue
        out.append(" ".join(words))
    return out


def _strip_claim(claim: str) -> str:
    text = LINE_MARKER.sub("", strip_references(claim).strip())
    text = STEP_REFERENCE.sub(" ", text)
    text = ATTRIBUTION.sub("", text.strip())
    text = LABEL.sub("", text)
    return " ".join(text.split()).strip("*_ ").rstrip(".!?;:").strip()


def _acronyms(text: str) -> set[str]:
    """Acronyms written in text, and those its capitalised names spell ("Fair Labor Standards Act": FLSA)."""
    found = {m.lower() for m in re.findall(r"\b[A-Z]{2,6}\b", text.replace(".", ""))}
    for match in CAPITALISED.finditer(text):
        words = [w for w in match.group(1).split() if w.lower() not in {"of", "and", "the", "for", "de"}]
        if len(words) >= 2:
            found.add("".join(w[0] for w in words).lower())
    return found


def _known_name(name: str, context_tokens: set[str], context_acronyms: set[str]) -> bool:
    tokens = [t for t in TOKEN.findall(fold(name)) if t not in MONTHS and not t.isdigit()]
    if not tokens or any(t in context_tokens or t.rstrip("s") in context_tokens for t in tokens):
        return True
    claimed = _acronyms(name) | ({name.replace(".", "").lower()} if name.replace(".", "").isupper() else set())
    # US / USA, FLSA / Fair Labor Standards Act: an acronym and the name it shortens are the same entity.
    return any(
        a == c or (len(a) >= 2 and len(c) >= 2 and (a.startswith(c) or c.startswith(a)))
        for a in claimed
        for c in context_acronyms
    )


def _derivable(value: float, context_numbers: dict[float, str]) -> bool:
    """A value the answer may legitimately derive: a unit conversion, a sum or difference of two values."""
    known = [v for v in context_numbers if v]
    for v in known:
        for convert in CONVERSIONS:
            if abs(convert(v) - value) <= max(0.6, abs(value) * 0.02):
                return True
    return False


SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ly", "ies", "es", "er", "s")


def stem(word: str) -> str:
    """A crude suffix stripper, enough to meet "cooking"/"cooked"/"cooks" as one word."""
    for suffix in SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def novel_words(claim: str, context: str, question: str = "") -> tuple[set[str], set[str]]:
    """(the claim's content words, those that occur neither in the context nor in the question), stemmed."""
    words = stems(_strip_claim(claim))
    return words, words - stems(context) - stems(question)


def precheck(
    claim: str,
    context: str,
    question: str = "",
    novel_share: float = 0.75,
    novel_words_min: int = 8,
) -> PrecheckResult:
    """Unsupported when the claim names a number or a name found neither in the context nor derivable
    from it, or when most of its content (at least `novel_share` of its content words, and at least
    `novel_words_min` of them) is found nowhere in the context or the question; supported when it stands
    verbatim in the context; otherwise undecided."""
    stripped = _strip_claim(claim)
    folded_claim, folded_context = fold(stripped), fold(context)
    if len(folded_claim.split()) >= 3 and folded_claim in folded_context:
        return PrecheckResult("supported", "found verbatim in the retrieved sources")
    context_numbers = numbers(context, small_words=True)
    missing = [
        written
        for value, written in numbers(stripped).items()
        if value not in context_numbers and not _derivable(value, context_numbers)
    ]
    context_tokens = set(TOKEN.findall(fold(context + " " + question)))
    context_acronyms = _acronyms(context + " " + question)
    for name in entities(stripped):
        if not _known_name(name, context_tokens, context_acronyms):
            missing.append(name)
    if not missing:
        words, novel = novel_words(stripped, context, question)
        if words and len(novel) >= novel_words_min and len(novel) / len(words) >= novel_share:
            shown = ", ".join(sorted(novel)[:6])
            return PrecheckResult(
                "unsupported",
                f"{len(novel)} of its {len(words)} content words ({shown}…) occur in no retrieved source",
                sorted(novel),
            )
    if missing:
        listed = ", ".join(f"'{m}'" for m in missing)
        verb = "appears" if len(missing) == 1 else "appear"
        return PrecheckResult("unsupported", f"{listed} {verb} in no retrieved source", missing)
    return PrecheckResult(None)
