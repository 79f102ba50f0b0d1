"""A tolerant parser for structured replies.

Accepted: a bare JSON object, a JSON object inside a ``` code fence, or a JSON object embedded in
prose (the first top-level balanced {...} that validates). Nothing is repaired or filled in: when no
candidate validates, the reply is invalid with the reason of the most telling failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.S)


def parse(output: type[T], text: str) -> tuple[T | None, str | None]:
    """(value, None) when the reply holds a valid object, else (None, reason)."""
    value, _ = _validate(output, text.strip())
    if value is not None:
        return value, None
    first_reason = None
    for candidate in _candidates(text):
        value, candidate_reason = _validate(output, candidate)
        if value is not None:
            return value, None
        first_reason = first_reason or candidate_reason
    return None, first_reason or _why_no_object(text)


def _validate(output: type[T], text: str) -> tuple[T | None, str | None]:
    try:
        return output.model_validate_json(text), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
        return None, f"{where}: {first.get('msg', 'invalid')}"


def _candidates(text: str) -> Iterator[str]:
    """Fenced blocks first, then each top-level balanced {...} of the whole reply, in order."""
    for fenced in _FENCE.findall(text):
        yield fenced.strip()
    yield from balanced_objects(text)


def balanced_objects(text: str) -> Iterator[str]:
    """Top-level {...} spans whose braces balance, ignoring braces inside JSON strings.

    Objects nested inside a candidate are not candidates themselves: a nested object that happens to
    fit the schema is not the reply's answer."""
    start = depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if depth and in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"' and depth:
            in_string = True
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def _why_no_object(text: str) -> str:
    if "{" not in text:
        return "reply: no JSON object in the reply"
    return "reply: the JSON object is not closed (truncated reply?)"
