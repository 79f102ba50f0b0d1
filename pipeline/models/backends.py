"""Chat backends behind the LLM seam, both through LlamaIndex's LLM interface.

`ollama` (default): llama_index.llms.ollama.Ollama; a structured call sends the JSON schema as
Ollama's `format`. `openai`: llama_index.llms.openai_like.OpenAILike against any OpenAI-compatible
server; a structured call sends the schema as `response_format` and also states it after the prompt's
user message, because servers that do not enforce a schema still need to know the keys (their replies,
often fenced or wrapped in prose, are what the tolerant parser is for).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import openai
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.ollama import Ollama
from llama_index.llms.openai_like import OpenAILike

from pipeline.config import Settings
from pipeline.models.failures import ollama_guard, openai_guard
from pipeline.models.ollama_models import ollama_client

# LlamaIndex LLM objects, one per (backend, host, model, timeout, context window[, api key]).
_llms: dict[tuple, object] = {}
_llms_guard = threading.Lock()

OPENAI_OPTIONS = {"temperature", "seed", "top_p", "stop", "max_tokens"}


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass
class StreamPiece:
    """One chunk of a streamed reply: its new text; the token counts ride on the last chunk."""

    delta: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _cached(key: tuple, build: Callable):
    with _llms_guard:
        if key not in _llms:
            _llms[key] = build()
        return _llms[key]


def _chat_messages(messages: list[dict]) -> list[ChatMessage]:
    return [ChatMessage(role=m["role"], content=m["content"]) for m in messages]


class OllamaChat:
    name = "ollama"
    guard = staticmethod(ollama_guard)

    def __init__(self, settings: Settings):
        self.settings = settings

    def identity(self, model: str) -> str | None:
        """None: the model's identity is its Ollama digest, which the LLM seam looks up."""
        return None

    def messages_as_sent(self, messages: list[dict], schema: dict | None) -> list[dict]:
        return messages

    def options(self, options: dict | None) -> dict:
        s = self.settings
        return {"temperature": s.temperature, "seed": s.seed, "num_ctx": s.context_window, **(options or {})}

    def llm(self, model: str) -> Ollama:
        s = self.settings
        key = ("ollama", s.ollama_host, model, s.request_timeout_s, s.context_window)
        # context_window is always set: left at -1, Ollama would ask /api/show and send the model's full
        # context length (131,072 for llama3.2) as num_ctx with every call.
        return _cached(
            key,
            lambda: Ollama(
                model=model,
                base_url=s.ollama_host,
                context_window=s.context_window,
                request_timeout=s.request_timeout_s,
                client=ollama_client(s),
            ),
        )

    def chat(self, model: str, messages: list[dict], schema: dict | None, options: dict) -> ChatResult:
        response = self._with_options(model, options).chat(_chat_messages(messages), format=schema)
        raw = response.raw or {}
        return ChatResult(response.message.content or "", raw.get("prompt_eval_count"), raw.get("eval_count"))

    def stream_chat(self, model: str, messages: list[dict], options: dict) -> Iterator[StreamPiece]:
        """The reply chunk by chunk, through LlamaIndex's Ollama.stream_chat (Ollama's own NDJSON stream)."""
        for response in self._with_options(model, options).stream_chat(_chat_messages(messages)):
            raw = response.raw or {}
            yield StreamPiece(response.delta or "", raw.get("prompt_eval_count"), raw.get("eval_count"))

    def _with_options(self, model: str, options: dict) -> Ollama:
        # A copy carries this call's options (it shares the cached object's HTTP client).
        return self.llm(model).model_copy(
            update={"temperature": options.get("temperature"), "additional_kwargs": options}
        )


class OpenAIChat:
    name = "openai"
    guard = staticmethod(openai_guard)

    def __init__(self, settings: Settings):
        self.settings = settings

    def identity(self, model: str) -> str:
        """No digest on this backend: the model's name and the configured revision stand for it."""
        return f"{model}@{self.settings.model_revision or 'unpinned'}"

    def messages_as_sent(self, messages: list[dict], schema: dict | None) -> list[dict]:
        if not schema:
            return messages
        rule = "Reply with only a JSON object that matches this JSON schema:\n" + json.dumps(schema, sort_keys=True)
        # after the prompt's user message, not in the system text: calls with different schemas on one context
        # then share the system text and the context, which a server's prefix cache reads once
        first = next((i for i, m in enumerate(messages) if m["role"] == "user"), None)
        if first is None:
            return [*messages, {"role": "user", "content": rule}]
        user = messages[first]
        return [*messages[:first], {**user, "content": f"{user['content']}\n\n{rule}"}, *messages[first + 1 :]]

    def options(self, options: dict | None) -> dict:
        s = self.settings
        return {"temperature": s.temperature, "seed": s.seed, **(options or {})}

    def llm(self, model: str) -> OpenAILike:
        s = self.settings
        key = ("openai", s.openai_base_url, model, s.request_timeout_s, s.context_window, s.openai_api_key)

        def build() -> OpenAILike:
            llm = OpenAILike(
                model=model,
                api_base=s.openai_base_url,
                api_key=s.openai_api_key,
                is_chat_model=True,
                context_window=s.context_window,
                timeout=s.request_timeout_s,
                max_retries=0,
            )  # the seam retries, with its own backoff and error messages
            llm._get_client()  # create the shared client now, not racily on first use from many threads
            return llm

        return _cached(key, build)

    def served_models(self) -> list[str]:
        """The model ids the server lists at /v1/models."""
        s = self.settings

        def listing() -> list[str]:
            with openai.OpenAI(
                base_url=s.openai_base_url, api_key=s.openai_api_key, timeout=s.request_timeout_s, max_retries=0
            ) as client:
                return [m.id for m in client.models.list()]

        return openai_guard(s, "list models", "-", listing)

    def chat(self, model: str, messages: list[dict], schema: dict | None, options: dict) -> ChatResult:
        kwargs = _openai_kwargs(options)
        if schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": schema},
            }
        response = self.llm(model).chat(_chat_messages(messages), **kwargs)
        usage = getattr(response.raw, "usage", None)
        return ChatResult(
            response.message.content or "",
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
        )

    def stream_chat(self, model: str, messages: list[dict], options: dict) -> Iterator[StreamPiece]:
        """The reply chunk by chunk through OpenAILike.stream_chat; usage comes in the last chunk
        (stream_options.include_usage), which servers that do not report it simply leave out."""
        kwargs = {**_openai_kwargs(options), "stream_options": {"include_usage": True}}
        for response in self.llm(model).stream_chat(_chat_messages(messages), **kwargs):
            usage = getattr(response.raw, "usage", None)
            yield StreamPiece(
                response.delta or "",
                getattr(usage, "prompt_tokens", None),
                getattr(usage, "completion_tokens", None),
            )


def _openai_kwargs(options: dict) -> dict:
    """Ollama-style options as chat.completions arguments; the rest travel in the request body."""
    options = dict(options)
    if "num_predict" in options:
        options["max_tokens"] = options.pop("num_predict")
    kwargs = {k: v for k, v in options.items() if k in OPENAI_OPTIONS}
    extra = {k: v for k, v in options.items() if k not in OPENAI_OPTIONS}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _schema_name(schema: dict) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64]


def chat_backend(settings: Settings) -> OllamaChat | OpenAIChat:
    return OpenAIChat(settings) if settings.llm_backend == "openai" else OllamaChat(settings)
