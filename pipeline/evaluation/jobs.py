"""Evaluations started from the app run in a background thread of the app's process, so closing the
browser or leaving the page does not stop them; the page polls their progress and can cancel them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.runner import EvalOutcome, Progress, run_evaluation
from store.db import Database


@dataclass
class EvalJob:
    name: str
    total: int
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Progress | None = None
    outcome: EvalOutcome | None = None
    error: str | None = None
    thread: threading.Thread | None = None
    announced: bool = False

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_jobs: dict[str, EvalJob] = {}
_guard = threading.Lock()


def start_job(settings: Settings, db: Database, dataset: Dataset, name: str, concurrency: int) -> EvalJob:
    name = name.strip()
    with _guard:
        if name in _jobs and _jobs[name].running:
            raise InputError(f"evaluation {name!r} is already running", fix="wait for it, or cancel it first")
        job = _jobs[name] = EvalJob(name, len(dataset.items))

    def work() -> None:
        def update(progress: Progress) -> None:
            job.progress = progress

        try:
            job.outcome = run_evaluation(
                settings, db, dataset, name, concurrency, on_progress=update, cancel=job.cancel
            )
            job.progress = job.outcome.progress
        except WorkbenchError as exc:
            job.error = str(exc)

    job.thread = threading.Thread(target=work, name=f"eval-{name}", daemon=True)
    job.thread.start()
    return job


def jobs() -> list[EvalJob]:
    with _guard:
        return list(_jobs.values())
