"""Follow-up questions: the conversation so far, bounded by a token budget, and the cheap rule that decides whether a
question needs rewriting into a standalone one before retrieval.

A turn of a conversation is a run like any other, with the conversation it belongs to and its position in it. The
engine takes the earlier turns (`Turn`s, oldest first) with the question: `bounded` keeps the newest of them within
`conversation_history_tokens` (counted with the tokenizer of the context budget, the oldest turns dropped first, an
empty turn skipped with the reason), and `refers_back` says whether the question leans on them. A question that
refers back is rewritten into a standalone question by the model (prompts.STANDALONE_QUESTION), and retrieval, the
context grade, generation and verification work on that; any other question is used as asked, with no model call.

The rule (`refers_back`) errs on the side of a rewrite: a question it sends to the model that already stood alone
costs one call and comes back unchanged, while a follow-up it let through would retrieve for words like "it". It
looks only at the question's own words, never at what the history holds:
- a pronoun or demonstrative that needs an antecedent: it, its, they, them, their, this, that, these, those, he,
  she, ... (REFERENCE_WORDS);
- a phrase that points back: "the second one", "which one", "the same", "the former", "the above" (REFERENCE_PHRASE);
- an opener that continues the previous turn: "and ...", "but ...", "also ...", "what about ...", "how about ...",
  "what else", "tell me more", "go on" (CONTINUATION);
- no content word of its own ("Why?", "How so?", "Really?").

Earlier answers are never evidence: the verifiers see only this turn's retrieved passages, and the generation prompt
shows the history (when the question refers back) under a heading that says it is not a source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.answering.budget import count_tokens
from pipeline.errors import InputError
from pipeline.text import content_words, one_line, strip_citations

REFERENCE_WORDS = frozenset(
    "it its itself they them their theirs themselves this that these those he him his himself she her hers herself "
    "former latter aforementioned".split()
)
REFERENCE_PHRASE = re.compile(
    r"\b(?:(?:first|second|third|fourth|fifth|last|other|next|previous|same|which|that|this)\s+ones?"
    r"|the\s+same|the\s+above|the\s+previous|mentioned\s+(?:above|before|earlier))\b"
)
CONTINUATION = re.compile(
    r"^(?:and|but|also|or|so|then|plus)\b|^(?:what|how)\s+about\b|^what\s+else\b|^(?:tell\s+me\s+)?more\b"
    r"|^go\s+on\b|^(?:can\s+you\s+)?elaborate\b|^why\s+not\b"
)
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")

# What the drilldown and Annotate say about earlier turns.
NOT_EVIDENCE = (
    "Earlier turns are not evidence: every claim of this answer was checked against this turn's retrieved passages "
    "only, so a claim that only an earlier answer states is unsupported."
)
STEP = "standalone question"  # the trace step of the rewrite (its attributes: pipeline/answering/engine.py)


@dataclass(frozen=True)
class Turn:
    """An earlier turn of the conversation: the question as asked, the answer it got (None: none, e.g. it failed),
    and the standalone question it was answered as when that differs."""

    question: str
    answer: str | None = None
    standalone: str | None = None
    run_id: int | None = None

    @classmethod
    def of(cls, value) -> Turn:
        """A turn from a Turn, a dict {question, answer?, standalone?, run_id?} or a (question, answer) pair;
        InputError for anything else."""
        if isinstance(value, Turn):
            return value
        if isinstance(value, dict) and isinstance(value.get("question", ""), str):
            return cls(value.get("question") or "", value.get("answer"), value.get("standalone"), value.get("run_id"))
        if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str | None) for v in value):
            return cls(value[0] or "", value[1])
        raise InputError(
            f"an earlier turn is a {type(value).__name__}, not a turn",
            fix="pass each earlier turn as a Turn, a dict {question, answer} or a (question, answer) pair",
        )

    @classmethod
    def from_result(cls, result) -> Turn:
        """The turn a finished run makes for the next question (an AnswerResult, or anything with its fields)."""
        standalone = getattr(result, "standalone_question", None)
        return cls(
            result.question,
            getattr(result, "answer", None),
            standalone if standalone and standalone != result.question else None,
            getattr(result, "run_id", None),
        )

    @property
    def asked_as(self) -> str:
        """The question this turn was answered as: its standalone form when it was rewritten."""
        return self.standalone or self.question


@dataclass
class History:
    """The earlier turns a question is read with, oldest first, each with its number in the conversation."""

    turns: list[tuple[int, Turn]] = field(default_factory=list)
    given: int = 0  # turns passed in
    skipped: int = 0  # empty ones, left out
    dropped: int = 0  # the oldest, left out for the budget
    tokens: int = 0
    budget: int = 0

    def block(self) -> str:
        return "\n".join(turn_text(n, turn) for n, turn in self.turns)

    def summary(self) -> str:
        """What was kept of the history, and why the rest was not."""
        if not self.given:
            return "no earlier turns"
        kept = f"{len(self.turns)} of {self.given} earlier turns ({self.tokens} of {self.budget} tokens)"
        why = []
        if self.dropped:
            why.append(f"the oldest {self.dropped} dropped for the budget conversation_history_tokens")
        if self.skipped:
            why.append(f"{self.skipped} empty skipped (no question)")
        return kept + (": " + "; ".join(why) if why else "")


def turn_text(n: int, turn: Turn) -> str:
    """One turn for a prompt, each part on one line (an answer's line breaks cannot start a section of the prompt),
    citations dropped (they number another turn's passages)."""
    answer = one_line(strip_citations(turn.answer or "")) or "(no answer)"
    return f"Turn {n} question: {one_line(turn.asked_as)}\nTurn {n} answer: {answer}"


def bounded(history: Iterable, budget: int) -> History:
    """The newest earlier turns whose text fits `budget` tokens together (0: none); older turns are dropped first,
    and a turn that does not fit ends the history there, so that what is kept has no gap. Empty turns (no question)
    are skipped; an entry that is no turn at all is refused (InputError)."""
    turns = [Turn.of(value) for value in history]
    numbered = [(n, t) for n, t in enumerate(turns, start=1) if one_line(t.question)]
    out = History(given=len(turns), skipped=len(turns) - len(numbered), budget=budget)
    kept: list[tuple[int, Turn]] = []
    for n, turn in reversed(numbered):
        cost = count_tokens(turn_text(n, turn)) + 1  # its line break
        if out.tokens + cost > budget:
            break
        out.tokens += cost
        kept.append((n, turn))
    out.turns = kept[::-1]
    out.dropped = len(numbered) - len(kept)
    return out


def refers_back(question: str) -> str | None:
    """Why the question leans on an earlier turn (the word or phrase that does), or None when it stands alone; the
    rule is the module's docstring."""
    text = one_line(question).lower().replace("’", "'")
    words = WORD.findall(text)
    for word in words:
        base = word.split("'")[0]  # it's, that's
        if base in REFERENCE_WORDS:
            return f"'{base}' refers to something earlier"
    phrase = REFERENCE_PHRASE.search(text)
    if phrase:
        return f"'{phrase.group(0)}' points back"
    opener = CONTINUATION.search(text)
    if opener:
        return f"it continues the previous turn ('{opener.group(0)}')"
    if not content_words(text):
        return "it names nothing of its own"
    return None


def conversation_name(name: str | None) -> str | None:
    """A conversation's name, on one line; None for none; InputError when empty or too long."""
    if name is None:
        return None
    text = one_line(name)
    if not text:
        raise InputError("the conversation's name is empty", fix="name the conversation, e.g. --conversation notes")
    if len(text) > 200:
        raise InputError(
            f"the conversation's name has {len(text)} characters; the limit is 200", fix="use a shorter name"
        )
    return text


def stored_standalone(spans: Sequence) -> dict | None:
    """Of a stored run's trace, the standalone-question step's record: the question, what was decided (method:
    rule, model, fallback, no history), the standalone question, why, the history kept; None without one."""
    for span in spans:
        if span.name == STEP:
            return dict(span.attributes)
    return None
