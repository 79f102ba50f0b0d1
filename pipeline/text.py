"""Plain-text helpers: content words, sentences with offsets, locating a quoted span, citations."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers him his how i if in into is it its itself just me more most my no nor not of
off on once only or other our out over own same she should so some such than that the their them then there
these they this those through to too under until up very was we were what when where which while who whom
why will with would you your which also may might must shall than us""".split()
)

WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
CITATION = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")


def content_words(text: str) -> set[str]:
    words = set()
    for word in WORD.findall(text.lower()):
        word = word.replace(",", "") if re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", word) else word
        if word in STOPWORDS or (len(word) < 3 and not word[0].isdigit()):
            continue
        words.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word[0].isdigit() else word)
    return words


def overlap(a: str, b: str) -> float:
    """Share of a's content words that also occur in b."""
    words = content_words(a)
    return len(words & content_words(b)) / len(words) if words else 0.0


@dataclass
class Sentence:
    text: str
    start: int
    end: int
    kind: str = "sentence"  # sentence | item (a list item or bullet) | heading (a title or a lead-in ending ":")


# Words whose trailing full stop does not end a sentence (lower case, without the final dot).
ABBREVIATIONS = frozenset(
    """e.g i.e etc vs mr mrs ms dr prof st jr sr no nos approx inc ltd co corp fig figs al ca cf ed eds est
dept govt gen col lt sgt mt ft oz lb lbs pp vol vols jan feb mar apr jun jul aug sep sept oct nov dec
mon tue wed thu fri sat sun a.m p.m u.s u.k u.n u.s.a e.u d.c ph.d m.d b.a m.a""".split()
)
SENTENCE_END = re.compile(r"([.!?][\"')\]*]*)\s+(?=[A-Z0-9\"'(\[*•])")
# A marker at the start of a line or an inline item: bullets, markdown headings, "1.", "1)", "(a)", "Step 3:".
LINE_MARKER = re.compile(
    r"^(?:#{1,6}\s+|[-*•+]\s+|\(?\d{1,3}[.)](?=\s|$)\s*|\(?[a-z][.)](?=\s)\s*|[Ss]tep\s+\d{1,3}\s*[:.)-]\s*)"
)
# "passage 1", "(Passage 2)", "Passages 1 and 3", "[1]": references to the sources, not content.
REFERENCE = re.compile(
    r"\(?\b(?:passage|source|document|context)s?\s*#?\d+(?:\s*(?:,|and|&|-)\s*\d+)*\)?|\[\d+(?:\s*[,;]\s*\d+)*\]",
    re.IGNORECASE,
)
INLINE_BULLET = re.compile(r"\s+[*•]\s+(?=\S)")


def sentences(text: str) -> list[Sentence]:
    """Sentences with their character offsets in text, knowing the shape of real answers: list items,
    bullets (also several on one line), markdown headings and bold, numbered steps ("1.", "Step 3:"),
    abbreviations ("e.g.", "U.S.", "Dr.") and citations ("[1]"). Markers are left out of the sentence;
    a piece with no letter in it (a bare "6.") is not a sentence. text[s.start:s.end] == s.text."""
    out: list[Sentence] = []
    for line_start, line in _lines(text):
        marker = LINE_MARKER.match(line)
        is_heading = line.startswith("#") or bool(re.fullmatch(r"\s*(\*\*|__)[^*_]+(\*\*|__):?\s*", line))
        kind = "heading" if is_heading else "item" if marker else "sentence"
        for item_start, item in _items(line, marker.end() if marker else 0):
            for start, end in _split(item):
                _append_sentence(out, text, line_start + item_start + start, line_start + item_start + end, kind)
    return out


def _lines(text: str):
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)


def _items(line: str, start: int):
    """A line cut at inline bullets ("* a * b") when the line itself is a bullet item."""
    if not re.match(r"\s*[*•]\s", line):
        yield start, line[start:]
        return
    at = start
    for match in INLINE_BULLET.finditer(line, start):
        yield at, line[at : match.start()]
        at = match.end()
    yield at, line[at:]


