"""A deterministic grounding pre-check that runs before the model verifier.

It looks for signals against a claim: a number (1,000 / 1000 / one thousand; 21 million; 5% / 5 percent), a
time of day (5 PM / 17:30), a year, an acronym, a name or a capitalised word that occurs neither in the context
nor in the question, or a claim made mostly of words found nowhere. Only the signals chosen leave one style
out on the three RAGTruth development sets (chosen on two styles, measured on the third, all three ways) that held
precision >= 0.90 on every style they were held out on (DECISIVE: numbers, percentages, times, acronyms;
bench/precheck_cv.py) mark a claim unsupported, with the missing token named and no model call; the others are
hints: the claim goes on to the next verifier with the hint in its reason. A claim found verbatim in the context
(after normalisation) is supported, also without a model call. Statements about the sources and hedges raise no
signal. It errs on the side of not deciding: a name counts as missing only when none of its words, nor another
form of them (US for USA, a demonym, a state's postal code), occurs in the context or the question.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from pipeline.text import LINE_MARKER, content_words, is_meta_statement, strip_references
from pipeline.verification.claims import Verdict

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
# Dates are checked by their numbers; the names of days and months, also shortened, are not names to look up.
CALENDAR = MONTHS | frozenset(
    """monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
# Another name for the same place: countries' short forms, and the United States' states by postal code.
STATES = {
    "al": "alabama", "ak": "alaska", "az": "arizona", "ar": "arkansas", "ca": "california", "co": "colorado",
    "ct": "connecticut", "de": "delaware", "fl": "florida", "ga": "georgia", "hi": "hawaii", "id": "idaho",
    "il": "illinois", "in": "indiana", "ia": "iowa", "ks": "kansas", "ky": "kentucky", "la": "louisiana",
    "me": "maine", "md": "maryland", "ma": "massachusetts", "mi": "michigan", "mn": "minnesota",
    "ms": "mississippi", "mo": "missouri", "mt": "montana", "ne": "nebraska", "nv": "nevada",
    "nh": "new hampshire", "nj": "new jersey", "nm": "new mexico", "ny": "new york", "nc": "north carolina",
    "nd": "north dakota", "oh": "ohio", "ok": "oklahoma", "or": "oregon", "pa": "pennsylvania",
    "ri": "rhode island", "sc": "south carolina", "sd": "south dakota", "tn": "tennessee", "tx": "texas",
    "ut": "utah", "vt": "vermont", "va": "virginia", "wa": "washington", "wv": "west virginia",
    "wi": "wisconsin", "wy": "wyoming", "dc": "district of columbia",
}  # fmt: skip
PLACE_FORMS = [
    {"us", "usa", "united states", "united states of america", "america", "american", "americans"},
    {"uk", "united kingdom", "britain", "great britain", "british"},
    {"eu", "european union"},
    {"un", "united nations"},
    {"uae", "united arab emirates", "emirates"},
    *({code, name} for code, name in STATES.items()),
]

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


# What the pre-check can find against a claim: a number, percentage, year or time of day no source gives (nor
# the question), an acronym, a name of several words or a single capitalised word found nowhere, or a claim
# made mostly of words no source or question contains (novel).
SIGNAL_KINDS = ("number", "percent", "year", "time", "acronym", "name", "word", "novel")
# The signals that decide "unsupported" on their own: those chosen on every pair of the three development styles
# that kept precision >= 0.90 on the style left out, each time (bench/precheck_cv.py, which a test checks this
# against). The others are hints: the claim goes on to the next verifier with the signal in its reason.
DECISIVE = frozenset({"number", "percent", "time", "acronym"})


@dataclass(frozen=True)
class Signal:
    """One reason the pre-check found to doubt a claim: `kind` (SIGNAL_KINDS) and what is missing, as written."""

    kind: str
    token: str


@dataclass
class PrecheckResult:
    verdict: str | None  # supported | unsupported | None (undecided: ask the model)
    reason: str = ""
    missing: list[str] = field(default_factory=list)
    hints: list[Signal] = field(default_factory=list)  # signals too unreliable to decide, passed on with the claim


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


