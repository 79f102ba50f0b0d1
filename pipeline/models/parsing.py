"""A tolerant parser for structured replies: claims, verdicts, grades and judge scores all come through here.

Accepted: a bare JSON object, a JSON object inside a ``` code fence, or a JSON object embedded in
prose (the first top-level balanced {...} that validates). Nothing is repaired or filled in: when no
candidate validates, the reply is invalid with the reason of the most telling failure. Yes/No verdicts
(`parse_yes_no`) are read from the first word, after a label ("Answer: Yes"), out of markdown ("**No**")
or from a JSON object whose only or first value is yes/no/true/false.
"""

from __future__ import annotations

import json
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


_YES_NO = {"yes": True, "no": False, "true": True, "false": False}
_LABEL = re.compile(r"^\W*(?:answer|verdict|label|response|result|supported)\s*[:=-]\s*", re.IGNORECASE)


def parse_yes_no(text: str) -> bool | None:
    """A Yes/No verdict, or None when the reply says neither (never guessed from a word inside prose)."""
    text = (text or "").strip()
    for candidate in [*_FENCE.findall(text), *balanced_objects(text)]:
        found = _yes_no_in_object(candidate)
        if found is not None:
            return found
    match = re.match(r"\W*([A-Za-z]+)", _LABEL.sub("", text, count=1))
    word = match.group(1).lower() if match else ""
    return {"yes": True, "no": False}.get(word)


def _yes_no_in_object(text: str) -> bool | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    first = next(iter(value.values()))
    if isinstance(first, bool):
        return first
    return _YES_NO.get(str(first).strip().lower()) if isinstance(first, str) else None