def _split(piece: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in SENTENCE_END.finditer(piece):
        before = piece[start : match.start(1)]
        word = re.search(r"([\w.]+)$", before)
        if match.group(1).startswith(".") and word and _abbreviation(word.group(1)):
            continue
        if re.fullmatch(r"\s*\(?\d{1,3}", before):  # "2. Knead it": the number is the item's marker
            continue
        spans.append((start, match.end(1)))
        start = match.end()
    spans.append((start, len(piece)))
    return spans


def _abbreviation(word: str) -> bool:
    lowered = word.lower().rstrip(".")
    if lowered in ABBREVIATIONS:
        return True
    if re.fullmatch(r"[a-z]", lowered) and word.isupper():  # an initial: "J. Smith"
        return True
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", lowered))  # "U.S", "e.g"


def _append_sentence(out: list[Sentence], text: str, start: int, end: int, kind: str) -> None:
    piece = text[start:end]
    marker = LINE_MARKER.match(piece.lstrip())
    if marker:  # an inline item: "... grill. 2. Spread the coals"
        start += len(piece) - len(piece.lstrip()) + marker.end()
        piece = text[start:end]
        kind = "item" if kind == "sentence" else kind
    stripped = piece.strip()
    if not re.search(r"[^\W\d_]", REFERENCE.sub("", stripped)):
        return
    offset = start + piece.index(stripped)
    if kind == "sentence" and stripped.endswith(":") and len(stripped.split()) <= 25:
        kind = "heading"
    out.append(Sentence(stripped, offset, offset + len(stripped), kind))


def best_sentence(text: str, claim: str) -> Sentence | None:
    """The sentence of text that shares the most content words with the claim."""
    claim_words = content_words(claim)
    scored = [(len(claim_words & content_words(s.text)), -i, s) for i, s in enumerate(sentences(text))]
    if not scored:
        return None
    best = max(scored, key=lambda t: (t[0], t[1]))
    return best[2] if best[0] > 0 else None


def find_span(text: str, quote: str) -> tuple[int, int] | None:
    """Offsets of quote in text: exact, else ignoring case and runs of white space. None if absent."""
    quote = quote.strip()
    if not quote:
        return None
    at = text.find(quote)
    if at >= 0:
        return at, at + len(quote)
    pattern = r"\s+".join(re.escape(part) for part in quote.split())
    match = re.search(pattern, text, flags=re.IGNORECASE)
    return (match.start(), match.end()) if match else None


_SOURCES = r"(?:the\s+)?(?:given\s+|provided\s+|above\s+)?(?:passages?|sources?|context|documents?|texts?|information)"
# Statements about the sources, the answer or the answerer, not about the world: not factual claims.
META_STATEMENT = re.compile(
    r"^(?:note:\s*)?(?:"
    r"(?:i\s+am|i'm|we\s+are)\s+(?:unable|not\s+able|sorry)|i\s+(?:cannot|can't|could\s+not|do\s+not|don't)\s+"
    r"(?:answer|find|provide|determine|say)|unable\s+to\s+(?:answer|determine|find)|"
    r"(?:unfortunately,?\s+)?(?:there\s+is|there's)\s+(?:no|not\s+enough)\s+(?:\w+\s+){0,3}?"
    r"(?:information|mention|data|details?)|"
    r"i\s+hope\s+this\s+helps|let\s+me\s+know|here\s+(?:is|are)\s+(?:the|a|some)\b[^.]*:$"
    r")"
    r"|(?:^|\b)" + _SOURCES + r"\s*(?:\d+\s*)?(?:do(?:es)?\s+not|don't|doesn't|did\s+not|fails?\s+to)\s+"
    r"(?:\w+\s+)?(?:provide|mention|contain|say|include|specify|state|address|discuss|give|offer|cover)"
    r"|\bis\s+not\s+(?:explicitly\s+|directly\s+|clearly\s+)?(?:mentioned|stated|specified|provided|given|"
    r"addressed|discussed)\s+in\s+" + _SOURCES,
    re.IGNORECASE,
)


# Hedges about what the sources allow, wherever they stand in the sentence: "Therefore, I cannot provide ...",
# "it is not possible to give a complete answer", "without more information", "none of the passages ...".
HEDGE = re.compile(
    r"^(?:(?:therefore|thus|so|however|unfortunately|in\s+conclusion|overall|note)[,:]?\s+)?(?:i|we)\s+"
    r"(?:cannot|can't|could\s+not|couldn't|am\s+unable\s+to|are\s+unable\s+to)\s+"
    r"(?:answer|find|provide|determine|say|give|tell)"
    r"|\b(?:it\s+is|it's|it\s+was)\s+(?:not\s+(?:possible|clear)|impossible|unclear|difficult)\s+to\s+"
    r"(?:give|provide|determine|say|answer|tell|know|identify)"
    r"|\b(?:cannot|can't|could\s+not)\s+be\s+(?:determined|answered)"
    r"|\bwithout\s+(?:more|additional|further)\s+(?:information|context|details|data)"
    r"|\bnone\s+of\s+the\s+(?:passages|sources|documents|texts)"
    r"|^" + _SOURCES + r"\s+(?:primarily|mainly|mostly)?\s*(?:focus|focuses|deal|deals)\s+(?:on|with)",
    re.IGNORECASE,
)


def is_meta_statement(text: str) -> bool:
    """ "I am unable to answer from the passages", "Passage 3 does not mention X": about the sources or the
    answer, not a factual claim to check; so are hedges about what the sources allow ("it is not possible to
    give a complete answer from the passages")."""
    text = strip_citations(text).strip()
    return bool(META_STATEMENT.search(text) or HEDGE.search(text))


def strip_references(text: str) -> str:
    """Text without citations and "passage N" references."""
    return " ".join(REFERENCE.sub(" ", text).split())


def strip_citations(text: str) -> str:
    return CITATION.sub("", text).strip()


def cited_numbers(text: str) -> set[int]:
    numbers = set()
    for group in CITATION.findall(text):
        numbers.update(int(n) for n in re.findall(r"\d+", group))
    return numbers


def short_source(source: str | None) -> str:
    """A source's file name, from a path with either kind of slash."""
    return (source or "").replace("\\", "/").rsplit("/", 1)[-1]


def one_line(text: str) -> str:
    return " ".join(text.split())


def question_key(question: str) -> str:
    """The same-question key, wherever questions are matched (leave-one-out, Compare, imported datasets): Unicode
    NFKC (full-width letters are letters), zero-width and other format characters removed, case folded, and only
    the words kept, so punctuation and spacing make no other question."""
    text = "".join(ch for ch in unicodedata.normalize("NFKC", question) if unicodedata.category(ch) != "Cf")
    return " ".join(re.findall(r"\w+", text.casefold()))


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """A count with its noun in the right number, the count with thousands separators: plural(1, "correction")
    is '1 correction', plural(1234, "run") '1,234 runs', plural(2, "reply", "replies") '2 replies'."""
    return f"{n:,} {noun if n == 1 else plural_form or noun + 's'}"
