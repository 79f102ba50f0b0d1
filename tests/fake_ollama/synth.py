"""Synth: test questions written from passages, by a weak question writer.

It builds a question from the key terms of the passage's most informative sentence, and on some prompts (chosen by
the prompt's hash, one in SYNTH_MISTAKES for each mistake) makes a mistake that synth's gates must catch by their own
logic: it copies the sentence as the question, names its source, adds a sentence the passage does not support to the
reference, writes an "unanswerable" question the passage answers, or gives a "false" premise that is the passage's
own statement."""

import hashlib
import re

from .brain import _FABRICATED_NAMES, fabricated
from .text import _CITATION, _NUMBER, STOPWORDS, _blocks, _context, _line_value, _squash, content_words, sentences

SYNTH_MISTAKES = 10
COPY, LEADING_SOURCE, NAMES_SOURCE, UNSUPPORTED_REFERENCE = 0, 1, 2, 3
_TERM = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def synth_mistake(prompt):
    """0 to SYNTH_MISTAKES - 1, from the prompt's hash: the mistake (COPY, ...) made on it, if any."""
    return int(hashlib.md5(prompt.encode()).hexdigest(), 16) % SYNTH_MISTAKES


def informative_sentence(block, number=False, term=None):
    """The block's sentence with the most distinct content words (headings and lines under 6 words left out); with
    `number`, one holding a number if any does; with `term`, one naming it if any does."""
    found = [s for s in map(_squash, sentences(block)) if not s.startswith("#") and len(s.split()) >= 6]
    if term:
        found = [s for s in found if term.lower() in s.lower()] or found
    if number:
        found = [s for s in found if _NUMBER.search(s)] or found
    return max(found, key=lambda s: len(set(content_words(s))), default="")


def key_terms(sentence, k=4):
    """Up to `k` of the sentence's words that name things (capitalised ones first, then the longest), in its order."""
    words = list(dict.fromkeys(w for w in _TERM.findall(sentence) if w.lower() not in STOPWORDS and len(w) > 3))
    chosen = set(sorted(words, key=lambda w: (not w[0].isupper(), -len(w)))[:k])
    return " ".join(w for w in words if w in chosen)


def changed_number(number):
    """Another figure than `number`: a year moved on by 3, an integer doubled and one added, a decimal doubled."""
    value = float(number.replace(",", ""))
    if "." not in number:
        return str(int(value) + 3 if 1900 <= value <= 2100 else int(value) * 2 + 1)
    return f"{value * 2:g}"


def false_premise(sentence):
    """(the sentence with its first number changed, or with a name put in for its second capitalised word; the
    changed part)."""
    found = re.search(r"(?<![\w.])\d[\d,]*(?:\.\d+)?", sentence)
    if found:
        new = changed_number(found.group())
        return sentence[: found.start()] + new + sentence[found.end() :], new
    names = [m for m in re.finditer(r"\b[A-Z][a-z]+\b", sentence) if m.start() > 0]
    if names:
        name = _FABRICATED_NAMES[2]
        return sentence[: names[0].start()] + name + sentence[names[0].end() :], name
    return sentence.replace(" is ", " is not ", 1), "not"


def synth_candidate(prompt):
    """{"question", "reference", "missing", "false_premise"} for a synth prompt ("Kind:", "Shared:", then the
    passages under "Context:")."""
    kind = _line_value(prompt, "Kind")
    shared = _line_value(prompt, "Shared") or None
    blocks = [text for _, text in _blocks(_context(prompt))]
    mistake = synth_mistake(prompt)
    first = informative_sentence(blocks[0], number=kind in ("numeric", "false_premise"), term=shared)
    terms = key_terms(first)
    if kind == "negative":
        if mistake in (COPY, LEADING_SOURCE, NAMES_SOURCE):  # a question its own passage answers
            return {"question": f"What is known about {terms}?", "missing": "when it was introduced"}
        topic = key_terms(first, 2)
        question = f"Which company sells a commercial licence for {topic}, and at what price?"
        return {"question": question, "missing": "no vendor or price is named"}
    if kind == "false_premise":
        if mistake == UNSUPPORTED_REFERENCE:  # the "false" premise is the passage's own statement
            number = _NUMBER.search(first)
            return {
                "question": f"Why is the figure for {terms} {number.group() if number else 'so'}?",
                "false_premise": first,
                "reference": first,
            }
        premise, changed = false_premise(first)
        return {"question": f"Why is the figure for {terms} {changed}?", "false_premise": premise, "reference": first}
    if kind in ("multi_hop", "comparison") and len(blocks) > 1:
        second = informative_sentence(blocks[1], term=shared)
        other = key_terms(second, 3)
        terms = key_terms(first, 3)
        if kind == "multi_hop":
            question = f"How does {shared or 'it'} link {terms} with {other}?"
        else:
            question = f"How does {terms} compare with {other}?"
        reference = f"{first} {second}"
    elif kind == "numeric":
        question, reference = f"What figure is given for {terms}?", first
    else:
        question, reference = f"What is known about {terms}?", first
    if mistake == COPY:
        question = first.rstrip(".!?") + "?"
    elif mistake == LEADING_SOURCE:
        question = "According to the passage, " + question[:1].lower() + question[1:]
    elif mistake == NAMES_SOURCE:
        question = f"What does the passage say about {terms}?"
    elif mistake == UNSUPPORTED_REFERENCE:
        reference += " " + _CITATION.sub("", fabricated(_context(prompt), 1, 1)[0])
    return {"question": question, "reference": reference}
