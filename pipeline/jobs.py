"""Work started from the app (an evaluation, a sweep) runs in a background thread of the app's process, so closing
the browser or leaving the page does not stop it; pages poll its progress and can cancel it.

A job keeps how it ended (its outcome, or the error that stopped it) after its thread is gone: a page that only
looked at running jobs would never see one that failed at once, e.g. with Ollama stopped."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import InputError, WorkbenchError

log = logging.getLogger(__name__)
_serials = itertools.count(1)


@dataclass
class Job:
    name: str
    total: int
    serial: int = field(default_factory=lambda: next(_serials))  # tells apart two jobs of the same name
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Any = None  # the work's own progress object, as its callback last gave it
    outcome: Any = None
    error: Exception | None = None  # what stopped the work before it ended; a WorkbenchError carries its fix
    thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class Jobs:
    """The jobs of one kind in this process, by name (one running per name); shared by every browser session."""

    def __init__(self, kind: str):
        self.kind = kind
        self.by_name: dict[str, Job] = {}
        self._guard = threading.Lock()

    def launch(self, name: str, total: int, work: Callable[[Job], Any]) -> Job:
        """Run `work(job)` in a thread; its return value is the job's outcome, its exception the job's error.
        InputError when a job of this name is still running."""
        with self._guard:
            if name in self.by_name and self.by_name[name].running:
                raise InputError(f"{self.kind} {name!r} is already running", fix="wait for it, or cancel it first")
            job = self.by_name[name] = Job(name, total)

        def body() -> None:
            try:
                job.outcome = work(job)
            except Exception as exc:  # kept for the page: a thread's exception is otherwise lost
                if not isinstance(exc, WorkbenchError):
                    log.exception("%s %r stopped", self.kind, name)
                job.error = exc

        job.thread = threading.Thread(target=body, name=f"{self.kind}-{name}", daemon=True)
        job.thread.start()
        return job

    def all(self) -> list[Job]:
        with self._guard:
            return list(self.by_name.values())
