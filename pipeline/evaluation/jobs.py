"""Evaluations started from the app run in a background thread of the app's process, so closing the
browser or leaving the page does not stop them; the page polls their progress and can cancel them.

A job keeps how it ended (its outcome, or the error that stopped it) after its thread is gone: a page that
only looked at running jobs would never see a run that failed at once, e.g. with Ollama stopped."""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass, field

from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.runner import EvalOutcome, Progress, chosen_metrics, pipeline_of, run_evaluation
from pipeline.models.health import check_ollama
from store.db import Database

log = logging.getLogger(__name__)
_serials = itertools.count(1)


@dataclass
class EvalJob:
    name: str
    total: int
    serial: int = field(default_factory=lambda: next(_serials))  # tells apart two jobs of the same name
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Progress | None = None
    outcome: EvalOutcome | None = None
    error: Exception | None = None  # what stopped the run before it ended; a WorkbenchError carries its fix
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_jobs: dict[str, EvalJob] = {}
_guard = threading.Lock()


def start_job(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    concurrency: int,
    metrics: list[str] | None = None,
    pipeline: str | None = None,
) -> EvalJob:
    """Start an evaluation in the background; `metrics`: the metrics to measure (None: run_evaluation's default);
    `pipeline`: who wrote the answers of a dataset that carries them (None: run_evaluation's default)."""
    chosen_metrics(metrics)  # a bad choice is refused here, where the form can show it
    pipeline_of(dataset, pipeline)  # so is a pipeline name given with a golden set
    name = name.strip()
    if not name:
        raise InputError("the evaluation needs a name", fix="type a run name, e.g. baseline")
    ready(settings, name)
    with _guard:
        if name in _jobs and _jobs[name].running:
            raise InputError(f"evaluation {name!r} is already running", fix="wait for it, or cancel it first")
        job = _jobs[name] = EvalJob(name, len(dataset.items))

    def work() -> None:
        def update(progress: Progress) -> None:
            job.progress = progress

        try:
            job.outcome = run_evaluation(
                settings,
                db,
                dataset,
                name,
                concurrency,
                on_progress=update,
                cancel=job.cancel,
                metrics=metrics,
                pipeline=pipeline,
            )
            job.progress = job.outcome.progress
        except Exception as exc:  # kept for the page: a thread's exception is otherwise lost
            if not isinstance(exc, WorkbenchError):
                log.exception("evaluation %r stopped", name)
            job.error = exc

    job.thread = threading.Thread(target=work, name=f"eval-{name}", daemon=True)
    job.thread.start()
    return job


def ready(settings: Settings, name: str) -> None:
    """Refuse to start while a model server or model is missing, before a run is stored: with the model list
    cached the run would otherwise start and fail every item."""
    failed = next((c for c in check_ollama(settings) if not c.ok), None)
    if failed is not None:
        raise WorkbenchError(f"evaluation {name!r} cannot start: {failed.detail}", fix=failed.fix)


def jobs() -> list[EvalJob]:
    with _guard:
        return list(_jobs.values())
