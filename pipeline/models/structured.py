"""Structured output: ask with a JSON schema, validate, retry once with the error, else report invalid."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from pipeline.models.llm import LLM
from pipeline.answering.prompts import Prompt

T = TypeVar("T", bound=BaseModel)


@dataclass
class Structured(Generic[T]):
    value: T | None
    invalid_reason: str | None = None
    raw: str = ""


def parse(output: type[T], text: str) -> tuple[T | None, str | None]:
    try:
        return output.model_validate_json(text), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
        return None, f"{where}: {first.get('msg', 'invalid')}"


def ask(llm: LLM, stage: str, model: str, prompt: Prompt, user: str) -> Structured:
    """One call by schema; on an invalid reply one retry that names the problem; then invalid."""
    messages = prompt.messages(user)
    schema = prompt.schema()
    accept = lambda text: parse(prompt.output, text)[0] is not None  # noqa: E731
    reply = llm.chat(stage, model, messages, schema=schema, accept=accept)
    value, reason = parse(prompt.output, reply.text)
    if value is not None:
        return Structured(value, raw=reply.text)
    retry_messages = messages + [
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": f"That reply is not valid JSON for the schema ({reason}). "
                                    "Reply again with only the JSON object."}]
    retry = llm.chat(stage, model, retry_messages, schema=schema, accept=accept)
    value, retry_reason = parse(prompt.output, retry.text)
    if value is not None:
        return Structured(value, raw=retry.text)
    return Structured(None, invalid_reason=f"invalid {stage} reply after a retry: {retry_reason}; "
                                          f"reply began {retry.text[:80]!r}", raw=retry.text)
