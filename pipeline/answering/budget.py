"""The context budget (issue 30): the generator reads the chunks the grade judged relevant, each cut to one window
of whole sentences around those closest to the question, within `context_budget_tokens`; what was cut is kept so
that the run can show it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from pipeline.text import content_words, sentences
from pipeline.verification.claims import CheckedClaim, Passage


@cache
def _tokenizer():
    from llama_index.core.utils import get_tokenizer  # tiktoken, as the chunker counts chunk_size

    return get_tokenizer()


def count_tokens(text: str) -> int:
    return len(_tokenizer()(text))


@dataclass(frozen=True)
class Cut:
    """What the budget did to one retrieved passage."""

    n: int
    source: str
    tokens: int  # the whole chunk's
    kept: int  # tokens the generator reads (0: left out)
    why: str

    def line(self) -> str:
        return f"{self.kept} of {self.tokens} tokens: {self.why}"


@dataclass
class Budgeted:
    passages: list[Passage]  # what the generator reads, numbered as retrieved
    cuts: list[Cut]
    budget: int

    @property
    def kept_tokens(self) -> int:
        return sum(c.kept for c in self.cuts)

    @property
    def total_tokens(self) -> int:
        return sum(c.tokens for c in self.cuts)

    def summary(self) -> str:
        left_out = [c for c in self.cuts if c.kept == 0]
        return (
            f"context budget {self.budget} tokens: the generator reads {self.kept_tokens} of {self.total_tokens} "
            f"tokens from {len(self.passages)} of {len(self.cuts)} chunks"
            + (f" ({len(left_out)} left out)" if left_out else "")
        )


def within_budget(question: str, passages: list[Passage], budget: int, relevant: set[int] | None) -> Budgeted:
    """The passages the generator reads. `relevant`: the numbers the grade kept (None or empty: all). Each kept
    passage starts as its sentence closest to the question; windows then grow a sentence at a time, the passage
    closest to the question first, while the total stays within `budget` (0: whole chunks, no cut)."""
    kept = [p for p in passages if not relevant or p.n in relevant]
    windows = {p.n: _Window(p, question) for p in kept}
    if budget > 0:
        _grow(list(windows.values()), budget)
        first = min((w for w in windows.values() if not w.stuck), key=lambda w: -w.overlap, default=None)
        if first is not None and all(w.empty() for w in windows.values()):
            first.add(first.lo)  # not even one sentence fits: the best passage's closest sentence all the same
    out, cuts = [], []
    for p in passages:
        window = windows.get(p.n)
        total = count_tokens(p.text)
        if window is None:
            cuts.append(Cut(p.n, p.source, total, 0, "not relevant to the question (context grade)"))
            continue
        if budget <= 0 or window.whole():
            out.append(p)
            cuts.append(Cut(p.n, p.source, total, total, "whole chunk"))
            continue
        if window.empty():
            cuts.append(Cut(p.n, p.source, total, 0, "over the budget"))
            continue
        part = window.passage()
        out.append(part)
        cuts.append(
            Cut(
                p.n, p.source, total, count_tokens(part.text), f"sentences {window.lo + 1}–{window.hi} of {window.size}"
            )
        )
    return Budgeted(out, cuts, budget)


class _Window:
    """A run of whole sentences [lo, hi) of one passage."""

    def __init__(self, passage: Passage, question: str):
        self.p = passage
        self.parts = sentences(passage.text)
        self.size = len(self.parts)
        self.cost = [count_tokens(s.text) for s in self.parts]
        words = content_words(question)
        overlap = [len(words & content_words(s.text)) for s in self.parts]
        best = max(range(self.size), key=lambda i: (overlap[i], -i)) if self.parts else 0
        self.overlap = overlap[best] if self.parts else 0  # question words its closest sentence shares
        self.lo = self.hi = best
        self.stuck = not self.parts

    def whole(self) -> bool:
        return self.lo == 0 and self.hi == self.size

    def empty(self) -> bool:
        return self.hi <= self.lo

    def next_cost(self) -> tuple[int, int] | None:
        """(sentence index, its tokens) this window would add next: the next sentence, else the one before."""
        if self.empty():
            return (self.lo, self.cost[self.lo]) if self.lo < self.size else None
        if self.hi < self.size:
            return self.hi, self.cost[self.hi]
        if self.lo > 0:
            return self.lo - 1, self.cost[self.lo - 1]
        return None

    def add(self, index: int) -> None:
        if self.empty():
            self.lo, self.hi = index, index + 1
        elif index == self.hi:
            self.hi += 1
        else:
            self.lo -= 1

    def passage(self) -> Passage:
        start, end = self.parts[self.lo].start, self.parts[self.hi - 1].end
        return replace(self.p, text=self.p.text[start:end], offset=self.p.offset + start)


def _grow(windows: list[_Window], budget: int) -> None:
    """Round after round, each window takes its next sentence if it still fits: the windows whose closest sentence
    shares more of the question's words first, then in retrieval order."""
    used = 0
    growing = sorted((w for w in windows if not w.stuck), key=lambda w: -w.overlap)
    while growing:
        still = []
        for window in growing:
            step = window.next_cost()
            if step is None or used + step[1] > budget:
                continue  # this window is done: whole, or its next sentence does not fit
            window.add(step[0])
            used += step[1]
            still.append(window)
        growing = still


def on_whole_chunk(claim: CheckedClaim, passages: list[Passage]) -> CheckedClaim:
    """A claim checked on a window of a chunk, moved onto the whole retrieved chunk of `passages` (its evidence
    span with it), as the answer's sources show it and the store keeps it; any other claim as it is."""
    window = claim.passage
    whole = next((p for p in passages if window is not None and p.n == window.n), None)
    if whole is None or whole is window:
        return claim
    claim.passage = whole
    if claim.span is not None:
        claim.span = (claim.span[0] + window.offset, claim.span[1] + window.offset)
    return claim


def stored_budgets(spans) -> list[tuple[str, list[dict]]]:
    """Of a stored run's trace, each round's context budget: (a summary, a row per retrieved chunk)."""
    out = []
    for span in (s for s in spans if s.name == "context budget"):
        a = span.attributes
        rows = [
            {"chunk": int(key.removeprefix("passage_")), "the generator read": value}
            for key, value in a.items()
            if key.startswith("passage_")
        ]
        if a.get("budget"):
            summary = f"Context budget {a['budget']} tokens: the generator read {a.get('kept_tokens')} of "
            summary += f"{a.get('total_tokens')} tokens of the retrieved chunks"
        else:
            summary = "No context budget: the generator read the retrieved chunks whole"
        out.append((summary, sorted(rows, key=lambda r: r["chunk"])))
    return out
