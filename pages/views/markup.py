"""Streamlit markdown of untrusted text: everything escaped, verdicts as coloured backgrounds."""

from __future__ import annotations

import re

from pipeline.history.present import placement
from pipeline.verification.faithfulness import CheckedClaim

VERDICT_COLOR = {"supported": "green", "contradicted": "red", "unsupported": "orange", "unverified": "violet"}
VERDICT_ICON = {"supported": "✅", "contradicted": "❌", "unsupported": "⚠️", "unverified": "❔"}
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&\"'=^])")


# GFM turns bare URLs, www. names and e-mail addresses into links after escapes are resolved, so no escape
# stops it; a zero-width space after "//", "www" or "@" (invisible, and only in what is shown) does.
AUTOLINK = re.compile(r"(?<=//)|(?<=\bwww)(?=\\?\.)|(?<=@)(?=\w)", re.IGNORECASE)
ZERO_WIDTH_SPACE = "\u200b"


def escape_markdown(text: str) -> str:
    """Text shown literally by Streamlit's Markdown: every special character backslash-escaped (also `:`,
    which would otherwise start a :color[...] or :emoji: directive), and bare URLs kept from becoming links."""
    return AUTOLINK.sub(ZERO_WIDTH_SPACE, MARKDOWN_SPECIAL.sub(r"\\\1", text))


def annotated_markdown(answer: str, claims: list[CheckedClaim]) -> str:
    """Markdown of the answer with each sentence coloured by its verdict, then the claims that could not be
    placed on a sentence, listed as "not placed"; all model text escaped. While a claim that is not
    supported is not placed, no sentence is painted green: the answer must not look verified."""
    placed = placement(answer, claims)
    hold_green = bool(placed.unplaced_problems)
    out = []
    for segment in placed.segments:
        text = escape_markdown(segment.text)
        numbers = ", ".join(str(n) for n in segment.claim_nos)
        if segment.verdict and not (hold_green and segment.verdict == "supported"):
            out.append(
                f":{VERDICT_COLOR[segment.verdict]}-background[{text}] "
                f"{VERDICT_ICON[segment.verdict]} :gray[claim {numbers}]"
            )
        elif segment.verdict:
            out.append(f"{text} :gray[claim {numbers}, supported]")
        else:
            out.append(text)
    markdown = " ".join(out)
    if placed.unplaced:
        listed = "  \n".join(
            f"{VERDICT_ICON.get(c.verdict, '')} claim {c.claim_no} ({c.verdict}): {escape_markdown(c.text)}"
            for c in placed.unplaced
        )
        markdown += f"\n\n**Not placed** (no sentence of the answer holds these claims):  \n{listed}"
    return markdown


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
