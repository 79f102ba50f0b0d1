"""Structured output: ask with a JSON schema, parse tolerantly, retry once with the error, else report invalid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from pipeline.models.llm import LLM
from pipeline.models.parsing import parse
from pipeline.prompting import Prompt

T = TypeVar("T", bound=BaseModel)


@dataclass
class Structured(Generic[T]):
    value: T | None
    invalid_reason: str | None = None
    raw: str = ""


def ask(
    llm: LLM,
    stage: str,
    model: str,
    prompt: Prompt,
    user: str,
    options: dict | None = None,
    cache: bool = True,
    last: str = "",
) -> Structured:
    """One call by schema; on an invalid reply one retry that names the problem; then invalid. `options` (e.g. a
    seed) go with both calls; cache=False bypasses the response cache for both; `last`: see Prompt.messages."""
    messages = prompt.messages(user, last)
    schema = prompt.schema()
    accept = lambda text: parse(prompt.output, text)[0] is not None  # noqa: E731
    reply = llm.chat(stage, model, messages, schema=schema, options=options, accept=accept, cache=cache)
    value, reason = parse(prompt.output, reply.text)
    if value is not None:
        return Structured(value, raw=reply.text)
    retry_messages = messages + [
        {"role": "assistant", "content": reply.text},
        {
            "role": "user",
            "content": f"That reply is not valid JSON for the schema ({reason}). "
            "Reply again with only the JSON object.",
        },
    ]
    retry = llm.chat(stage, model, retry_messages, schema=schema, options=options, accept=accept, cache=cache)
    value, retry_reason = parse(prompt.output, retry.text)
    if value is not None:
        return Structured(value, raw=retry.text)
    return Structured(
        None,
        invalid_reason=f"invalid {stage} reply after a retry: {retry_reason}; reply began {retry.text[:80]!r}",
        raw=retry.text,
    )
