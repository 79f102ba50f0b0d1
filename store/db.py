"""A process-wide DuckDB handle that holds the file only briefly.

DuckDB lets one process at a time open a file for writing. The app and a CLI batch share one file,
so a connection is opened on first use, shared by this process's threads (each through its own
cursor) and closed once nobody has used it for `idle_release_s`, or at once when another process waits for the
file (it looks every WAITER_POLL_S while idle). Opening retries while another process holds the lock, then fails
with a message that says what to do.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path

import duckdb

from store import key_index
from store.errors import (
    StoreCorrupt,
    StoreError,
    StoreForeign,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreTooNew,
    StoreUnavailable,
)
from store.key_index import StoreIndexes
from store.migrations import migrate, unknown_migrations

LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "lock on file")
CORRUPT_MARKERS = (
    "not a valid DuckDB database file",
    "Corrupt database file",
    "checksum",
    "database file is",
    "Could not read enough bytes",  # a file cut short
)
# A read that may be skipped (a response-cache lookup) waits this long for the store, then is a miss; after
# one found it locked, such reads are skipped for OPTIONAL_READ_BACKOFF_S (store/db.py: Database.optional_cursor).
OPTIONAL_READ_WAIT_S = 0.2
OPTIONAL_READ_BACKOFF_S = 1.0
WAITER_POLL_S = 0.1  # while idle and open, how often the handle looks for another process waiting for the file
# a write that found no room on the disk (DuckDB raises it as an IOException, or a TransactionException when the
# commit's write-ahead log cannot be written): the store's earlier contents are intact
FULL_MARKERS = ("No space left on device", "Disk quota exceeded")
REQUIRED_TABLES = ("runs", "claims", "attempts", "retrievals", "chunks", "documents", "schema_migrations")


def _is_lock_error(exc: Exception) -> bool:
    return any(marker in str(exc) for marker in LOCK_MARKERS)


def _fault(path: str, exc: Exception, read_only_reason: str | None = None) -> StoreError | None:
    """The store error a duckdb error means, or None when it is a bug (bad SQL) that must raise as is."""
    text = str(exc)
    if any(marker in text for marker in FULL_MARKERS):
        return StoreFull(path, text.splitlines()[0][:300])
    if any(marker in text for marker in CORRUPT_MARKERS) or isinstance(exc, duckdb.InternalException):
        return StoreCorrupt(path, text.splitlines()[0][:300])
    if isinstance(exc, duckdb.InvalidInputException) and "read-only mode" in text:  # a write on a read-only open
        return StoreReadOnly(path, read_only_reason or "it was opened read-only")
    if isinstance(exc, duckdb.IOException):
        if "read-only" in text or "Permission denied" in text or "Read-only" in text:
            return StoreReadOnly(path, text.splitlines()[0][:300])
        return StoreUnavailable(path, text.splitlines()[0][:300])
    return None


def _store_error(path: str, exc: Exception) -> StoreError:
    return _fault(path, exc) or StoreUnavailable(path, str(exc).splitlines()[0][:300])


def _read_only_reason(path: Path) -> str | None:
    """Why the store must be opened read-only (the file or its folder cannot be written), else None."""
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    if path.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        return "its folder is not writable"
    return None


def refuse_foreign(con, path: str) -> None:
    """A file that holds tables but no schema_migrations is something else's database: StoreForeign, before
    anything is written into it (an empty file is a new store)."""
    tables = sorted(r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall())
    if tables and "schema_migrations" not in tables:
        raise StoreForeign(path, tables)


def _check_schema(con, path: str) -> None:
    """A store opened read-only is not migrated; it must still be one this version can read."""
    try:
        refuse_foreign(con, path)
        unknown = unknown_migrations(applied_names(con))
    except duckdb.Error as exc:
        raise _store_error(path, exc) from None
    if unknown:
        raise StoreTooNew(path, unknown)
    check_tables(con, path)


def applied_names(con) -> list[str]:
    return [row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()]


def check_tables(con, path: str) -> None:
    """A file that opens but lacks the workbench's tables (damaged, or not a workbench store)."""
    present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    missing = [t for t in REQUIRED_TABLES if t not in present]
    if missing:
        raise StoreCorrupt(path, f"its tables {', '.join(missing)} are missing")


