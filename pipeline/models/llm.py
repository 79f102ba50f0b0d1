"""The one LLM seam: every model call goes through here.

It owns the Ollama client, timeouts, retries with backoff on transient errors, the translation of
failures into WorkbenchErrors that say the fix, the response cache (key: model digest + messages +
format + options) and the record of every call.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import httpx
import ollama
from llama_index.embeddings.ollama import OllamaEmbedding

from pipeline.config import Settings
from pipeline.errors import ModelMissing, OllamaFailed, OllamaTimeout, OllamaUnreachable, WorkbenchError
from store import llm_log
from store.db import Database
from store.records import CacheEntry, LLMCallRecord

DIGEST_TTL_S = 60.0
TRANSIENT = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.PoolTimeout)

_clients: dict[tuple, ollama.Client] = {}
_embedders: dict[tuple, OllamaEmbedding] = {}
_digests: dict[tuple, tuple[float, dict[str, str]]] = {}
_shared_guard = threading.Lock()


def normalise_model(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


def _client(settings: Settings) -> ollama.Client:
    key = (settings.ollama_host, settings.request_timeout_s)
    with _shared_guard:
        if key not in _clients:
            _clients[key] = ollama.Client(host=settings.ollama_host, timeout=settings.request_timeout_s)
        return _clients[key]


def forget_digests() -> None:
    with _shared_guard:
        _digests.clear()


@dataclass
class LLMReply:
    text: str
    cache_hit: bool
    prompt_tokens: int | None
    completion_tokens: int | None


class LLM:
    """A view on Ollama for one unit of work; the calls it makes are collected in `calls`."""

    def __init__(self, settings: Settings, db: Database | None, origin: str = "chat"):
        """origin says where the calls come from: chat, evaluation, rejudge, detector, ingest, health."""
        self.settings = settings
        self.db = db
        self.origin = origin
        self.calls: list[LLMCallRecord] = []
        self._pending_cache: dict[str, CacheEntry] = {}
        self._calls_guard = threading.Lock()

    # -- models -------------------------------------------------------------------------------
    def pulled_models(self, fresh: bool = False) -> dict[str, str]:
        """name -> digest of every pulled model (cached for a minute)."""
        key = (self.settings.ollama_host,)
        with _shared_guard:
            cached = _digests.get(key)
        if cached and not fresh and time.monotonic() - cached[0] < DIGEST_TTL_S:
            return cached[1]
        listing = self._guarded("list models", "-", lambda: _client(self.settings).list())
        models = {normalise_model(m.model): m.digest for m in listing.models}
        with _shared_guard:
            _digests[key] = (time.monotonic(), models)
        return models

    def digest(self, model: str) -> str:
        models = self.pulled_models()
        name = normalise_model(model)
        if name not in models:
            models = self.pulled_models(fresh=True)
            if name not in models:
                raise ModelMissing(model)
        return models[name]

    # -- calls --------------------------------------------------------------------------------
    def chat(self, stage: str, model: str, messages: list[dict], schema: dict | None = None,
             options: dict | None = None, accept: Callable[[str], bool] | None = None) -> LLMReply:
        """One chat call. `accept` decides whether a reply may be cached (invalid output is not)."""
        options = {"temperature": self.settings.temperature, "seed": self.settings.seed, **(options or {})}
        digest = self.digest(model)
        key = _cache_key(model, digest, messages, schema, options)
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        hit = self._cached(key)
        if hit is not None:
            self._record(stage, model, digest, key, hit, t0, started, cache_hit=True)
            return LLMReply(hit["text"], True, hit.get("prompt_tokens"), hit.get("completion_tokens"))
        try:
            response = self._with_retries(stage, model, lambda: _client(self.settings).chat(
                model=model, messages=messages, format=schema, options=options, stream=False))
        except WorkbenchError as exc:
            self._record(stage, model, digest, key, {}, t0, started, error=str(exc))
            raise
        payload = {"text": response.message.content or "", "prompt_tokens": response.prompt_eval_count,
                   "completion_tokens": response.eval_count}
        self._record(stage, model, digest, key, payload, t0, started)
        if accept is None or accept(payload["text"]):
            self._remember(key, model, digest, payload)
        return LLMReply(payload["text"], False, payload["prompt_tokens"], payload["completion_tokens"])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        embedder = self._embedder()
        return self._embed("embed_documents", lambda: embedder.get_text_embedding_batch(texts))

    def embed_query(self, text: str) -> list[float]:
        model = self.settings.embed_model
        digest = self.digest(model)
        key = _cache_key(model, digest, [{"role": "query", "content": text}], None,
                         {"prefix": self.settings.embed_query_prefix})
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        hit = self._cached(key)
        if hit is not None:
            self._record("embed_query", model, digest, key, {}, t0, started, cache_hit=True)
            return hit["vector"]
        embedder = self._embedder()
        vector = self._embed("embed_query", lambda: embedder.get_query_embedding(text))
        self._remember(key, model, digest, {"vector": vector})
        return vector

    # -- cache: read from DuckDB, new entries kept here until the caller stores them with its run --
    def _cached(self, key: str) -> dict | None:
        if not self.settings.cache_enabled or self.db is None:
            return None
        with self._calls_guard:
            pending = self._pending_cache.get(key)
        return pending.response if pending else llm_log.cache_get(self.db, key)

    def _remember(self, key: str, model: str, digest: str, payload: dict) -> None:
        if self.settings.cache_enabled and self.db is not None:
            with self._calls_guard:
                self._pending_cache[key] = CacheEntry(key, model, digest, payload)

    def take_cache_entries(self) -> list[CacheEntry]:
        with self._calls_guard:
            entries, self._pending_cache = list(self._pending_cache.values()), {}
        return entries

    def _embedder(self) -> OllamaEmbedding:
        s = self.settings
        key = (s.ollama_host, s.embed_model, s.embed_query_prefix, s.embed_document_prefix, s.request_timeout_s)
        with _shared_guard:
            if key not in _embedders:
                _embedders[key] = OllamaEmbedding(
                    model_name=s.embed_model, base_url=s.ollama_host,
                    query_instruction=s.embed_query_prefix or None,
                    text_instruction=s.embed_document_prefix or None,
                    client_kwargs={"timeout": s.request_timeout_s})
            return _embedders[key]

    def _embed(self, stage: str, call: Callable):
        model = self.settings.embed_model
        digest = self.digest(model)
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        try:
            result = self._with_retries(stage, model, call)
        except WorkbenchError as exc:
            self._record(stage, model, digest, "", {}, t0, started, error=str(exc))
            raise
        self._record(stage, model, digest, "", {}, t0, started)
        return result

    # -- failure handling ---------------------------------------------------------------------
    def _with_retries(self, stage: str, model: str, call: Callable):
        attempts = 1 + max(0, self.settings.llm_retries)
        for attempt in range(attempts):
            try:
                return self._guarded(stage, model, call)
            except _Transient as exc:
                if attempt == attempts - 1:
                    raise OllamaFailed(model, stage, f"{exc.detail} (after {attempts} tries)") from None
                time.sleep(self.settings.llm_backoff_s * (2 ** attempt))

    def _guarded(self, stage: str, model: str, call: Callable):
        try:
            return call()
        except ConnectionError:
            raise OllamaUnreachable(self.settings.ollama_host) from None
        except httpx.ConnectError:
            raise OllamaUnreachable(self.settings.ollama_host) from None
        except httpx.TimeoutException:
            raise OllamaTimeout(model, stage, self.settings.request_timeout_s) from None
        except ollama.ResponseError as exc:
            if exc.status_code == 404 and "not found" in str(exc.error).lower():
                forget_digests()
                raise ModelMissing(model) from None
            if exc.status_code >= 500 or exc.status_code == -1:
                raise _Transient(f"HTTP {exc.status_code}: {exc.error}") from None
            raise OllamaFailed(model, stage, f"HTTP {exc.status_code}: {exc.error}") from None
        except TRANSIENT as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from None

    def _record(self, stage, model, digest, key, payload, t0, started, cache_hit=False, error=None):
        record = LLMCallRecord(stage=stage, model=model, digest=digest, prompt_hash=key[:16],
                               prompt_tokens=payload.get("prompt_tokens"),
                               completion_tokens=payload.get("completion_tokens"),
                               latency_ms=(time.perf_counter() - t0) * 1000, cache_hit=cache_hit,
                               error=error, started_at=started, origin=self.origin)
        with self._calls_guard:
            self.calls.append(record)

    def take_calls(self) -> list[LLMCallRecord]:
        with self._calls_guard:
            calls, self.calls = self.calls, []
        return calls


class _Transient(Exception):
    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


def _cache_key(model: str, digest: str, messages: list[dict], schema, options: dict) -> str:
    blob = json.dumps({"model": normalise_model(model), "digest": digest, "messages": messages,
                       "format": schema, "options": options}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
