"""Open the workbench: its settings and this process's handle on the store, for the screen layer.

Opening is two steps: the connection (store/db.py, opened lazily on first use) and, above it, the journal's
replay (store/journal.py): results kept in the journal while the store was busy, read-only or damaged are
written into it when the app or the CLI opens it (open_workbench), at every page of the app (replay_journal,
called by pages/views/common.py) and before every save (store/journal.py: save_or_keep).
"""

from __future__ import annotations

from pipeline.config import Settings, load_settings
from pipeline.errors import WorkbenchError
from pipeline.trace_export import export_traces
from pipeline.verification import registry as _verifier_registry  # noqa: F401 - settings check chains against it
from store import journal
from store.db import Database, get_database

__all__ = ["Database", "open_workbench", "replay_journal"]


def open_workbench(settings: Settings | None = None) -> tuple[Settings, Database]:
    """The settings (loaded when not given) and the store they name, with the journal replayed into it; the store
    is opened only when the journal holds entries, else lazily on first use. A store that cannot take them now
    (locked, damaged, newer) keeps them and says so at the command's or page's own first use. Traces are exported
    from here on when otlp_endpoint is set."""
    settings = settings or load_settings()
    if settings.otlp_endpoint:
        export_traces(settings.otlp_endpoint)
    db = get_database(settings)
    try:
        replay_journal(db)
    except WorkbenchError:
        pass
    return settings, db


def replay_journal(db: Database, lock_timeout_s: float | None = None) -> int:
    """Write what the journal keeps into the store (nothing is opened when it keeps nothing); the number written.
    A read-only store keeps the entries; other store errors are raised."""
    return journal.replay(db, lock_timeout_s)
