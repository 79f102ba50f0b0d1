"""Repair by dropping (setting `repair`): an answer below the faithfulness threshold, without the sentences whose
every claim failed. No model call: the sentences kept were checked already, so their claims carry over with their
verdicts and evidence. It applies only where dropping removes every failed claim and leaves a supported one; a
sentence that mixes supported and failed claims, or a failed claim not placed on a sentence, needs a regeneration.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pipeline.text import sentences
from pipeline.verification.claims import SUPPORTED, CheckedClaim, is_failed, scored_claims

TRAILING_BLANKS = re.compile(r"[ \t]*")
MARKER_ONLY = re.compile(r"\s*(?:[-*+\u2022]|\d+[.)])?\s*")  # what is left of a list item without its sentence


@dataclass(frozen=True)
class Trimmed:
    answer: str
    claims: list[CheckedClaim]  # the kept sentences' claims, renumbered from 1, on the trimmed answer
    dropped: list[str]  # the sentences removed, in answer order


def without_unsupported(answer: str, claims: list[CheckedClaim]) -> Trimmed | None:
    """The answer without its sentences whose every scored claim failed; None when that cannot repair it."""
    scored = scored_claims(claims)
    if any(is_failed(c) and c.answer_span is None for c in scored):
        return None
    spans = {(p.start, p.end) for p in sentences(answer)}
    by_sentence: dict[tuple[int, int], list[CheckedClaim]] = {}
    for claim in scored:
        if claim.answer_span is not None:
            by_sentence.setdefault(tuple(claim.answer_span), []).append(claim)
    drop = sorted(span for span, cs in by_sentence.items() if all(is_failed(c) for c in cs))
    if not drop or any(span not in spans for span in drop):
        return None
    dropped_spans = set(drop)
    kept = [c for c in claims if c.answer_span is None or tuple(c.answer_span) not in dropped_spans]
    if any(is_failed(c) for c in kept) or not any(c.verdict == SUPPORTED for c in kept):
        return None
    cuts = [_cut_span(answer, start, end) for start, end in drop]
    text = _cut(answer, cuts).rstrip()
    moved = [
        dataclasses.replace(c, claim_no=n, answer_span=_moved(c.answer_span, cuts)) for n, c in enumerate(kept, start=1)
    ]
    return Trimmed(text, moved, [answer[start:end] for start, end in drop])


def _cut_span(text: str, start: int, end: int) -> tuple[int, int]:
    """What dropping the sentence text[start:end] removes: its whole line when it is the line's only text (a list
    item's marker with it), else the sentence and the spaces after it (not a line break: the layout stays)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if MARKER_ONLY.fullmatch(text[line_start:start]) and not text[end:line_end].strip():
        return line_start, min(line_end + 1, len(text))
    return start, TRAILING_BLANKS.match(text, end).end()


def _cut(text: str, cuts: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in cuts:
        out.append(text[at:start])
        at = end
    out.append(text[at:])
    return "".join(out)


def _moved(span: tuple[int, int] | None, cuts: list[tuple[int, int]]) -> tuple[int, int] | None:
    """A kept sentence's span on the trimmed text: shifted left by what was cut before it."""
    if span is None:
        return None
    shift = sum(end - start for start, end in cuts if end <= span[0])
    return span[0] - shift, span[1] - shift
