"""The one LLM seam: every model call goes through here.

Chat and structured calls go through LlamaIndex's LLM classes (backends.py: Ollama, or an
OpenAI-compatible server); embeddings through LlamaIndex's OllamaEmbedding. Here sit timeouts,
retries with backoff on transient errors and the translation of failures into WorkbenchErrors
(failures.py), the response cache (key: model identity + messages + format + options) and the
record of every call with its texts (recorder.py).

A cache entry keeps the cost of the call that filled it (latency, tokens) and when it was made. A hit is a
replay: it is recorded with those original costs, marked cache_hit, and with the time the reply was first
computed, so every figure built on the calls counts what the answer cost to compute, never a store read. An entry
written before entries kept their cost is a miss (refilled). Settings.cache_read False (`--fresh`) reads no entry
and refills every one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from llama_index.embeddings.ollama import OllamaEmbedding

from pipeline.config import Settings
from pipeline.errors import ModelMissing, StoreError
from pipeline.models import ollama_models
from pipeline.models.backends import StreamPiece, chat_backend
from pipeline.models.failures import ollama_guard, with_retries
from pipeline.models.hosts import HostPool, Lease, unrouted
from pipeline.models.ollama_models import forget_digests, normalise_model  # noqa: F401  (public here)
from pipeline.models.recorder import CallRecorder, PendingCall, embed_text, messages_text
from pipeline.models.replay import first_computed
from store import llm_log
from store.db import Database
from store.records import CacheEntry, LLMCallRecord

_embedders: dict[tuple, OllamaEmbedding] = {}
_embedders_guard = threading.Lock()


@dataclass
class LLMReply:
    text: str
    cache_hit: bool  # replayed from the response cache: the tokens and latency are the original call's
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float | None = None  # the model call's (a replay's: the call that filled the cache)
    first_computed_at: datetime | None = None  # a replay: when the reply was computed; else None


class LLM:
    """A view on the model servers for one unit of work; the calls it makes are collected in `calls`."""

    def __init__(self, settings: Settings, db: Database | None, origin: str = "chat", eval_run_id: int | None = None):
        """origin says where the calls come from: chat, evaluation, rejudge, detector, ingest, health."""
        self.settings = settings
        self.db = db
        self.origin = origin
        self.backend = chat_backend(settings)
        self.hosts = HostPool(settings)
        self.recorder = CallRecorder(origin, settings.log_call_text, eval_run_id)
        self._pending_cache: dict[str, CacheEntry] = {}
        self._cache_guard = threading.Lock()
        self.keys: list[str] = []  # the cache key of every call made through this view that has one

    @property
    def calls(self) -> list[LLMCallRecord]:
        return self.recorder.calls

    def take_calls(self) -> list[LLMCallRecord]:
        return self.recorder.take()

    # -- models -------------------------------------------------------------------------------
    def pulled_models(self, fresh: bool = False) -> dict[str, str]:
        """name -> digest of every model pulled into Ollama, on its first host (cached for a minute)."""
        return ollama_models.pulled_models(self.hosts.settings_for(self.hosts.hosts[0]), fresh)

    def digest(self, model: str) -> str:
        """The model's identity: its Ollama digest, or model@revision on an OpenAI-compatible server."""
        return self.backend.identity(model) or self._ollama_digest(model)

    def _ollama_digest(self, model: str) -> str:
        """The pin: the digest on the first host that answers and has the model (hosts.py)."""
        return self.hosts.pinned_digest(model)

    # -- calls --------------------------------------------------------------------------------
    def chat(
        self,
        stage: str,
        model: str,
        messages: list[dict],
        schema: dict | None = None,
        options: dict | None = None,
        accept: Callable[[str], bool] | None = None,
        cache: bool = True,
    ) -> LLMReply:
        """One chat call. `accept` decides whether a reply may be cached (invalid output is not); cache=False
        bypasses the response cache for this call only (neither read nor written: the judge's repeats ask the
        model again)."""
        backend = self.backend
        sent = backend.messages_as_sent(messages, schema)
        options = backend.options(options)
        call = self.recorder.start(stage, model, backend.name, messages_text(sent))
        with self.recorder.failures(call):
            key, hit = self._lookup(call, model, sent, schema, options, read=cache)
            if hit is not None:
                return hit
            with self.recorder.reaching_model(call):
                result = self._routed(
                    stage, model, call.digest, lambda b, _s: b.chat(model, sent, schema, options), backend.guard
                )
        record = self.recorder.finish(call, result.text, result.prompt_tokens, result.completion_tokens)
        reply = LLMReply(result.text, False, result.prompt_tokens, result.completion_tokens, record.latency_ms)
        if cache and (accept is None or accept(reply.text)):
            self._keep(key, model, call.digest, reply, record.started_at)
        return reply

    def stream_chat(
        self,
        stage: str,
        model: str,
        messages: list[dict],
        on_delta: Callable[[str], None],
        options: dict | None = None,
        stop: Callable[[], bool] | None = None,
        read: bool = True,
    ) -> LLMReply:
        """One chat call whose reply reaches `on_delta` piece by piece as the server sends it; recorded,
        cached and translated like `chat`. Transient failures are retried only before the first piece
        (after it, the caller has shown text). A cache hit arrives as one piece. When `stop()` turns
        true the stream is closed (the server stops generating); the call is recorded with the text so
        far, marked stopped, and not cached. read=False asks the model even when the cache holds the reply
        (and refills the cache)."""
        backend = self.backend
        options = backend.options(options)
        call = self.recorder.start(stage, model, backend.name, messages_text(messages))
        with self.recorder.failures(call):
            key, hit = self._lookup(call, model, messages, None, options, read=read)
            if hit is not None:
                on_delta(hit.text)
                return hit
            with self.recorder.reaching_model(call):
                (pieces, first), lease = self._routed(
                    stage,
                    model,
                    call.digest,
                    lambda b, _s: _first_piece(b.stream_chat(model, messages, options)),
                    backend.guard,
                    hold=True,
                )
            try:
                text, last, stopped = self._drain(stage, model, pieces, first, on_delta, stop, lease.settings)
            except BaseException as exc:
                lease.release(exc)
                raise
            lease.release()
        if stopped:
            self.recorder.finish(call, text, error="stopped: the caller discarded the reply")
            return LLMReply(text, False, None, None)
        record = self.recorder.finish(call, text, last.prompt_tokens, last.completion_tokens)
        reply = LLMReply(text, False, last.prompt_tokens, last.completion_tokens, record.latency_ms)
        self._keep(key, model, call.digest, reply, record.started_at)
        return reply

    def _lookup(self, call: PendingCall, model: str, sent: list[dict], schema, options: dict, read: bool = True):
        """The call's cache key, and the cached reply (already recorded as a cache hit) or None (always None when
        read is False)."""
        call.digest = self.digest(model)
        key = _cache_key(model, call.digest, sent, schema, options)
        self._used(key)
        call.prompt_hash = key[:16]
        call.restart_clock()
        hit = self._cached(key) if read else None
        if hit is None:
            return key, None
        reply = LLMReply(
            hit["text"],
            True,
            hit.get("prompt_tokens"),
            hit.get("completion_tokens"),
            hit["latency_ms"],
            first_computed(hit),
        )
        self._replayed(call, hit, reply.text, reply.prompt_tokens, reply.completion_tokens)
        return key, reply

    def _replayed(self, call: PendingCall, hit: dict, text: str, prompt_tokens=None, completion_tokens=None) -> None:
        """A cache hit recorded with the costs of the call that filled the entry, and when that call was made."""
        self.recorder.finish(
            call,
            text,
            prompt_tokens,
            completion_tokens,
            cache_hit=True,
            latency_ms=hit["latency_ms"],
            first_computed_at=first_computed(hit),
        )

    def _keep(self, key: str, model: str, digest: str, reply: LLMReply, started: datetime) -> None:
        payload = {
            "text": reply.text,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        }
        self._remember(key, model, digest, payload, reply.latency_ms, started)

    def _drain(self, stage, model, pieces, first, on_delta, stop, settings=None) -> tuple[str, StreamPiece, bool]:
        """Hand each piece on as it comes; failures after the first piece are translated, not retried
        (`settings`: those of the host the stream comes from)."""
        text, piece = "", first or StreamPiece("")
        try:
            while piece is not None:
                if piece.delta:
                    text += piece.delta
                    on_delta(piece.delta)
                last = piece
                if stop is not None and stop():
                    return text, last, True
                piece = self._with_retries(
                    stage, model, lambda: next(pieces, None), self.backend.guard, retry=False, settings=settings
                )
        finally:
            pieces.close()
        return text, last, False

    def embed_documents(self, texts: list[str], cached: bool = False) -> list[list[float]]:
        """Texts embedded as documents. cached=True reads and fills the response cache, for a few texts such as
        an answer's sentences (ingest leaves it off: chunk vectors are kept with the chunks)."""
        prefix = self.settings.embed_document_prefix
        call = self._embed_call("embed_documents", embed_text([_prefixed(prefix, t) for t in texts]))
        key = None
        with self.recorder.failures(call):
            call.digest = self._ollama_digest(call.model)
            if cached:
                key = _cache_key(
                    call.model, call.digest, [{"role": "documents", "content": texts}], None, {"prefix": prefix}
                )
                self._used(key)
            call.restart_clock()
            hit = self._cached(key) if key else None
            if hit is not None:
                self._replayed(call, hit, _vectors_text(hit["vectors"]))
                return hit["vectors"]
            vectors = self._embedded(call, lambda embedder: embedder.get_text_embedding_batch(texts))
        record = self.recorder.finish(call, _vectors_text(vectors))
        if key:
            self._remember(key, call.model, call.digest, {"vectors": vectors}, record.latency_ms, record.started_at)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        call = self._embed_call("embed_query", _prefixed(self.settings.embed_query_prefix, text))
        with self.recorder.failures(call):
            call.digest = self._ollama_digest(call.model)
            key = _cache_key(
                call.model,
                call.digest,
                [{"role": "query", "content": text}],
                None,
                {"prefix": self.settings.embed_query_prefix},
            )
            call.prompt_hash = key[:16]
            self._used(key)
            call.restart_clock()
            hit = self._cached(key)
            if hit is not None:
                self._replayed(call, hit, _vectors_text([hit["vector"]]))
                return hit["vector"]
            vector = self._embedded(call, lambda embedder: embedder.get_query_embedding(text))
        record = self.recorder.finish(call, _vectors_text([vector]))
        self._remember(key, call.model, call.digest, {"vector": vector}, record.latency_ms, record.started_at)
        return vector

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Texts embedded as queries (with the query prefix, as embed_query sends each) in one call; not cached."""
        prefix = self.settings.embed_query_prefix
        sent = [_prefixed(prefix, t) for t in texts]
        call = self._embed_call("embed_queries", embed_text(sent))
        with self.recorder.failures(call):
            call.digest = self._ollama_digest(call.model)
            call.restart_clock()
            vectors = self._embedded(
                call,  # formatted as get_query_embedding formats one query, so each vector equals embed_query's
                lambda embedder: embedder.get_general_text_embeddings([embedder._format_query(t) for t in texts]),
            )
        self.recorder.finish(call, _vectors_text(vectors))
        return vectors

    def embed_digest(self) -> str:
        """The embedding model's digest (embeddings always come from Ollama)."""
        return self._ollama_digest(self.settings.embed_model)

    def _embedded(self, call: PendingCall, embed: Callable):
        """embed(the embedder of the Ollama host the pool picks), failing over like any call."""
        with self.recorder.reaching_model(call):
            return self._routed(
                call.stage, call.model, call.digest, lambda _b, s: embed(self._embedder(s)), ollama_guard
            )

    def _embed_call(self, stage: str, prompt_text: str) -> PendingCall:
        call = self.recorder.start(stage, self.settings.embed_model, "ollama", prompt_text)
        call.prompt_hash = hashlib.sha256(prompt_text.encode("utf-8")).hexdigest()[:16]
        return call

    def _routed(self, stage: str, model: str, digest: str, request: Callable, guard: Callable, hold: bool = False):
        """request(backend, settings) on the Ollama host the pool picks, failing over to another host when one
        fails (hosts.py), or on the OpenAI-compatible server. hold=True returns (result, lease) with the
        host's slot still held, for the caller to release."""
        if guard is not ollama_guard:
            result = self._with_retries(stage, model, lambda: request(self.backend, self.settings), guard)
            return (result, unrouted(self.settings)) if hold else result

        def attempt(lease: Lease, last: bool):
            backend = self.backend if lease.settings is self.settings else chat_backend(lease.settings)
            return self._with_retries(
                stage, model, lambda: request(backend, lease.settings), guard, retry=last, settings=lease.settings
            )

        result, lease = self.hosts.call(model, digest, attempt)
        if hold:
            return result, lease
        lease.release()
        return result

    def _with_retries(self, stage: str, model: str, call: Callable, guard: Callable, retry: bool = True, settings=None):
        """Every model request passes here (bench/overhead.py times it to tell model time from ours), each
        piece of a streamed reply too (retry=False: translated, not retried). `settings`: the host's."""
        settings = settings or self.settings
        settings = settings if retry else dataclasses.replace(settings, llm_retries=0)
        try:
            return with_retries(settings, stage, model, call, guard)
        except ModelMissing:
            forget_digests()  # the listing is stale: the model went away after it was read
            raise

    def _embedder(self, settings: Settings | None = None) -> OllamaEmbedding:
        s = settings or self.settings
        key = (s.ollama_host, s.embed_model, s.embed_query_prefix, s.embed_document_prefix, s.request_timeout_s)
        with _embedders_guard:
            if key not in _embedders:
                _embedders[key] = OllamaEmbedding(
                    model_name=s.embed_model,
                    base_url=s.ollama_host,
                    query_instruction=s.embed_query_prefix or None,
                    text_instruction=s.embed_document_prefix or None,
                    client_kwargs={"timeout": s.request_timeout_s},
                )
            return _embedders[key]

    # -- cache: read from DuckDB, new entries kept here until the caller stores them with its run --
    def _used(self, key: str) -> None:
        with self._cache_guard:
            self.keys.append(key)

    def take_keys(self) -> list[str]:
        with self._cache_guard:
            keys, self.keys = self.keys, []
        return keys

    def _cached(self, key: str) -> dict | None:
        """The entry under key: None when the cache is off, not read (Settings.cache_read), holds none, or holds
        one written before entries kept their cost (refilled, so a replay always has an original to report)."""
        if not (self.settings.cache_enabled and self.settings.cache_read) or self.db is None:
            return None
        with self._cache_guard:
            pending = self._pending_cache.get(key)
        if pending:
            return pending.response
        try:
            found = llm_log.cache_get(self.db, key)
        except StoreError:  # a store held by another process (or damaged): a miss, never a failed call
            return None
        return found if found is not None and found.get("latency_ms") is not None else None

    def cached_entry(self, key: str) -> dict | None:
        """The cache's entry under key (see _cached), for a caller that keeps its own entries (a run's latency)."""
        return self._cached(key)

    def _remember(self, key: str, model: str, digest: str, payload: dict, latency_ms: float, started: datetime) -> None:
        if self.settings.cache_enabled and self.db is not None:
            payload = {**payload, "latency_ms": latency_ms, "computed_at": started.isoformat()}
            with self._cache_guard:
                self._pending_cache[key] = CacheEntry(key, model, digest, payload)

    def remember(self, key: str, payload: dict, latency_ms: float, started: datetime) -> None:
        """Keep an entry of the caller's own (not a model's reply) with the cost it records."""
        self._remember(key, "", "", payload, latency_ms, started)

    def take_cache_entries(self) -> list[CacheEntry]:
        with self._cache_guard:
            entries, self._pending_cache = list(self._pending_cache.values()), {}
        return entries


def _first_piece(pieces: Iterator[StreamPiece]) -> tuple[Iterator[StreamPiece], StreamPiece | None]:
    """Open the stream and wait for its first piece (None: the reply was empty)."""
    return pieces, next(pieces, None)


def _prefixed(prefix: str, text: str) -> str:
    """The text as OllamaEmbedding sends it (instruction, a space, the text)."""
    return f"{prefix} {text}" if prefix else text


def _vectors_text(vectors: list[list[float]]) -> str:
    dims = len(vectors[0]) if vectors else 0
    return f"{len(vectors)} vector{'s' if len(vectors) != 1 else ''} of {dims} dimensions"


def _cache_key(model: str, digest: str, messages: list[dict], schema, options: dict) -> str:
    blob = json.dumps(
        {"model": normalise_model(model), "digest": digest, "messages": messages, "format": schema, "options": options},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
