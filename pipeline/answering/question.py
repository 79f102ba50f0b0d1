"""A question as typed, made fit to run: one line of visible characters within the length limit."""

from __future__ import annotations

import re

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.text import one_line

INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def visible_line(text: str) -> str:
    """The text on one line, its control, zero-width and direction characters made spaces."""
    return one_line(INVISIBLE.sub(" ", text))


def clean_question(question: str | None, settings: Settings) -> str:
    """The question on one line without control, zero-width or direction characters; InputError when nothing
    visible is left or it is too long."""
    raw = question or ""
    text = visible_line(raw)
    if not text and raw.strip():
        raise InputError(
            "the question has no visible characters (only control, zero-width or blank ones)",
            fix="type a question in words",
        )
    if not text:
        raise InputError("the question is empty", fix="type a question about the knowledge base")
    if len(text) > settings.max_question_chars:
        raise InputError(
            f"the question has {len(text):,} characters; the limit is {settings.max_question_chars:,}",
            fix="shorten it, or raise WORKBENCH_MAX_QUESTION_CHARS",
        )
    return text
