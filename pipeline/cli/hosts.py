"""`doctor`'s table of Ollama hosts: reachable or not (why), models not used there, load, latency, backoff."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from pipeline.models.hosts import HostStatus


def print_hosts(out: Console, statuses: list[HostStatus]) -> None:
    rows = [s.row() for s in statuses]
    table = Table(*rows[0], title="Ollama hosts (in flight and latency: this command's own requests)")
    for row in rows:
        # Text, not markup: an error message or a host name may hold [brackets]
        table.add_row(*(Text("" if value is None else str(value)) for value in row.values()))
    out.print(table)
