"""Streamlit markdown of untrusted text: everything escaped, verdicts as coloured backgrounds."""

from __future__ import annotations

import re

from pipeline.history.present import annotate
from pipeline.verification.faithfulness import CheckedClaim

VERDICT_COLOR = {"supported": "green", "contradicted": "red", "unsupported": "orange", "unverified": "violet"}
VERDICT_ICON = {"supported": "✅", "contradicted": "❌", "unsupported": "⚠️", "unverified": "❔"}
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&\"'=^])")


def escape_markdown(text: str) -> str:
    """Text shown literally by Streamlit's Markdown: every special character backslash-escaped (also `:`,
    which would otherwise start a :color[...] or :emoji: directive)."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def annotated_markdown(answer: str, claims: list[CheckedClaim]) -> str:
    """Markdown of the answer with each sentence coloured by its verdict; all model text escaped."""
    out = []
    for segment in annotate(answer, claims):
        text = escape_markdown(segment.text)
        if segment.verdict:
            numbers = ", ".join(str(n) for n in segment.claim_nos)
            out.append(
                f":{VERDICT_COLOR[segment.verdict]}-background[{text}] "
                f"{VERDICT_ICON[segment.verdict]} :gray[claim {numbers}]"
            )
        else:
            out.append(text)
    return " ".join(out)


def highlighted_chunk(text: str, span: tuple[int, int] | None, verdict: str = "supported") -> str:
    """Markdown of a whole chunk with the evidence span highlighted; all text escaped."""
    if not span:
        return escape_markdown(text)
    start, end = span
    return (
        escape_markdown(text[:start])
        + f":{VERDICT_COLOR.get(verdict, 'blue')}-background[**"
        + escape_markdown(text[start:end])
        + "**]"
        + escape_markdown(text[end:])
    )
