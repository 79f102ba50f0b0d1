"""Vocabularies shared by every layer, at the bottom of pipeline/: `StrEnum` and the run `Status`.

A `StrEnum`'s members are their own stored strings (`Status.ACCEPTED == "accepted"`), so the store, JSON and
f-strings see plain words while code names each one once. Python 3.11's `enum.StrEnum`; the same for 3.10, which
the project still supports (pyproject.toml)."""

from __future__ import annotations

import enum

if hasattr(enum, "StrEnum"):
    StrEnum = enum.StrEnum
else:  # Python 3.10

    class StrEnum(str, enum.Enum):  # type: ignore[no-redef]
        def __str__(self) -> str:
            return self.value

        def __format__(self, spec: str) -> str:
            return format(self.value, spec)


class Status(StrEnum):
    """A run's or an attempt's status; the value is what the store keeps."""

    ACCEPTED = "accepted"
    FLAGGED = "flagged"
    NO_CLAIMS = "no_claims"
    UNVERIFIED = "unverified"
    ABSTAINED = "abstained"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RUNNING = "running"
    NO_CONTEXTS = "no_contexts"  # an imported answer given without contexts: nothing to check it against
    # a received trace kept as it came (no question-and-answer, or sampled out); why, in abstain_reason
    NOT_EVALUATED = "not_evaluated"
    OFF_TOPIC = "off_topic"  # the run's best attempt, shown, does not address the question (off_topic_final = mark)
    # scored: faithfulness has a value (the checker's word before the threshold makes it accepted or flagged);
    # an attempt stored before attempts were labelled accepted or flagged still carries it
    VERIFIED = "verified"

    @property
    def word(self) -> str:
        """The status in a few words, as every table shows it: 'no claims', not the stored 'no_claims'."""
        return STATUS_WORDS.get(self, self.value.replace("_", " "))


# Where the words are not the stored value's words.
STATUS_WORDS = {Status.VERIFIED: "scored"}


def status_word(status: str) -> str:
    """A stored status in words; an unknown one with its underscores as spaces."""
    try:
        return Status(status).word
    except ValueError:
        return str(status).replace("_", " ")
