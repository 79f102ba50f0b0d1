"""Pieces of the streamed answer loop: complete sentences as the answer grows, what each sentence cites, the
order in which a sentence's claims try the passages, and the short view of the context that grading reads."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline import prompting
from pipeline.text import Sentence, best_sentence, cited_numbers, sentences, short_source
from pipeline.verification.claims import Passage

LEADING_CITATIONS = re.compile(r"^(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])+\s*")
VIEW_WORDS = 60  # at most this many words of each passage in the grading view


@dataclass
class LiveSentence:
    """A finished sentence of the answer as it streams: its index, its text without the citations that open it,
    its span in the reply as `pipeline.text.sentences` cuts it, the passages it cites."""

    index: int
    text: str
    start: int
    end: int
    cited: frozenset[int]


class SentenceFeed:
    """Takes the answer's text piece by piece and hands out each sentence once it is finished: when the next
    sentence has begun (so the citations right after it, "… passages. [1] Next", are in), or at the end."""

    def __init__(self):
        self.text = ""
        self.given = 0

    def add(self, delta: str) -> list[LiveSentence]:
        self.text += delta
        return self._take(final=False)

    def finish(self) -> list[LiveSentence]:
        return self._take(final=True)

    def _take(self, final: bool) -> list[LiveSentence]:
        parts = sentences(self.text)
        ready = len(parts) if final else len(parts) - 1
        out = [self._live(parts, i) for i in range(self.given, ready)]
        self.given = max(self.given, ready)
        return out

    def _live(self, parts: list[Sentence], i: int) -> LiveSentence:
        part = parts[i]
        own = LEADING_CITATIONS.sub("", part.text)  # citations that open a sentence close the one before
        following = self.text[part.end : parts[i + 1].start] if i + 1 < len(parts) else self.text[part.end :]
        opening = LEADING_CITATIONS.match(parts[i + 1].text) if i + 1 < len(parts) else None
        cited = cited_numbers(own + following + (opening.group() if opening else ""))
        return LiveSentence(i, own, part.start, part.end, frozenset(cited))


def grade_view(question: str, passages: list[Passage]) -> str:
    """The context as grading reads it: of each passage, only the sentence closest to the question (or its
    first words when none shares a word with it), at most VIEW_WORDS words."""
    pieces = []
    for p in passages:
        sentence = best_sentence(p.text, question)
        words = (sentence.text if sentence else p.text).split()
        pieces.append((p.n, short_source(p.source), " ".join(words[:VIEW_WORDS])))
    return prompting.number_passages(pieces)
