"""OpenTelemetry's GenAI semantic conventions (`gen_ai.*`), as opentelemetry-instrumentation-openai-v2, OpenLIT
and OpenLLMetry's model instrumentations write them, and OpenTelemetry's database conventions for a vector-store
query.

- A model call: `gen_ai.operation.name` chat / text_completion / generate_content; the model
  (`gen_ai.response.model`, else `gen_ai.request.model`); the messages as `gen_ai.input.messages` /
  `gen_ai.output.messages` (JSON or structured, each message's `parts`, and `gen_ai.system_instructions`), or
  the older indexed `gen_ai.prompt.N.role|content` / `gen_ai.completion.N.content`, or span events:
  `gen_ai.content.prompt` / `gen_ai.content.completion` (attributes `gen_ai.prompt` / `gen_ai.completion`),
  `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message` and
  `gen_ai.choice` (their `content`, or `message`); tokens `gen_ai.usage.input_tokens` / `output_tokens` (older:
  `prompt_tokens` / `completion_tokens`).
- A retrieval: `gen_ai.operation.name` retrieval, the query in `gen_ai.retrieval.query.text`, the documents in
  `gen_ai.retrieval.documents` (each with id and score, and the text under content or text).
- A vector-store query: a database span (`db.system.name`, or the older `db.system`) whose query is
  `db.query.text` and whose results are `db.query.result` (or `db.search.result`) span events with
  `db.query.result.document`, `.id`, `.score` or `.distance` and `.metadata`, as OpenLLMetry's vector-database
  instrumentations (Chroma, Qdrant, Pinecone, ...) send them.
- An agent or workflow (`invoke_agent`, `invoke_workflow`): the user's question is its last user input message,
  the answer its output messages."""

from __future__ import annotations

import json
import re

from pipeline.collect.conventions.base import (
    EMBEDDING,
    LLM,
    OTHER,
    RERANKER,
    RETRIEVER,
    SOURCE_KEYS,
    TEXT_KEYS,
    Convention,
    ModelCall,
    context_of,
    contexts_of,
    number,
    parsed,
    whole,
)
from pipeline.evaluation.dataset import GivenContext
from store.records import ReceivedSpan

OPERATION = "gen_ai.operation.name"
_CALLS = frozenset({"chat", "text_completion", "generate_content", "completion"})
_EMBEDDINGS = frozenset({"embeddings", "embedding"})
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(role|content)$")
_PROMPT_EVENTS = ("gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message")
_RESULT_EVENTS = ("db.query.result", "db.search.result")
_DB_SYSTEM = ("db.system.name", "db.system")