class WaitQueue:
    """Fairness between processes that share the store file. DuckDB's lock is taken by whoever tries at the right
    moment, so a process that uses the store again and again would starve one that polls for it. A process that
    found the file locked leaves a marker (`<store>.waiting/<pid>`) until it gets in; a process about to open the
    file while another's marker is there steps back briefly (at most MAX_YIELD_S) so the waiter gets in first."""

    MAX_YIELD_S = 1.0
    STALE_S = 30.0

    def __init__(self, path: str):
        self.folder = None if path == ":memory:" else Path(f"{path}.waiting")
        self.marker: Path | None = None

    def others_waiting(self) -> bool:
        if self.folder is None or not self.folder.is_dir():
            return False
        now = time.time()
        try:
            for entry in os.scandir(self.folder):
                if entry.name != str(os.getpid()) and now - entry.stat().st_mtime < self.STALE_S:
                    return True
        except OSError:
            return False
        return False

    def yield_to_waiters(self, deadline: float) -> None:
        until = min(deadline, time.monotonic() + self.MAX_YIELD_S)
        while self.others_waiting() and time.monotonic() < until:
            time.sleep(0.02)

    def join(self) -> None:
        if self.marker is not None or self.folder is None:
            return
        try:
            self.folder.mkdir(exist_ok=True)
            self.marker = self.folder / str(os.getpid())
            self.marker.touch()
        except OSError:  # a read-only folder: no fairness, still correct
            self.marker = None

    def leave(self) -> None:
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
            self.marker = None


