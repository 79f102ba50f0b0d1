"""What `collect` has received into a store, for the Settings & health page and `collect --drain`."""

from __future__ import annotations

from dataclasses import dataclass

from store.errors import StoreError
from store.traces import received_counts


@dataclass(frozen=True)
class TracesIn:
    spans: int
    traces: int
    ended: int  # traces whose root span has ended
    runs: int  # traces made into runs (verified, or kept without verdicts)

    @property
    def waiting(self) -> int:
        """Ended traces the online worker has not made into runs yet."""
        return max(0, self.ended - self.runs)

    def line(self) -> str:
        return (
            f"{self.spans:,} spans in {self.traces:,} traces received; {self.runs:,} made into runs, "
            f"{self.waiting:,} waiting for the online worker, {self.traces - self.ended:,} not ended yet."
        )


def traces_in(db) -> TracesIn | None:
    """The counts, or None when the store cannot be read now."""
    try:
        return TracesIn(**received_counts(db))
    except StoreError:
        return None
