"""Presentation helpers without UI imports: escaping, verdict labels, claims placed in the answer."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.verification.faithfulness import CheckedClaim
from pipeline.text import content_words, sentences

VERDICT_RANK = {"contradicted": 0, "unsupported": 1, "unverified": 2, "supported": 3}
VERDICT_COLOR = {"supported": "green", "contradicted": "red", "unsupported": "orange", "unverified": "violet"}
VERDICT_ICON = {"supported": "✅", "contradicted": "❌", "unsupported": "⚠️", "unverified": "❔"}
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&\"'=^])")


def escape_markdown(text: str) -> str:
    """Text shown literally by a Markdown renderer: every special character backslash-escaped."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


@dataclass
class Segment:
    text: str
    verdict: str | None = None
    claim_nos: list[int] = field(default_factory=list)


def annotate(answer: str, claims: list[CheckedClaim]) -> list[Segment]:
    """The answer split into sentences, each with the worst verdict of the claims drawn from it.

    Claims are rephrased by the extractor, so each claim is placed on the answer sentence that shares
    the most content words with it.
    """
    parts = sentences(answer)
    if not parts:
        return [Segment(answer)]
    segments = [Segment(p.text) for p in parts]
    for claim in claims:
        words = content_words(claim.text)
        scores = [len(words & content_words(p.text)) for p in parts]
        best = max(range(len(parts)), key=lambda i: scores[i])
        if scores[best] == 0:
            continue
        segment = segments[best]
        segment.claim_nos.append(claim.claim_no)
        if segment.verdict is None or VERDICT_RANK[claim.verdict] < VERDICT_RANK[segment.verdict]:
            segment.verdict = claim.verdict
    return segments


def annotated_markdown(answer: str, claims: list[CheckedClaim]) -> str:
    """Markdown of the answer with each sentence coloured by its verdict; all model text escaped."""
    out = []
    for segment in annotate(answer, claims):
        text = escape_markdown(segment.text)
        if segment.verdict:
            numbers = ", ".join(str(n) for n in segment.claim_nos)
            out.append(f":{VERDICT_COLOR[segment.verdict]}-background[{text}] "
                       f"{VERDICT_ICON[segment.verdict]} :gray[claim {numbers}]")
        else:
            out.append(text)
    return " ".join(out)



def highlighted_chunk(text: str, span: tuple[int, int] | None, verdict: str = "supported") -> str:
    """Markdown of a whole chunk with the evidence span highlighted; all text escaped."""
    if not span:
        return escape_markdown(text)
    start, end = span
    return (escape_markdown(text[:start]) + f":{VERDICT_COLOR.get(verdict, 'blue')}-background[**"
            + escape_markdown(text[start:end]) + "**]" + escape_markdown(text[end:]))
