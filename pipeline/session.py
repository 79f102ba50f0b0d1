"""Open the workbench: its settings and this process's handle on the store, for the screen layer."""

from __future__ import annotations

from pipeline.config import Settings, load_settings
from pipeline.trace_export import export_traces
from store.db import Database, get_database

__all__ = ["Database", "open_workbench"]


def open_workbench(settings: Settings | None = None) -> tuple[Settings, Database]:
    """The settings (loaded when not given) and the store they name; the store is opened lazily on first use.
    Traces are exported from here on when otlp_endpoint is set."""
    settings = settings or load_settings()
    if settings.otlp_endpoint:
        export_traces(settings.otlp_endpoint)
    return settings, get_database(settings)
