"""What a tracing convention says about one span, and the helpers the conventions share for reading values
that arrive as text, as JSON text or as structured OTLP values."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pipeline.evaluation.dataset import GivenContext
from store.records import ReceivedSpan

# What assembly does with a span, whatever its convention calls it.
LLM, RETRIEVER, RERANKER, EMBEDDING, OTHER = "llm", "retriever", "reranker", "embedding", "other"
QUESTION_KEYS = ("question", "query", "query_str", "input", "q", "prompt", "user_input", "str_or_query_bundle")
ANSWER_KEYS = ("answer", "output", "response", "result", "text", "content")
TEXT_KEYS = ("content", "text", "page_content", "document", "chunk", "body")
METADATA_KEYS = ("metadata", "meta")
SOURCE_KEYS = ("file_name", "source", "file_path", "url", "title")


@dataclass
class ModelCall:
    """A model call as a span describes it: the model, the prompt and the reply as text, and the tokens."""

    model: str | None = None
    provider: str | None = None
    prompt: str | None = None
    completion: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Convention:
    """One tracing convention: how it marks a span it wrote, and where that span keeps the question, the answer,
    the retrieved documents and the model call. Each method reads one span; assembly combines the spans."""

    name = "convention"

    def speaks(self, span: ReceivedSpan) -> bool:
        raise NotImplementedError

    def kind(self, span: ReceivedSpan) -> str | None:
        """The span's kind as the convention names it (for the user: 'workflow', 'retriever', 'chat')."""
        return None

    def role(self, span: ReceivedSpan) -> str:
        """LLM, RETRIEVER, RERANKER, EMBEDDING or OTHER."""
        return OTHER

    def question(self, span: ReceivedSpan) -> str | None:
        return None

    def answer(self, span: ReceivedSpan) -> str | None:
        return None

    def documents(self, span: ReceivedSpan) -> list[GivenContext]:
        return []

    def call(self, span: ReceivedSpan) -> ModelCall | None:
        return None


def parsed(value):
    """A JSON text as its value; anything else (plain text included) as it is."""
    if isinstance(value, str) and value[:1] in '{["':
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def text_of(value, keys: tuple[str, ...], depth: int = 3) -> str | None:
    """A value as text: a string as it is; JSON or a dict read for the text under one of `keys` (looked for
    in nested objects too, as LlamaIndex's {"query_bundle": {"query_str": ...}}), or under its only key."""
    value = parsed(value)
    if isinstance(value, dict) and depth > 0:
        for key in keys:
            found = text_of(value[key], keys, depth - 1) if key in value else None
            if found:
                return found
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(strings) == 1 and len(value) == 1:
            return strings[0].strip() or None
        nested = [v for v in value.values() if isinstance(v, dict)]
        return text_of(nested[0], keys, depth - 1) if len(nested) == 1 else None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip() or None
    return None


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def whole(value) -> int | None:
    n = number(value)
    return None if n is None else int(n)


def context_of(document) -> GivenContext | None:
    """A retrieved document in any of the usual shapes (LlamaIndex's NodeWithScore, LangChain's and Haystack's
    Document, a {content|text, score, metadata, id} record) as a context; None when it holds no text."""
    document = parsed(document)
    if isinstance(document, str):
        return GivenContext(text=document) if document.strip() else None
    if not isinstance(document, dict):
        return None
    node = document.get("node") if isinstance(document.get("node"), dict) else document
    text = next((node[k] for k in TEXT_KEYS if isinstance(node.get(k), str) and node[k].strip()), None)
    if text is None:
        return None
    metadata = parsed(next((node[k] for k in METADATA_KEYS if node.get(k) is not None), {}))
    metadata = metadata if isinstance(metadata, dict) else {}
    source = next((metadata[k] for k in SOURCE_KEYS if metadata.get(k)), None)
    source = source or node.get("source") or node.get("id_") or node.get("id")
    score = number(document.get("score", node.get("score")))
    return GivenContext(text=text, source=str(source) if source is not None else None, score=score)


def contexts_of(documents) -> list[GivenContext]:
    documents = parsed(documents)
    if not isinstance(documents, list):
        return []
    return [c for c in (context_of(d) for d in documents) if c is not None]


def looks_like_documents(value) -> bool:
    """A list of at least one record with text (what a retriever returns)."""
    return bool(contexts_of(value)) and isinstance(parsed(value), list) and not _all_plain_strings(value)


def _all_plain_strings(value) -> bool:
    items = parsed(value)
    return all(isinstance(parsed(i), str) for i in items)