UNITS = frozenset(
    """fahrenheit celsius kelvin f c k am pm a.m p.m mph kph km kg mg ml cm mm ft lb lbs oz hr hrs min sec kwh
mb gb tb""".split()
)
# "5 PM", "5:30 p.m.", "17:30", "noon": a time of day, compared as (hour, minute) in 24-hour time.
TIME_12 = re.compile(r"\b(\d{1,2})(?:[:.](\d{1,2}))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
TIME_24 = re.compile(r"(?<![\d.:])([01]?\d|2[0-4]):([0-5]?\d)(?![\d:])")
TIME_WORDS = re.compile(r"\b(noon|midday|midnight)\b", re.IGNORECASE)
# The answer's own labels: "Option 2", "Step 3", "Method B" name a part of the answer, not a fact.
ANSWER_LABEL = re.compile(
    r"\b(?:step|option|method|tip|way|approach|scenario|solution|answer|strategy|idea|reason|choice|"
    r"alternative|example)s?\s+(?:#\s*)?(?:\d{1,2}|(?-i:[A-H])(?![\w']))"
    r"(?:\s*(?:,|and|&|-|to|or)\s*(?:\d{1,2}|(?-i:[A-H])(?![\w'])))*",
    re.IGNORECASE,
)
# Advice and hedges that no source needs to say: not judged by their vocabulary.
ADVICE = re.compile(
    r"\b(?:it\s+is|it's)\s+(?:always\s+)?(?:important|recommended|advisable|best|essential|wise|crucial|"
    r"a\s+good\s+idea)\s+to\b|\b(?:consult|talk\s+to|speak\s+(?:to|with)|check\s+with)\s+(?:a|an|your)\b|"
    r"\byou\s+(?:may|might|should|can)\s+(?:also\s+)?(?:want|wish|need)\s+to\b",
    re.IGNORECASE,
)
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
EXACT_CONVERSIONS = (lambda v: v * 60, lambda v: v / 60)  # hours <-> minutes, minutes <-> seconds


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
    text = ANSWER_LABEL.sub(" ", text)
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
    """A name is known when one of its words occurs in the context or the question, also in another form
    ("Singaporean" for Singapore, "Wi-Fi" for WiFi, "CA" for California, "US" for the United States), or when
    it is an acronym of a name there ("FLSA", "Fair Labor Standards Act")."""
    tokens = [t for t in TOKEN.findall(fold(name)) if t not in CALENDAR and not t.isdigit()]
    if not tokens or "".join(tokens) in context_tokens:
        return True
    for t in tokens:
        if t in context_tokens or t.rstrip("s") in context_tokens:
            return True
        # the same name in another form: a demonym or a plural ("Pakistani", "Pennsylvanians")
        if len(t) >= 6 and any(len(c) >= 5 and t.startswith(c) and len(t) - len(c) <= 4 for c in context_tokens):
            return True
    claimed = _acronyms(name) | ({name.replace(".", "").lower()} if name.replace(".", "").isupper() else set())
    # US / USA, FLSA / Fair Labor Standards Act: an acronym and the name it shortens are the same entity.
    return any(
        a == c or (len(a) >= 2 and len(c) >= 2 and (a.startswith(c) or c.startswith(a)))
        for a in claimed
        for c in context_acronyms
    )


def _place_forms(folded: str) -> set[str]:
    """The words of every other form of the places the text names ("usa" -> us, united, states, america...)."""
    words = set(TOKEN.findall(folded))
    out: set[str] = set()
    for forms in PLACE_FORMS:
        if any((f in words) if " " not in f else (f in folded) for f in forms):
            for f in forms:
                out.update(f.split())
    return out


def _split_identifiers(text: str) -> str:
    """Field names also as words: "OutdoorSeating" -> "Outdoor Seating", "take_out" -> "take out"."""
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ")


def times(text: str) -> dict[tuple[int, int], str]:
    """Times of day in text, in either notation ("5 PM", "5:30 p.m.", "17:30", "17:0", "noon") -> as written.
    A time without AM or PM below 13 ("5:30") may be either: it is given for both."""
    found: dict[tuple[int, int], str] = {}
    for match in TIME_12.finditer(text):
        hour, minute = int(match.group(1)) % 12, int(match.group(2) or 0)
        found.setdefault((hour + 12 * (match.group(3).lower() == "p"), minute), match.group(0).strip())
    for match in TIME_24.finditer(TIME_12.sub(" ", text)):
        hour, minute = int(match.group(1)) % 24, int(match.group(2))
        found.setdefault((hour, minute), match.group(0))
        if hour < 13:
            found.setdefault(((hour + 12) % 24, minute), match.group(0))
    for match in TIME_WORDS.finditer(text):
        found.setdefault((12, 0) if match.group(1).lower() != "midnight" else (0, 0), match.group(0))
    return found


APPROXIMATE = re.compile(
    r"(?:over|more\s+than|nearly|almost|about|around|approximately|roughly|some|up\s+to|less\s+than|under|"
    r"at\s+least|close\s+to|~)\s*\$?$",
    re.IGNORECASE,
)


def _approximates(value: float, written: str, claim: str, known_numbers: dict[float, str]) -> bool:
    """ "over 1,800" for 1,821, "about 20%" for 19.6%: a round figure the claim itself calls approximate."""
    at = claim.find(written)
    if at < 0 or not APPROXIMATE.search(claim[:at]):
        return False
    return any(v and abs(v - value) <= abs(v) * 0.1 for v in known_numbers)


def _derivable(value: float, context_numbers: dict[float, str]) -> bool:
    """A value the answer may legitimately derive: a unit conversion (°F/°C, in/cm, mi/km, lb/kg, hours/minutes)."""
    known = [v for v in context_numbers if v]
    for v in known:
        for convert in CONVERSIONS:
            if abs(convert(v) - value) <= max(0.6, abs(value) * 0.02):
                return True
        if any(abs(convert(v) - value) < 1e-6 for convert in EXACT_CONVERSIONS):
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


def signals(
    claim: str, context: str, question: str = "", novel_share: float = 0.75, novel_words_min: int = 8
) -> tuple[bool, list[Signal]]:
    """(the claim stands verbatim in the context, the signals against it). Numbers and names the question
    gives count as known; statements about the sources and hedges are no claims and raise no signal."""
    if is_meta_statement(claim):
        return False, []
    stripped = _strip_claim(claim)
    folded_claim, folded_context = fold(stripped), fold(context)
    if len(folded_claim.split()) >= 3 and folded_claim in folded_context:
        return True, []
    known = context + "\n" + question + "\n" + _split_identifiers(context)
    found = []
    known_times = times(known)
    claimed_times = times(stripped)
    unknown: dict[str, bool] = {}
    for at, written in claimed_times.items():
        unknown[written] = unknown.get(written, True) and at not in known_times
    found += [Signal("time", written) for written, missing in unknown.items() if missing]
    for pattern in (TIME_12, TIME_24, TIME_WORDS):
        stripped = pattern.sub(" ", stripped)
    known_numbers = numbers(known, small_words=True)
    found += [
        Signal(_number_kind(value, written), written)
        for value, written in numbers(stripped).items()
        if value not in known_numbers
        and not _derivable(value, known_numbers)
        and not _approximates(value, written, stripped, known_numbers)
    ]
    folded_known = fold(known)
    known_tokens = set(TOKEN.findall(folded_known)) | _place_forms(folded_known)
    known_acronyms = _acronyms(known)
    for name in entities(stripped):
        if not _known_name(name, known_tokens, known_acronyms):
            found.append(Signal(_name_kind(name), name))
    if not found and not ADVICE.search(stripped):
        words, novel = novel_words(stripped, known)
        if words and len(novel) >= novel_words_min and len(novel) / len(words) >= novel_share:
            found.append(Signal("novel", f"{len(novel)} of {len(words)}:" + ",".join(sorted(novel))))
    return False, found


def _number_kind(value: float, written: str) -> str:
    if re.fullmatch(r"1[5-9]\d\d|20\d\d", written):
        return "year"
    return "percent" if "%" in written or "cent" in written.lower() else "number"


def _name_kind(name: str) -> str:
    if name.replace(".", "").isupper():
        return "acronym"
    return "name" if len(name.split()) > 1 else "word"


def precheck(
    claim: str,
    context: str,
    question: str = "",
    novel_share: float = 0.75,
    novel_words_min: int = 8,
    decisive: frozenset[str] = DECISIVE,
) -> PrecheckResult:
    """Unsupported when the claim raises a `decisive` signal (a number, percentage, time or acronym found
    neither in the context nor in the question nor derivable from them); supported when it stands verbatim
    in the context; otherwise undecided, with the other signals (a year, a name, a capitalised word, a claim
    made mostly of words no source contains: `novel_share` of its content words and at least
    `novel_words_min` of them) as hints in the reason, for the next verifier to decide."""
    verbatim, found = signals(claim, context, question, novel_share, novel_words_min)
    if verbatim:
        return PrecheckResult(Verdict.SUPPORTED, "found verbatim in the retrieved sources")
    if not found:
        return PrecheckResult(None)
    deciding = [s for s in found if s.kind in decisive]
    hints = [s for s in found if s.kind not in decisive]
    if deciding:
        missing = [s.token for s in deciding]
        reason = describe(deciding) + (f"; also {describe(hints)}" if hints else "")
        return PrecheckResult(Verdict.UNSUPPORTED, reason, missing, hints)
    return PrecheckResult(None, describe(hints), [], hints)


def describe(found: list[Signal]) -> str:
    """ "'1999' appears in no retrieved source", "9 of its 11 content words (…) occur in no retrieved source"."""
    parts = []
    names = [s.token for s in found if s.kind != "novel"]
    if names:
        listed = ", ".join(f"'{m}'" for m in names)
        parts.append(f"{listed} {'appears' if len(names) == 1 else 'appear'} in no retrieved source")
    for s in found:
        if s.kind == "novel":
            counts, words = s.token.split(":", 1)
            novel, total = counts.split(" of ")
            shown = ", ".join(words.split(",")[:6])
            parts.append(f"{novel} of its {total} content words ({shown}…) occur in no retrieved source")
    return "; ".join(parts)
