"""Reading prompt text as the rule brain does: content words, sentences, labelled lines and sections, passages."""

import re

LABELS = ("Question", "Context", "Reference", "Answer", "Claim", "Document")

STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves
""".split()
)

_TOKEN = re.compile(r"[a-z0-9]*[a-z][a-z0-9]*|\d+(?:,\d{3})*(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_BLOCK_HEAD = re.compile(r"^\s*\[(\d+)\]\s*source:.*$", re.M)
_LABEL_LINE = re.compile(rf"^\s*(?:{'|'.join(LABELS)}):", re.M)


def is_number(word):
    """True for a numeric content word such as "28.4" or "1000"."""
    return bool(_NUMBER.fullmatch(word))


def content_words(text):
    """Lowercased content words (stopwords and short non-numbers dropped, plural "s" stripped)."""
    words = []
    for token in _TOKEN.findall(text.lower()):
        number = token.replace(",", "")
        if is_number(number):
            words.append(number)
        elif token not in STOPWORDS and len(token) >= 3:
            words.append(token[:-1] if len(token) > 3 and token.endswith("s") else token)
    return words


def sentences(text):
    """Sentences and lines of `text`, each an exact (stripped) substring of it."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text) if s.strip()]


def _squash(text):
    """Collapse runs of whitespace to single spaces."""
    return " ".join(text.split())


def _line_value(text, label):
    """Text after "label:" on the first line starting with it, or ""."""
    for line in text.splitlines():
        if line.strip().startswith(label + ":"):
            return line.strip()[len(label) + 1 :].strip()
    return ""


def _section(text, label, stops=()):
    """Text from the first "label:" line to the next line starting with a stop label; None if absent."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(label + ":"):
            body = [line.strip()[len(label) + 1 :]]
            for rest in lines[i + 1 :]:
                if any(rest.startswith(stop + ":") for stop in stops):
                    break
                body.append(rest)
            return "\n".join(body).strip()
    return None


def _split_last_claim(text):
    """(text before the last "Claim:" line, the claim) or (text, None)."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Claim:"):
            return "\n".join(lines[:i]), lines[i][len("Claim:") :].strip()
    return text, None


def _context(prompt):
    """The passages under "Context:", up to a "Question:" line when the question follows them."""
    return _section(prompt, "Context", ("Question",)) or ""


def _blocks(context):
    """[(n, text)] for the "[n] source: ..." blocks of a context; one block 1 if unnumbered."""
    heads = list(_BLOCK_HEAD.finditer(context))
    if not heads:
        return [(1, context)]
    ends = [h.start() for h in heads[1:]] + [len(context)]
    return [(int(h.group(1)), context[h.end() : end]) for h, end in zip(heads, ends, strict=False)]


# ---------------------------------------------------------------- rule brain
