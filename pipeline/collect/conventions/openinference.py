"""OpenInference (Arize's conventions, as openinference-instrumentation-llama-index and -langchain write them):
`openinference.span.kind` CHAIN, RETRIEVER, RERANKER, LLM, ...; `input.value` / `output.value` (text or JSON by
`*.mime_type`); documents under `retrieval.documents.N.document.*` (a reranker's under
`reranker.output_documents`); a model call's `llm.model_name`, `llm.input_messages.N.message.*`,
`llm.output_messages.N.message.*` and `llm.token_count.*`."""

from __future__ import annotations

import json
import re

from pipeline.collect.conventions.base import (
    ANSWER_KEYS,
    EMBEDDING,
    LLM,
    OTHER,
    QUESTION_KEYS,
    RERANKER,
    RETRIEVER,
    Convention,
    ModelCall,
    context_of,
    text_of,
    whole,
)
from pipeline.evaluation.dataset import GivenContext
from store.records import ReceivedSpan

KIND = "openinference.span.kind"
_DOCUMENT = re.compile(r"^(retrieval\.documents|reranker\.output_documents)\.(\d+)\.document\.(\w+)$")
_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$")
_ROLES = {"LLM": LLM, "RETRIEVER": RETRIEVER, "RERANKER": RERANKER, "EMBEDDING": EMBEDDING}


class OpenInference(Convention):
    name = "openinference"

    def speaks(self, span: ReceivedSpan) -> bool:
        return KIND in span.attributes

    def kind(self, span: ReceivedSpan) -> str | None:
        return str(span.attributes.get(KIND) or "").lower() or None

    def role(self, span: ReceivedSpan) -> str:
        return _ROLES.get(str(span.attributes.get(KIND) or "").upper(), OTHER)

    def question(self, span: ReceivedSpan) -> str | None:
        return _value(span, "input", QUESTION_KEYS)

    def answer(self, span: ReceivedSpan) -> str | None:
        return _value(span, "output", ANSWER_KEYS)

    def documents(self, span: ReceivedSpan) -> list[GivenContext]:
        prefix = "reranker.output_documents" if self.role(span) == RERANKER else "retrieval.documents"
        documents: dict[int, dict] = {}
        for key, value in span.attributes.items():
            match = _DOCUMENT.match(key)
            if match and match.group(1) == prefix:
                documents.setdefault(int(match.group(2)), {})[match.group(3)] = value
        for n, document in enumerate(span.attributes.get(prefix) or []):  # nested, as some exporters send it
            if isinstance(document, dict):
                documents.setdefault(n, {}).update({k.removeprefix("document."): v for k, v in document.items()})
        found = (context_of(d) for _, d in sorted(documents.items()) if isinstance(d.get("content"), str))
        return [c for c in found if c is not None]

    def call(self, span: ReceivedSpan) -> ModelCall:
        attributes = span.attributes
        messages = _messages(attributes)
        prompt = json.dumps(messages["input"]) if messages["input"] else attributes.get("input.value")
        completion = "\n".join(m.get("content", "") for m in messages["output"]) or attributes.get("output.value")
        return ModelCall(
            model=_str(attributes.get("llm.model_name")),
            provider=_str(attributes.get("llm.provider")),
            prompt=_str(prompt),
            completion=_str(completion),
            prompt_tokens=whole(attributes.get("llm.token_count.prompt")),
            completion_tokens=whole(attributes.get("llm.token_count.completion")),
        )


def _value(span: ReceivedSpan, side: str, keys: tuple[str, ...]) -> str | None:
    value = span.attributes.get(f"{side}.value")
    if isinstance(value, str) and span.attributes.get(f"{side}.mime_type") not in (None, "application/json"):
        return value.strip() or None  # declared plain text: kept as it is, even when it starts with a brace
    return text_of(value, keys)


def _messages(attributes: dict) -> dict[str, list[dict]]:
    found: dict[str, dict[int, dict]] = {"input": {}, "output": {}}
    for key, value in attributes.items():
        match = _MESSAGE.match(key)
        if match:
            found[match.group(1)].setdefault(int(match.group(2)), {})[match.group(3)] = value
    return {side: [m for _, m in sorted(by_n.items())] for side, by_n in found.items()}


def _str(value) -> str | None:
    return None if value is None else str(value)
