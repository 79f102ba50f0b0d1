"""Grouped ingest: the spans of concurrent requests are written in one store transaction (a group commit).

Each request waits in a queue. One request at a time leads: it takes every request gathered so far, saves their
spans together (store/journal.save_received: in the store, or in the journal while the store is busy), marks
each of them done and hands the lead to a request still waiting. A request is answered only once its own spans
are kept, and a store transaction, whose fixed cost (the commit, the key index) outweighs a few more rows,
carries as many requests as arrived while the previous one was written. Threads, not one event loop, share the
queue, so it holds for any server (and for two test clients of one app)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from time import monotonic, sleep

from store.journal import save_received
from store.records import ReceivedSpan

MAX_GROUP_SPANS = 50_000  # spans written in one transaction at most; the rest wait for the next
GATHER_S = 0.002  # how long a write waits for as many requests as the last one held (clients answered by it
# send their next request at once: waiting a moment for them makes one transaction of several)


@dataclass
class _Waiting:
    spans: list[ReceivedSpan]
    done: bool = False
    error: BaseException | None = None


@dataclass
class GroupWriter:
    db: object
    lock_timeout_s: float
    queue: list[_Waiting] = field(default_factory=list)
    writing: bool = False
    groups: int = 0  # transactions written (GET / shows them: requests per transaction = requests / groups)
    requests: int = 0
    last_group: int = 0  # requests in the last transaction
    turn: threading.Condition = field(default_factory=threading.Condition)

    def save(self, spans: list[ReceivedSpan]) -> None:
        """Return once these spans are kept (store or journal); raise what kept them from being kept
        (ResultNotKept, a store fault). Blocking: call it from a worker thread."""
        mine = _Waiting(spans)
        with self.turn:
            self.queue.append(mine)
            while self.writing and not mine.done:
                self.turn.wait()
            leading = not mine.done
            self.writing = self.writing or leading  # a leading request leads until its own spans are written
        if leading:
            try:
                while not mine.done:
                    self._write(self._group())
            finally:
                with self.turn:
                    self.writing = False
                    self.turn.notify_all()
        if mine.error is not None:
            raise mine.error

    def _group(self) -> list[_Waiting]:
        deadline = monotonic() + GATHER_S
        while len(self.queue) < self.last_group and monotonic() < deadline:
            sleep(GATHER_S / 8)
        with self.turn:
            group, size = [], 0
            while self.queue and (not group or size + len(self.queue[0].spans) <= MAX_GROUP_SPANS):
                group.append(self.queue.pop(0))
                size += len(group[-1].spans)
            return group

    def _write(self, group: list[_Waiting]) -> None:
        try:
            save_received(self.db, [s for w in group for s in w.spans], datetime.now(timezone.utc), self.lock_timeout_s)
            error = None
        except Exception as exc:  # noqa: BLE001 - each request of the group is answered with it
            error = exc
        with self.turn:
            for waiting in group:
                waiting.done, waiting.error = True, error
            if error is None:
                self.groups, self.requests, self.last_group = self.groups + 1, self.requests + len(group), len(group)
            self.turn.notify_all()