class OtelGenAI(Convention):
    name = "otel_genai"

    def speaks(self, span: ReceivedSpan) -> bool:
        return (
            any(key.startswith("gen_ai.") for key in span.attributes)
            or any(str(e.get("name", "")).startswith("gen_ai.") for e in span.events)
            or is_vector_query(span)
        )

    def kind(self, span: ReceivedSpan) -> str | None:
        operation = span.attributes.get(OPERATION)
        if operation:
            return str(operation)
        if is_vector_query(span):
            return f"{_db_system(span)} {_first(span.attributes, 'db.operation.name', 'db.operation') or 'query'}"
        return "chat" if self.role(span) == LLM else None

    def role(self, span: ReceivedSpan) -> str:
        operation = str(span.attributes.get(OPERATION) or "")
        if operation in _CALLS:
            return LLM
        if operation in _EMBEDDINGS:
            return EMBEDDING
        if operation == "retrieval" or is_vector_query(span):
            return RETRIEVER
        if operation == "rerank":
            return RERANKER
        if not operation and (_input_messages(span) or str(span.attributes.get("llm.request.type")) in _CALLS):
            return LLM
        return OTHER

    def question(self, span: ReceivedSpan) -> str | None:
        for key in ("gen_ai.retrieval.query.text", "db.query.text"):
            if isinstance(span.attributes.get(key), str) and span.attributes[key].strip():
                return span.attributes[key].strip()
        if self.role(span) == OTHER:  # an agent or a workflow: the user's message
            users = [m for m in _input_messages(span) if m.get("role") == "user"]
            return _message_text(users[-1]) if users else None
        return None

    def answer(self, span: ReceivedSpan) -> str | None:
        if self.role(span) != OTHER:
            return None
        return "\n".join(filter(None, (_message_text(m) for m in _output_messages(span)))) or None

    def documents(self, span: ReceivedSpan) -> list[GivenContext]:
        found = contexts_of(span.attributes.get("gen_ai.retrieval.documents"))
        for event in span.events:
            if event.get("name") in _RESULT_EVENTS:
                context = _result(event.get("attributes") or {}, event["name"])
                if context is not None:
                    found.append(context)
        return found

    def call(self, span: ReceivedSpan) -> ModelCall:
        attributes = span.attributes
        prompt = _input_messages(span)
        completion = [_message_text(m) for m in _output_messages(span)]
        return ModelCall(
            model=_str(attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")),
            provider=_str(attributes.get("gen_ai.provider.name") or attributes.get("gen_ai.system")),
            prompt=json.dumps(prompt) if prompt else None,
            completion="\n".join(filter(None, completion)) or None,
            prompt_tokens=whole(_first(attributes, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
            completion_tokens=whole(_first(attributes, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
        )


def is_vector_query(span: ReceivedSpan) -> bool:
    """A database span that returned documents: result events, or a query on a vector store."""
    if not any(span.attributes.get(k) for k in _DB_SYSTEM):
        return False
    return any(e.get("name") in _RESULT_EVENTS for e in span.events)


def _db_system(span: ReceivedSpan) -> str:
    return str(next((span.attributes[k] for k in _DB_SYSTEM if span.attributes.get(k)), "db"))


def _result(attributes: dict, event: str) -> GivenContext | None:
    prefix = event  # db.query.result.document, db.search.result.entity, ...
    document = attributes.get(f"{prefix}.document", attributes.get(f"{prefix}.entity"))
    context = context_of(document)
    if context is None:
        return None
    metadata = parsed(attributes.get(f"{prefix}.metadata"))
    if isinstance(metadata, dict) and context.source is None:
        source = next((metadata[k] for k in SOURCE_KEYS if metadata.get(k)), None)
        context.source = str(source) if source is not None else None
    if context.source is None and attributes.get(f"{prefix}.id") is not None:
        context.source = str(attributes[f"{prefix}.id"])
    score = number(attributes.get(f"{prefix}.score"))  # a distance (lower is nearer) is no score: left out
    context.score = score if score is not None else context.score
    return context


def _input_messages(span: ReceivedSpan) -> list[dict]:
    attributes = span.attributes
    messages = _message_list(attributes.get("gen_ai.input.messages"))
    if not messages:
        messages = _indexed(attributes, "prompt")
    if not messages:
        messages = _event_messages(span.events, prompt=True)
    system = attributes.get("gen_ai.system_instructions")
    if system is not None and messages:
        messages = [{"role": "system", "content": _parts_text(parsed(system))}, *messages]
    return messages


def _output_messages(span: ReceivedSpan) -> list[dict]:
    messages = _message_list(span.attributes.get("gen_ai.output.messages"))
    return messages or _indexed(span.attributes, "completion") or _event_messages(span.events, prompt=False)


def _message_list(value) -> list[dict]:
    value = parsed(value)
    if not isinstance(value, list):
        return []
    return [{"role": str(m.get("role") or ""), "content": _message_text(m)} for m in value if isinstance(m, dict)]


def _indexed(attributes: dict, side: str) -> list[dict]:
    found: dict[int, dict] = {}
    for key, value in attributes.items():
        match = _INDEXED.match(key)
        if match and match.group(1) == side:
            found.setdefault(int(match.group(2)), {})[match.group(3)] = value
    return [
        {"role": str(m.get("role") or ""), "content": _parts_text(m.get("content"))} for _, m in sorted(found.items())
    ]


def _event_messages(events: list[dict], prompt: bool) -> list[dict]:
    messages = []
    for event in events:
        name, attributes = event.get("name"), event.get("attributes") or {}
        if prompt and name == "gen_ai.content.prompt":
            messages.append({"role": "user", "content": _parts_text(_first(attributes, "gen_ai.prompt", "content"))})
        elif prompt and name in _PROMPT_EVENTS:
            role = name.split(".")[1]
            text = _parts_text(_first(attributes, "content", "gen_ai.prompt", "message", "body"))
            messages.append({"role": str(attributes.get("role") or role), "content": text})
        elif not prompt and name == "gen_ai.content.completion":
            text = _parts_text(_first(attributes, "gen_ai.completion", "content"))
            messages.append({"role": "assistant", "content": text})
        elif not prompt and name == "gen_ai.choice":
            text = _parts_text(_first(attributes, "message", "content", "message.content", "body"))
            messages.append({"role": "assistant", "content": text})
    return [m for m in messages if m["content"]]


def _message_text(message) -> str:
    if not isinstance(message, dict):
        return _parts_text(message)
    if "parts" in message:
        return _parts_text(message["parts"])
    return _parts_text(message.get("content", message.get("message")))


def _parts_text(value) -> str:
    """A message's content as text: a string; the text parts of a `parts` list ({type: text, content}); a
    nested message ({role, content})."""
    value = parsed(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(filter(None, (_parts_text(part) for part in value)))
    if isinstance(value, dict):
        if value.get("type") not in (None, "text"):
            return ""
        if "parts" in value:
            return _parts_text(value["parts"])
        return next((_parts_text(value[k]) for k in ("content", *TEXT_KEYS) if value.get(k) is not None), "")
    return str(value)


def _first(attributes: dict, *keys: str):
    return next((attributes[k] for k in keys if attributes.get(k) is not None), None)


def _str(value) -> str | None:
    return None if value is None else str(value)