class Database:
    def __init__(self, path: str, lock_timeout_s: float = 15.0, idle_release_s: float = 0.5, read_only: bool = False):
        """read_only: open the store read-only whatever its permissions (several processes can then browse a
        snapshot or export at once; a process running as root would otherwise open a 0444 file read-write)."""
        self.path = str(path)
        self.forced_read_only = read_only
        self.lock_timeout_s = lock_timeout_s
        self.idle_release_s = idle_release_s
        self._guard = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._timer: threading.Timer | None = None
        self._last_used = 0.0
        self._write_lock = threading.Lock()
        self._migrated = False
        self._queue = WaitQueue(self.path)
        self._skip_optional_until = 0.0  # optional reads are skipped until then (one found the store locked)
        self.read_only_reason: str | None = None
        self.lock_wait_s = 0.0  # time spent waiting for another process's lock, in total
        self.replayed = 0  # journal entries this process wrote into the store (counted by store.journal.replay)
        self.indexes = StoreIndexes()  # which call texts and cache entries the store holds (store/key_index.py)
        _every_database.add(self)

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file, so a copy of the file alone is complete."""
        with self._guard:
            if self._con is not None and not self.read_only:
                try:
                    self._con.execute("CHECKPOINT")
                except duckdb.Error as exc:  # a full disk: the write-ahead log keeps what the file cannot take yet
                    raise _fault(self.path, exc, self.read_only_reason) or _store_error(self.path, exc) from None

    def _open(self, lock_timeout_s: float | None = None, fair: bool = True) -> duckdb.DuckDBPyConnection:
        """fair=False: an optional read neither steps back for other processes' waiting markers nor leaves one
        (it gives up after a short wait; a marker would make the holder let go for nothing)."""
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(self.path, f"its folder cannot be created ({exc.strerror})") from None
            self.read_only_reason = (
                "it was opened read-only (store_read_only, WORKBENCH_STORE_READ_ONLY)"
                if self.forced_read_only
                else _read_only_reason(Path(self.path))
            )
        timeout = self.lock_timeout_s if lock_timeout_s is None else lock_timeout_s
        deadline = time.monotonic() + timeout
        delay = 0.02
        waited_from = time.monotonic()
        queue = self._queue
        try:
            if fair:
                queue.yield_to_waiters(deadline)
            while True:
                try:
                    con = duckdb.connect(self.path, read_only=self.read_only)
                    break
                except duckdb.Error as exc:
                    if not _is_lock_error(exc):
                        raise _store_error(self.path, exc) from None
                    if time.monotonic() >= deadline:
                        self.lock_wait_s += time.monotonic() - waited_from
                        raise StoreLocked(self.path, timeout) from None
                    if fair:
                        queue.join()
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
        finally:
            queue.leave()
        self.lock_wait_s += time.monotonic() - waited_from
        for index in self.indexes.each():  # another process may have added rows
            index.mark_stale()
        try:
            if self.read_only:
                _check_schema(con, self.path)
            else:
                if not self._migrated:
                    refuse_foreign(con, self.path)
                    migrate(con)
                    check_tables(con, self.path)
                    self._migrated = True
        except StoreError:
            con.close()
            raise
        except duckdb.Error as exc:
            con.close()
            raise _store_error(self.path, exc) from None
        return con

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    @contextmanager
    def cursor(self, lock_timeout_s: float | None = None):
        with self._guard:
            if self._con is None:
                self._con = self._open(lock_timeout_s)
            self._users += 1
            cur = self._con.cursor()
        with self._using(cur):
            yield cur

    @contextmanager
    def optional_cursor(self, wait_s: float = OPTIONAL_READ_WAIT_S):
        """A cursor for a read the caller can do without (a response-cache lookup): it waits at most wait_s, for
        this process's other users of the handle as for another process's lock, and raises StoreLocked after
        that. For OPTIONAL_READ_BACKOFF_S after one such read found the store locked, the next raise at once, so
        a run whose reads all miss loses wait_s once, not once per read."""
        if time.monotonic() < self._skip_optional_until:
            raise StoreLocked(self.path, 0)
        if not self._guard.acquire(timeout=wait_s):  # another thread is opening (waiting for the lock) or closing
            raise StoreLocked(self.path, wait_s)
        try:
            if self._con is None:
                try:
                    self._con = self._open(wait_s, fair=False)
                except StoreLocked:
                    self._skip_optional_until = time.monotonic() + OPTIONAL_READ_BACKOFF_S
                    raise
            self._users += 1
            cur = self._con.cursor()
        finally:
            self._guard.release()
        with self._using(cur):
            yield cur

    @contextmanager
    def _using(self, cur):
        try:
            yield cur
        except duckdb.Error as exc:
            error = _fault(self.path, exc, self.read_only_reason)
            if error is None:
                raise
            raise error from None
        finally:
            cur.close()
            with self._guard:
                self._users -= 1
                self._last_used = time.monotonic()
                if self._users == 0:
                    if self._queue.others_waiting():  # another process waits for the file: let go now
                        self._close_now()
                    else:
                        self._schedule_release()

    @contextmanager
    def transaction(self, lock_timeout_s: float | None = None):
        """One write transaction at a time in this process: DuckDB would otherwise abort one of two
        concurrent transactions that insert the same key (two items caching the same LLM reply).
        A read-only store raises StoreReadOnly before anything is begun."""
        with self._write_lock, self.cursor(lock_timeout_s) as cur:
            if self.read_only:
                raise StoreReadOnly(self.path, self.read_only_reason)
            active = key_index.ACTIVE.set(self.indexes)
            try:
                cur.begin()
                try:
                    yield cur
                except BaseException:
                    cur.rollback()
                    raise
                cur.commit()
                for index in self.indexes.each():
                    index.commit()
            finally:
                for index in self.indexes.each():
                    index.rollback()  # what a failed transaction staged (nothing after a commit)
                key_index.ACTIVE.reset(active)

    def _schedule_release(self, delay: float | None = None) -> None:
        """Close after idle_release_s without use, or sooner once another process waits: one timer at a time,
        waking every WAITER_POLL_S at most to look for waiters, re-armed while in use."""
        if self.idle_release_s <= 0:
            self._release()
        elif self._timer is None:
            wait = min(WAITER_POLL_S, self.idle_release_s if delay is None else delay)
            self._timer = threading.Timer(wait, self._release)
            self._timer.daemon = True
            self._timer.start()

    def _release(self) -> None:
        with self._guard:
            self._timer = None
            if self._con is None or self._users:
                return
            idle = time.monotonic() - self._last_used
            if self.idle_release_s <= 0 or idle >= self.idle_release_s or self._queue.others_waiting():
                self._con.close()
                self._con = None
            else:
                self._schedule_release(self.idle_release_s - idle)

    def _close_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._con is not None:
            self._con.close()
            self._con = None

    def close(self) -> None:
        with self._guard:
            self._close_now()


def fetch_dicts(cur, sql: str, params: list) -> list[dict]:
    """The rows of a query as dicts keyed by column name."""
    rel = cur.execute(sql, params)
    names = [d[0] for d in rel.description]
    return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]


def insert_rows(cur, table: str, columns: list[str], rows: list[list], verb: str = "INSERT") -> None:
    """Many rows in one statement (DuckDB's executemany prepares once but still runs row by row), passed as
    one list per column: binding a few lists is 2-3x faster than one parameter per value. A column holding the
    same value in every row (a run's id, the model) is bound once as a scalar: each unnested list costs about
    as much again (an 18-column insert of 15 rows took 0.84 ms unnested, 0.57 ms with 15 constant columns)."""
    if not rows:
        return
    selected, params = [], []
    for n, column in enumerate(zip(*rows, strict=True)):
        constant = n > 0 and _all_equal(column)  # the first column is unnested: it gives the row count
        params.append(column[0] if constant else list(column))
        selected.append(f"${n + 1}" if constant else f"unnest(${n + 1})")
    cur.execute(f"{verb} INTO {table} ({', '.join(columns)}) SELECT {', '.join(selected)}", params)


def _all_equal(values: tuple) -> bool:
    first = values[0]
    kind = type(first)  # as before, values of other types stay a list (1 == 1.0 == True in Python)
    return all(type(v) is kind and v == first for v in values[1:])


_databases: dict[str, Database] = {}
_registry_guard = threading.Lock()
_every_database: weakref.WeakSet[Database] = weakref.WeakSet()  # registered or not: each is closed at exit
EXIT_CLOSE_WAIT_S = 5.0


def get_database(settings) -> Database:
    """The one Database of this process for the settings' store path."""
    with _registry_guard:
        db = _databases.get(settings.store_path)
        if db is None:
            db = Database(
                settings.store_path,
                settings.store_lock_timeout_s,
                settings.store_idle_release_s,
                read_only=settings.store_read_only,
            )
            _databases[settings.store_path] = db
        return db


def close_all() -> None:
    with _registry_guard:
        for db in _databases.values():
            db.close()
        _databases.clear()


@atexit.register
def _close_at_exit() -> None:
    """Close every connection before the interpreter finalizes. The idle release runs in a daemon timer thread;
    one still inside DuckDB's close (a checkpoint of the write-ahead log) when finalization starts is ended by
    Python with pthread_exit, whose unwinding through DuckDB's C++ frames aborts the process ("terminate called
    after throwing an instance of '' / FATAL: exception not rethrown", exit code 134) after the command had
    finished. atexit runs after the non-daemon threads are joined and before finalization: closing here, under
    each handle's guard, waits for a close in flight and leaves the timers nothing to do."""
    for db in list(_every_database):
        if db._guard.acquire(timeout=EXIT_CLOSE_WAIT_S):  # a daemon thread may hold it, waiting for the lock
            try:
                db._close_now()
            finally:
                db._guard.release()
