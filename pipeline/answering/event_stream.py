"""A run's steps emit their events through a sink (`Emit`) and return their values; its listener still reads the
events as a stream. `pulled` joins the two: the work runs on a thread of its own, one event at a time, and only
while the listener waits for its next event, so the work pauses at each emit as a generator pauses at a yield: a
listener that acts on an event (a test holding the store locked once the answer is decided) does so before the
work goes on, and one that stops listening stops the work at its next emit."""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator

from pipeline.answering.events import Event

Emit = Callable[[Event], None]


class Stopped(GeneratorExit):
    """Raised in the work at its next emit once the listener stopped listening: what a generator's close raises
    at its yield, so the steps' clean-up (and tracing's "stopped before it finished") read it the same way."""


def pulled(work: Callable[[Emit], None], name: str = "run") -> Iterator[Event]:
    """The events `work(emit)` emits, as a generator; the work's exception is raised here. The work starts at the
    first event asked for and sees this thread's context (its trace) as it was then."""
    handoff = _Handoff()
    thread = threading.Thread(target=contextvars.copy_context().run, args=(handoff.run, work), name=name, daemon=True)
    thread.start()
    try:
        while True:
            what, value = handoff.next()
            if what == "event":
                yield value
            elif what == "raised":
                raise value
            else:
                return
    finally:
        handoff.stop()
        thread.join()
        handoff.raise_late_error()


class _Handoff:
    """One event at a time between the work's thread and the listener's: the work may go on (`turn`) only while
    the listener waits in `next`."""

    def __init__(self):
        self.turn = threading.Semaphore(0)
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self.stopped = False

    def next(self) -> tuple[str, object]:
        self.turn.release()
        return self.out.get()

    def stop(self) -> None:
        """The listener is gone: the work, paused at an emit (or not yet started), stops there."""
        self.stopped = True
        self.turn.release()

    def raise_late_error(self) -> None:
        """An error the work raised while stopping (its clean-up failed), raised as a generator's close would."""
        while not self.out.empty():
            what, value = self.out.get()
            if what == "raised":
                raise value

    def emit(self, event: Event) -> None:
        self.out.put(("event", event))
        self._wait_turn()

    def run(self, work: Callable[[Emit], None]) -> None:
        try:
            self._wait_turn()
            work(self.emit)
        except Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - raised again in the listener's thread
            self.out.put(("raised", exc))
            return
        self.out.put(("done", None))

    def _wait_turn(self) -> None:
        self.turn.acquire()
        if self.stopped:
            raise Stopped
