"""A process-wide DuckDB handle that holds the file only briefly.

DuckDB lets one process at a time open a file for writing. The app and a CLI batch share one file,
so a connection is opened on first use, shared by this process's threads (each through its own
cursor) and closed once nobody has used it for `idle_release_s`. Opening retries while another
process holds the lock, then fails with a message that says what to do.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb

from store.errors import StoreLocked, StoreUnavailable
from store.migrations import migrate

LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "lock on file")


def _is_lock_error(exc: Exception) -> bool:
    return any(marker in str(exc) for marker in LOCK_MARKERS)


class Database:
    def __init__(self, path: str, lock_timeout_s: float = 15.0, idle_release_s: float = 0.5):
        self.path = str(path)
        self.lock_timeout_s = lock_timeout_s
        self.idle_release_s = idle_release_s
        self._guard = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._timer: threading.Timer | None = None
        self._last_used = 0.0
        self._write_lock = threading.Lock()
        self._migrated = False

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                con = duckdb.connect(self.path)
                break
            except duckdb.Error as exc:
                if not _is_lock_error(exc):
                    raise StoreUnavailable(self.path, str(exc)) from None
                if time.monotonic() >= deadline:
                    raise StoreLocked(self.path, self.lock_timeout_s) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        if not self._migrated:
            migrate(con)
            self._migrated = True
        return con

    @contextmanager
    def cursor(self):
        with self._guard:
            if self._con is None:
                self._con = self._open()
            self._users += 1
            cur = self._con.cursor()
        try:
            yield cur
        finally:
            cur.close()
            with self._guard:
                self._users -= 1
                self._last_used = time.monotonic()
                if self._users == 0:
                    self._schedule_release()

    @contextmanager
    def transaction(self):
        """One write transaction at a time in this process: DuckDB would otherwise abort one of two
        concurrent transactions that insert the same key (two items caching the same LLM reply)."""
        with self._write_lock, self.cursor() as cur:
            cur.begin()
            try:
                yield cur
            except BaseException:
                cur.rollback()
                raise
            cur.commit()

    def _schedule_release(self, delay: float | None = None) -> None:
        """Close after idle_release_s without use; one timer at a time, re-armed while in use."""
        if self.idle_release_s <= 0:
            self._release()
        elif self._timer is None:
            self._timer = threading.Timer(self.idle_release_s if delay is None else delay, self._release)
            self._timer.daemon = True
            self._timer.start()

    def _release(self) -> None:
        with self._guard:
            self._timer = None
            if self._con is None or self._users:
                return
            idle = time.monotonic() - self._last_used
            if self.idle_release_s <= 0 or idle >= self.idle_release_s:
                self._con.close()
                self._con = None
            else:
                self._schedule_release(self.idle_release_s - idle)

    def close(self) -> None:
        with self._guard:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._con is not None:
                self._con.close()
                self._con = None


def fetch_dicts(cur, sql: str, params: list) -> list[dict]:
    """The rows of a query as dicts keyed by column name."""
    rel = cur.execute(sql, params)
    names = [d[0] for d in rel.description]
    return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]


def insert_rows(cur, table: str, columns: list[str], rows: list[list], verb: str = "INSERT") -> None:
    """Many rows in one statement (DuckDB's executemany prepares once but still runs row by row)."""
    if not rows:
        return
    one = "(" + ", ".join("?" * len(columns)) + ")"
    cur.execute(
        f"{verb} INTO {table} ({', '.join(columns)}) VALUES " + ", ".join([one] * len(rows)),
        [value for row in rows for value in row],
    )


_databases: dict[str, Database] = {}
_registry_guard = threading.Lock()


def get_database(settings) -> Database:
    """The one Database of this process for the settings' store path."""
    with _registry_guard:
        db = _databases.get(settings.store_path)
        if db is None:
            db = Database(settings.store_path, settings.store_lock_timeout_s, settings.store_idle_release_s)
            _databases[settings.store_path] = db
        return db


def close_all() -> None:
    with _registry_guard:
        for db in _databases.values():
            db.close()
        _databases.clear()
