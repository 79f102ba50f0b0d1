"""The online worker: every received trace whose root span has ended becomes one run of kind `traced`, oldest
first. A question-and-answer trace that the sampling rate chooses is verified claim by claim against its
retrieved contexts, as an imported answer is; any other is kept as a trace with the reason it was not evaluated.

Resumable and never twice: what is waiting is read from the store (traces with no run), the run is written with
its trace id in one transaction (store/runs.insert_run writes no second run for a trace, journal replay
included), and a trace whose run is kept in the journal is not taken again. When the models cannot be reached
the trace is left waiting and the worker backs off; nothing is stored as failed for an outage.

After a batch that stored runs, and once when the day turns, the worker checks the latest complete day's
faithfulness per service against floors and the day before (pipeline/collect/traced.py) and opens its alerts,
each once."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from pipeline.answering import status
from pipeline.answering.events import AnswerResult
from pipeline.collect.assemble import TracedRequest, assemble
from pipeline.collect.conventions.mapping import load_mappings
from pipeline.collect.metrics import OnlineMetrics
from pipeline.collect.traced import check_traced
from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.evaluation.given import TRACED, check_given, given_config
from pipeline.models.llm import LLM
from pipeline.trace_export import SERVICE_NAME as OWN_SERVICE
from store.journal import replay, save_run
from store.records import RetrievalRecord, RunLog
from store.traces import trace_spans, waiting_traces

BATCH = 20  # traces read per look at the store


def sampled(trace_id: str, rate: float) -> bool:
    """Whether the sampling rate chooses this trace; by its id, so every restart chooses the same traces."""
    if rate >= 1:
        return True
    return int(hashlib.sha256(trace_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < rate


@dataclass
class WorkerState:
    evaluated: int = 0  # runs with verdicts
    kept: int = 0  # runs of traces not evaluated (no question-and-answer, or sampled out)
    journaled: list[str] = field(default_factory=list)  # traces whose run waits in the journal
    last_error: str | None = None  # why the worker is waiting (the models could not be reached)
    alerts_opened: int = 0  # alerts on traced days' faithfulness (below a floor, a drop against the day before)


class OnlineWorker:
    def __init__(self, settings: Settings, db, settle_s: float = 1.0):
        """settle_s: how long after its root span arrived a trace is taken, so that spans of the same request
        sent in a later batch are in the store first."""
        self.settings, self.db, self.settle_s = settings, db, settle_s
        self.state = WorkerState()
        self.stopping = threading.Event()
        self.metrics = OnlineMetrics(settings, db) if settings.collect_metrics.strip() else None
        self.mappings = load_mappings(settings.collect_mapping)  # checked at start: a mistake stops collect
        self.checked_on: date | None = None  # the day of the last check of traced days' faithfulness

    def run_once(self, limit: int = BATCH) -> int:
        """Turn up to `limit` waiting traces into runs; how many were stored (or journaled). Stops at the first
        trace the models could not check (it stays waiting)."""
        replay(self.db, self.settings.store_save_wait_s)  # spans the receiver journaled while the store was busy
        before = datetime.now(timezone.utc) - timedelta(seconds=self.settle_s)
        done = 0
        for trace_id in waiting_traces(self.db, before, limit, self.state.journaled):
            if self.stopping.is_set():  # collect is shutting down: the rest waits for the next start
                break
            run = self.run_of(self.assemble(trace_id))
            if run is None:
                break
            run_id, journal = save_run(self.db, run.log, self.settings.store_save_wait_s, run.scores)
            if journal is not None:
                self.state.journaled.append(trace_id)
            done += 1
        self.check_days(stored=done > 0)
        return done

    def assemble(self, trace_id: str) -> TracedRequest:
        """One received trace, read through the conventions and the services' mappings."""
        return assemble(trace_spans(self.db, trace_id), self.mappings)

    def check_days(self, stored: bool, today: date | None = None) -> None:
        """Check the latest complete day (pipeline/collect/traced.py) when runs were stored or the day
        turned since the last check; its alerts open once however often it runs."""
        today = today or datetime.now().date()
        if stored or self.checked_on != today:
            self.state.alerts_opened += check_traced(self.db, self.settings, today)[1]
            self.checked_on = today

    def run_of(self, request: TracedRequest) -> TracedRun | None:
        """The run of one trace, with its metric scores; None when its check failed because a model could not
        be reached."""
        reason = request.not_evaluated
        if request.service == OWN_SERVICE:
            reason = "the workbench's own trace (its otlp_endpoint points at collect): kept, not verified again"
        if reason is None and not sampled(request.trace_id, self.settings.collect_sample_rate):
            reason = f"not sampled (collect_sample_rate {self.settings.collect_sample_rate:g})"
        if reason is not None:
            self.state.kept += 1
            return TracedRun(kept_run(self.settings, request, reason))
        llm = LLM(self.settings, self.db, origin="online")
        given = check_given(
            self.settings,
            llm,
            request.question,
            request.answer,
            request.contexts,
            request.service,
            kind=TRACED,
            one_at_a_time=True,  # the one worker thread
        )
        if given.result.status == status.FAILED:
            self.state.last_error = given.result.error
            return None
        try:
            scores = self.metrics.scores(llm, request, given.result) if self.metrics else []
        except WorkbenchError as exc:  # the judge could not be reached: the trace waits, verified again later
            self.state.last_error = exc.message
            return None
        self.state.last_error = None
        self.state.evaluated += 1
        return TracedRun(with_trace(given.log, request, self.metrics.config() if self.metrics else None), scores)

    def run_forever(self, poll_s: float = 0.5, backoff_s: float = 10.0) -> None:
        """Until `stopping` is set; the trace being verified then is finished and stored, the rest wait."""
        stop = self.stopping
        while not stop.is_set():
            try:
                done = self.run_once()
            except Exception as exc:  # noqa: BLE001 - a store or model fault: said, and tried again later
                self.state.last_error = str(exc)
                done = 0
            stop.wait(backoff_s if self.state.last_error else (0 if done else poll_s))


