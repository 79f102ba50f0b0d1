"""Streamlit markdown of untrusted text: everything escaped, verdicts as coloured backgrounds; and the one
number format every page uses."""

from __future__ import annotations

import re

from pipeline.evaluation.registry import label_of
from pipeline.formatting import (  # noqa: F401 - the pages import the formatters from here
    NOT_AVAILABLE,
    fmt_change,
    fmt_cost,
    fmt_count,
    fmt_ms,
    fmt_on_scale,
    fmt_pct,
    fmt_score,
    fmt_time,
)
from pipeline.history.present import VERDICT_STYLES, placement, verdict_label
from pipeline.text import plural  # noqa: F401 - the pages count with it; the CLI imports it from pipeline.text
from pipeline.verification.claims import CheckedClaim, Verdict
from pipeline.vocabulary import Status

# Material Symbols, shipped with Streamlit (emoji render as empty boxes where no emoji font is installed)
STATUS_ICON = {
    Status.ACCEPTED: ":material/check_circle:",
    Status.FLAGGED: ":material/warning:",
    Status.ABSTAINED: ":material/do_not_disturb_on:",
    Status.OFF_TOPIC: ":material/wrong_location:",
    Status.NO_CLAIMS: ":material/info:",
    Status.NO_CONTEXTS: ":material/info:",
    Status.NOT_EVALUATED: ":material/info:",
    Status.UNVERIFIED: ":material/help:",
    Status.FAILED: ":material/error:",
    Status.CANCELLED: ":material/stop_circle:",
    Status.RUNNING: ":material/hourglass_top:",
}
LEADING_SYMBOLS = re.compile(r"^[^A-Za-z(]+")  # the emoji and space before a status label
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&\"'=^])")


# GFM turns bare URLs, www. names and e-mail addresses into links after escapes are resolved, so no escape
# stops it; a zero-width space after "//", "www" or "@" (invisible, and only in what is shown) does.
AUTOLINK = re.compile(r"(?<=//)|(?<=\bwww)(?=\\?\.)|(?<=@)(?=\w)", re.IGNORECASE)
ZERO_WIDTH_SPACE = "\u200b"


def escape_markdown(text: str) -> str:
    """Text shown literally by Streamlit's Markdown: every special character backslash-escaped (also `:`,
    which would otherwise start a :color[...] or :emoji: directive), and bare URLs kept from becoming links."""
    return AUTOLINK.sub(ZERO_WIDTH_SPACE, MARKDOWN_SPECIAL.sub(r"\\\1", text))


def verdict_icon(verdict: str) -> str:
    """Markdown of a verdict's icon in its colour; empty for an unknown verdict."""
    style = VERDICT_STYLES.get(verdict)
    return f":{style.color}[{style.icon}]" if style else ""


def status_markdown(label: str, status: str) -> str:
    """A status as Markdown: its Material icon, then its label (from pipeline.answering.status.status_label,
    which the terminal shows with an emoji) escaped and without that emoji."""
    text = escape_markdown(LEADING_SYMBOLS.sub("", label))
    return f"{STATUS_ICON[status]} {text}" if status in STATUS_ICON else text


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
        # the claim marker is a badge right after the sentence's last character (no space between: it belongs to
        # this sentence, not to the next, and never wraps away from it)
        if segment.verdict and not (hold_green and segment.verdict == Verdict.SUPPORTED):
            style = VERDICT_STYLES[segment.verdict]
            out.append(f":{style.color}-background[{text}]:{style.color}-badge[{style.icon} claim {numbers}]")
        elif segment.verdict:
            out.append(f"{text}:gray-badge[claim {numbers}, supported]")
        else:
            out.append(text)
    markdown = " ".join(out)
    if placed.unplaced:
        listed = "  \n".join(
            f"{verdict_icon(c.verdict)} claim {c.claim_no} ({verdict_label(c.verdict)}): {escape_markdown(c.text)}"
            for c in placed.unplaced
        )
        markdown += f"\n\n**Not placed** (no sentence of the answer holds these claims):  \n{listed}"
    return markdown


def highlighted_chunk(text: str, span: tuple[int, int] | None, verdict: str = Verdict.SUPPORTED) -> str:
    """Markdown of a whole chunk with the evidence span highlighted; all text escaped."""
    if not span:
        return escape_markdown(text)
    start, end = span
    return (
        escape_markdown(text[:start])
        + f":{VERDICT_STYLES[verdict].color if verdict in VERDICT_STYLES else 'blue'}-background[**"
        + escape_markdown(text[start:end])
        + "**]"
        + escape_markdown(text[end:])
    )


def stage_label(stage: str) -> str:
    """A stage (the prompt a model call was built from) in words: 'metric_context_precision' is 'context precision
    (metric)', 'judge_correctness' 'correctness (judge)', 'embed_query' 'embed query'."""
    for prefix in ("metric", "judge"):
        if stage.startswith(prefix + "_"):
            return f"{label_of(stage.removeprefix(prefix + '_')).removeprefix('judge ')} ({prefix})"
    return stage.replace("_", " ")


NO_CALL_TEXT = "No text was kept for this call (keeping call texts is off, or the call predates them)."
