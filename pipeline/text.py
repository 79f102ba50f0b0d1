"""Plain-text helpers: content words, sentences with offsets, locating a quoted span, citations."""

from __future__ import annotations

import re
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
SENTENCE_END = re.compile(r"([.!?][\"')\]]*)\s+(?=[A-Z0-9\"'(\[])|\n\s*\n")


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


def sentences(text: str) -> list[Sentence]:
    """Sentences with their character offsets in text (stripped of surrounding white space)."""
    out, start = [], 0
    for match in SENTENCE_END.finditer(text):
        _append_sentence(out, text, start, match.end(1) if match.group(1) else match.start())
        start = match.end()
    _append_sentence(out, text, start, len(text))
    return out


def _append_sentence(out: list[Sentence], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        offset = start + piece.index(stripped)
        out.append(Sentence(stripped, offset, offset + len(stripped)))


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