@dataclass
class TracedRun:
    log: RunLog
    scores: list = field(default_factory=list)  # the online metrics' scores (collect_metrics)


def with_trace(log: RunLog, request: TracedRequest, metrics_config: dict | None = None) -> RunLog:
    """A checked answer's run as the traced run: the application's trace, calls, model, start and latency first,
    the check's own spans and calls after them; the online metrics' options and prompts in its config."""
    run = log.run
    if metrics_config:
        run.config["metrics"] = metrics_config
    run.trace_id, run.generator_model = request.trace_id, request.model
    run.trace_convention = request.convention
    run.started_at, run.latency_ms = request.started_at, request.latency_ms
    log.calls = [*request.calls, *log.calls]
    log.spans = [*request.spans, *log.spans]
    return log


def kept_run(settings: Settings, request: TracedRequest, reason: str) -> RunLog:
    """A trace kept without verdicts: its question and answer if any, its contexts, calls and spans."""
    result = AnswerResult(
        kind=TRACED,
        question=request.question or "",
        status=status.NOT_EVALUATED,
        started_at=request.started_at,
        answer=request.answer,
        abstain_reason=reason,
        generator_model=request.model,
        config=given_config(settings, request.service),
        pipeline=request.service,
        trace_id=request.trace_id,
        latency_ms=request.latency_ms,
        trace_convention=request.convention,
    )
    retrievals = [
        RetrievalRecord(1, request.question or "", n, -n, c.score, context_text=c.text, context_source=c.source)
        for n, c in enumerate(request.contexts, start=1)
    ]
    finished = request.started_at + timedelta(milliseconds=request.latency_ms or 0)
    return result.to_log([], retrievals, finished, request.calls, [], request.spans)
