"""The record of every model call: chat, structured, embeddings; cache hits and failures included."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pipeline.errors import WorkbenchError
from pipeline.tracing import current_span_id, innermost_span
from store.records import LLMCallRecord

# An embedding batch longer than this is recorded by its size, not its texts (ingest embeds whole
# documents; their chunks are already in the store).
EMBED_TEXT_LIMIT = 2000


@dataclass
class PendingCall:
    stage: str
    model: str
    backend: str
    prompt_text: str | None
    digest: str | None = None
    prompt_hash: str = ""
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    t0: float = field(default_factory=time.perf_counter)
    span_id: str | None = field(default_factory=current_span_id)  # the step that made the call

    def restart_clock(self) -> None:
        """Latency counts the model call, not the lookups before it."""
        self.started, self.t0 = datetime.now(timezone.utc), time.perf_counter()


def messages_text(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def embed_text(texts: list[str]) -> str:
    joined = "\n\n".join(texts)
    if len(texts) == 1 or len(joined) <= EMBED_TEXT_LIMIT:
        return joined
    return f"{len(texts)} texts, {len(joined):,} characters"


class CallRecorder:
    """Collects LLMCallRecords for one unit of work; `take` hands them over for storing."""

    def __init__(self, origin: str, keep_text: bool = True, eval_run_id: int | None = None):
        self.origin = origin
        self.keep_text = keep_text
        self.eval_run_id = eval_run_id
        self.calls: list[LLMCallRecord] = []
        self._guard = threading.Lock()

    def start(self, stage: str, model: str, backend: str, prompt_text: str) -> PendingCall:
        return PendingCall(stage, model, backend, prompt_text if self.keep_text else None)

    def finish(
        self,
        call: PendingCall,
        completion_text: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cache_hit: bool = False,
        error: str | None = None,
        latency_ms: float | None = None,
        first_computed_at: datetime | None = None,
    ) -> LLMCallRecord:
        """The call's record. A replay (cache_hit) passes the original call's latency and when it was made."""
        record = LLMCallRecord(
            stage=call.stage,
            model=call.model,
            digest=call.digest,
            prompt_hash=call.prompt_hash,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=(time.perf_counter() - call.t0) * 1000 if latency_ms is None else latency_ms,
            cache_hit=cache_hit,
            error=error,
            started_at=call.started,
            origin=self.origin,
            backend=call.backend,
            prompt_text=call.prompt_text,
            completion_text=completion_text if self.keep_text else None,
            eval_run_id=self.eval_run_id,
            span_id=call.span_id,
            first_computed_at=first_computed_at,
        )
        with self._guard:
            self.calls.append(record)
        return record

    @contextmanager
    def reaching_model(self, call: PendingCall):
        """The block that sends the call to the model: the call is linked to the innermost span the request
        opened (LlamaIndex's `Ollama.chat` under our step), not to the step that asked for it."""
        with innermost_span(lambda span_id: setattr(call, "span_id", span_id)):
            yield call

    @contextmanager
    def failures(self, call: PendingCall):
        """A WorkbenchError raised inside is recorded on the call, then re-raised."""
        try:
            yield call
        except WorkbenchError as exc:
            self.finish(call, error=str(exc))
            raise

    def take(self) -> list[LLMCallRecord]:
        with self._guard:
            calls, self.calls = self.calls, []
        return calls
