"""One status vocabulary for runs and their attempts, shared by the command line and the pages.

An attempt and the run use the same words and the same threshold: an attempt at or above
`faithfulness_threshold` is accepted, one below it is flagged; an answer without checkable claims is
no_claims, one whose claims got no verdict is unverified. The run adds abstained, failed, cancelled and
running. Abstentions say why, each with its own answer text.
"""

from __future__ import annotations

from pipeline.text import plural
from pipeline.vocabulary import Status

# the members by their short names, as the modules that import them have long done
ACCEPTED, FLAGGED, NO_CLAIMS, UNVERIFIED = Status.ACCEPTED, Status.FLAGGED, Status.NO_CLAIMS, Status.UNVERIFIED
ABSTAINED, FAILED, CANCELLED, RUNNING = Status.ABSTAINED, Status.FAILED, Status.CANCELLED, Status.RUNNING
NO_CONTEXTS, NOT_EVALUATED, OFF_TOPIC = Status.NO_CONTEXTS, Status.NOT_EVALUATED, Status.OFF_TOPIC

STATUS_TEXT = {
    Status.ACCEPTED: "✅ accepted: faithfulness at or above the threshold",
    Status.FLAGGED: "⚠️ flagged: below the faithfulness threshold, unsupported claims marked",
    Status.ABSTAINED: "🤐 abstained",
    Status.OFF_TOPIC: "🎯 off topic: no attempt answered what was asked; the best one is shown",
    Status.NO_CLAIMS: "ℹ️ no claims: the answer makes no checkable claims",
    Status.NO_CONTEXTS: "ℹ️ no contexts: none were given, so nothing to check the answer against",
    Status.NOT_EVALUATED: "ℹ️ not evaluated: a received trace kept as it came",
    Status.UNVERIFIED: "❔ unverified: its claims could not be verified",
    Status.FAILED: "🚫 failed",
    Status.CANCELLED: "⏹️ cancelled",
    Status.RUNNING: "⏳ running",
    Status.VERIFIED: "scored: stored before attempts were labelled accepted or flagged",
}

# Each label starts with the status's word (Status.word: what every table shows), then says more: one label per
# status everywhere.

# Why a run abstained -> the answer it shows.
NOT_COVERED = "The knowledge base does not cover this question."
EMPTY_KB = "The knowledge base is empty."
NO_ANSWER_IN_SOURCES = "The retrieved sources do not answer this question."
NOT_VERIFIED_RELEVANT = (
    "The retrieved sources are relevant to this question, but no answer could be verified against them."
)
NOT_VERIFIED = "No answer could be verified against the retrieved sources."
NOT_ON_TOPIC = "No answer that addresses this question could be written from the retrieved sources."

# Why a run abstained, in a few words, by the answer it shows: what the Chat page and the drilldown say withheld
# the attempt (when one was written) from being given as the answer.
WITHHELD_BECAUSE = {
    NOT_VERIFIED_RELEVANT: "faithfulness below the threshold: its claims are not supported by the sources",
    NOT_VERIFIED: "faithfulness below the threshold: its claims are not supported by the sources",
    NOT_ON_TOPIC: "off topic: no attempt addressed the question",
    NOT_COVERED: "not covered: the knowledge base does not cover this question",
    EMPTY_KB: "not covered: the knowledge base is empty",
    NO_ANSWER_IN_SOURCES: "the model itself said the sources do not answer the question",
}


def withheld_because(answer: str | None) -> str:
    """Why an abstained run withheld its answer, from the abstention's own answer text."""
    return WITHHELD_BECAUSE.get(answer or "", "abstained")


# The `when_unverified` setting: what a run shows when its best attempt is below `abstain_below`.
WHEN_UNVERIFIED = ("abstain", "show_best")
# The `off_topic_final` setting: what a run shows when no attempt addressed the question.
OFF_TOPIC_FINAL = ("mark", "abstain")


def attempt_status(faithfulness: float | None, scored_status: str, threshold: float) -> Status:
    """An attempt's label in the run's words: accepted or flagged by the same threshold as the run;
    `scored_status` (no_claims or unverified) when there is no faithfulness to compare."""
    if faithfulness is None:
        return Status(scored_status)
    return Status.ACCEPTED if faithfulness >= threshold else Status.FLAGGED


def status_label(status: str) -> str:
    return STATUS_TEXT.get(status, status)


def made_how(record) -> str:
    """How an attempt was made, in a few words: "" for the first one; "stricter prompt" for a regeneration; for a
    repair by dropping (setting repair), which attempt it trimmed and how many sentences it dropped."""
    if record.trimmed_from is not None:
        return f"attempt {record.trimmed_from} without its {plural(len(record.dropped), 'unsupported sentence')}"
    return "stricter prompt" if record.strict else ""
