"""Open the workbench: its settings and this process's handle on the store, for the screen layer."""
from __future__ import annotations

from pipeline.config import Settings, load_settings
from store.db import Database, get_database

__all__ = ["Database", "open_workbench"]


def open_workbench(settings: Settings | None = None) -> tuple[Settings, Database]:
    """The settings (loaded when not given) and the store they name; the store is opened lazily on first use."""
    settings = settings or load_settings()
    return settings, get_database(settings)
