"""The local journal: a computed result that cannot be written to the store now is kept here and replayed.

Each entry is one JSON file, written atomically (a temporary file renamed into place) in a folder beside the
store (`<store>.journal/`) when that folder is writable, else in the user's state directory
(platformdirs). Replay writes an entry and records its id in `journal_entries` in one transaction, then
deletes the file; an id already recorded is skipped, so replaying twice, or from the app and the CLI at once
(DuckDB lets one process write at a time), stores every entry exactly once.

Replay is a step of this layer, above the connection (store/db.py opens and migrates, nothing more): the app
and the CLI replay when they open the store (pipeline/session.py: open_workbench, and every page of the app
through replay_journal), and every save replays what is pending before it writes (save_or_keep), so a result
kept while the store was busy is stored at the next chance, before anything newer.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import tempfile
import uuid
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import duckdb
import platformdirs

from store.atomic import write_atomically
from store.db import _store_error
from store.errors import ResultNotKept, StoreError, StoreReadOnly
from store.evals import insert_item, set_eval_status
from store.records import (
    AttemptRecord,
    CacheEntry,
    ClaimRecord,
    GradeRecord,
    LLMCallRecord,
    ReceivedSpan,
    RetrievalRecord,
    RunLog,
    RunRecord,
    SpanRecord,
)
from store.runs import insert_run
from store.traces import insert_received, insert_traced

APP_NAME = "rag-quality-workbench"


def _writable_dir(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
        return True
    except OSError:
        return False


def journal_dirs(store_path: str) -> list[Path]:
    """Where entries of this store may lie: beside the store first, then the user's state directory. Every save
    looks there (replay), so the answer is kept per store path, working directory and state directory settings
    (computing it took 0.13 ms, looking into the folders 0.01 ms)."""
    env = os.environ
    where = (os.getcwd(), env.get("WORKBENCH_STATE_DIR"), env.get("XDG_STATE_HOME"), env.get("HOME"))
    return list(_journal_dirs(str(store_path), *where))


@functools.lru_cache(maxsize=64)
def _journal_dirs(store_path: str, _cwd: str, state_dir: str | None, _xdg: str | None, _home: str | None):
    path = Path(store_path).resolve()
    key = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    state = Path(state_dir or platformdirs.user_state_dir(APP_NAME)) / "journal"
    return path.parent / f"{path.name}.journal", state / f"{path.stem}-{key}"


def _encode(value):
    if is_dataclass(value):
        return {f.name: _encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def _decode(value):
    if isinstance(value, dict):
        if set(value) == {"__datetime__"}:
            return datetime.fromisoformat(value["__datetime__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def decode_log(data: dict) -> RunLog:
    data = _decode(data)
    return RunLog(
        run=RunRecord(**data["run"]),
        grades=[GradeRecord(**r) for r in data["grades"]],
        retrievals=[RetrievalRecord(**r) for r in data["retrievals"]],
        attempts=[AttemptRecord(**r) for r in data["attempts"]],
        claims=[ClaimRecord(**r) for r in data["claims"]],
        calls=[LLMCallRecord(**r) for r in data["calls"]],
        cache_entries=[CacheEntry(**r) for r in data["cache_entries"]],
        spans=[SpanRecord(**r) for r in data["spans"]],
    )


def write_entry(store_path: str, kind: str, payload: dict) -> Path:
    """Keep one entry; the path it was written to. OSError when no journal folder is writable."""
    entry = {
        "id": uuid.uuid4().hex,
        "kind": kind,
        "created_at": datetime.now(timezone.utc).isoformat(),
        "store": str(Path(store_path).resolve()),
        "payload": _encode(payload),
    }
    last: OSError | None = None
    for folder in journal_dirs(store_path):
        if not _writable_dir(folder):
            last = last or _unwritable(folder)
            continue
        final = folder / f"{_sortable_stamp(entry['created_at'])}-{entry['id']}.json"
        try:
            return write_atomically(final, json.dumps(entry), durable=True, prefix=".entry-")
        except OSError as exc:  # a full disk: the part written goes, the next folder is tried
            last = exc
    raise last or OSError(f"no writable journal folder for {store_path}")


_written = itertools.count()


def _sortable_stamp(created_at: str) -> str:
    """The start of an entry's file name: replay takes entries in name order, which must be the order they were
    written. Seconds alone left two entries of one second in the order of their random ids (an evaluation's final
    status before its last item); the microseconds and a counter of this process's entries keep them in order."""
    return f"{datetime.fromisoformat(created_at).strftime('%Y-%m-%dT%H%M%S.%f')}-{next(_written):08d}"


def _unwritable(folder: Path) -> OSError:
    """Why folder cannot hold entries (the error of creating it or a file in it)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        return exc
    return OSError(f"{folder} is not writable")


def pending(store_path: str) -> list[Path]:
    """Entry files waiting to be replayed, oldest first."""
    found = []
    for folder in journal_dirs(store_path):
        if folder.is_dir():
            found += [p for p in folder.glob("*.json") if not p.name.startswith(".")]
    return sorted(found, key=lambda p: p.name)


def unreadable(store_path: str) -> list[Path]:
    """Entries replay could not read, set aside as *.bad (kept, never deleted), oldest first."""
    found = []
    for folder in journal_dirs(store_path):
        if folder.is_dir():
            found += list(folder.glob("*.bad"))
    return sorted(found, key=lambda p: p.name)


def _apply(cur, entry: dict) -> None:
    payload = entry["payload"]
    if entry["kind"] == "run":
        log, scores = decode_log(payload["log"]), [SimpleNamespace(**s) for s in _decode(payload.get("scores") or [])]
        if scores:
            insert_traced(cur, log, scores)
        else:
            insert_run(cur, log)
    elif entry["kind"] == "eval_item":
        payload = _decode(payload)
        log = decode_log(payload["log"]) if payload["log"] is not None else None
        insert_item(
            cur,
            payload["eval_run_id"],
            SimpleNamespace(**payload["item"]),
            payload["status"],
            log,
            [SimpleNamespace(**s) for s in payload["scores"]],
            payload["error"],
            payload["wall_ms"],
            payload["replace"],
        )
    elif entry["kind"] == "spans":
        payload = _decode(payload)
        insert_received(cur, [ReceivedSpan(**s) for s in payload["spans"]], payload["received_at"])
    elif entry["kind"] == "eval_status":
        payload = _decode(payload)
        set_eval_status(cur, payload["eval_run_id"], payload["status"], payload["add_wall_s"], payload["finished_at"])
    else:
        raise ValueError(f"unknown journal entry kind {entry['kind']!r}")


def replay(db, lock_timeout_s: float | None = None) -> int:
    """Write every pending entry into db's store, oldest first, each in its own transaction; the number written
    now (also added to db.replayed). Nothing is opened when no entry is pending. A read-only store leaves the
    entries waiting; any other store error (locked past lock_timeout_s, damaged, newer) is raised, the entries
    kept. An entry that cannot be read is left in place (renamed *.bad) so nothing is deleted unread."""
    written = 0
    for path in pending(db.path):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:  # another process (or thread) replayed it meanwhile
            continue
        except (OSError, ValueError):
            path.rename(path.with_suffix(".bad"))
            continue
        try:
            with db.transaction(lock_timeout_s) as cur:
                new = not cur.execute("SELECT 1 FROM journal_entries WHERE id = ?", [entry["id"]]).fetchall()
                if new:
                    _apply(cur, entry)
                    cur.execute(
                        "INSERT INTO journal_entries (id, kind, created_at) VALUES (?, ?, ?)",
                        [entry["id"], entry["kind"], datetime.fromisoformat(entry["created_at"])],
                    )
        except StoreReadOnly:  # kept until the store is writable again
            break
        except (KeyError, TypeError, ValueError):  # an entry this version cannot read: kept aside, not lost
            path.rename(path.with_suffix(".bad"))
            continue
        except duckdb.Error as exc:  # as when replay ran inside the store's open: a store error, the entry kept
            raise _store_error(db.path, exc) from None
        if new:
            written += 1
            db.replayed += 1
        path.unlink(missing_ok=True)
    return written


@dataclass(frozen=True)
class Kept:
    """Where the journal keeps a result the store could not take, and why the store could not: str() and
    os.fspath() give the entry's path."""

    path: Path
    because: StoreError

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)


def save_or_keep(db, kind: str, payload: dict, write, lock_timeout_s: float | None = None):
    """(write's result, None) when the store takes it now, else (None, Kept: the journal file that keeps it and
    the store's error).
    A store that is locked past lock_timeout_s, read-only, newer or damaged never loses the result; the
    store's error is raised only when no journal folder is writable either, as ResultNotKept (which says both
    why). What the journal already keeps is written first (replay), so entries reach the store in the order they
    were made."""
    try:
        replay(db, lock_timeout_s)
        return write(lock_timeout_s), None
    except StoreError as exc:
        try:
            return None, Kept(write_entry(db.path, kind, payload), exc)
        except OSError as journal_error:
            raise ResultNotKept(exc, journal_error, journal_dirs(db.path)) from None


def save_run(db, log: RunLog, lock_timeout_s: float | None = None, scores=()):
    """A question's run written now, or kept in the journal: (run id or None, Kept or None). `scores`: metric
    scores of a traced run, written with it (store/traces.insert_traced)."""

    def write(timeout):
        with db.transaction(timeout) as cur:
            return insert_traced(cur, log, scores) if scores else insert_run(cur, log)

    payload = {"log": log, "scores": list(scores)} if scores else {"log": log}
    return save_or_keep(db, "run", payload, write, lock_timeout_s)


def save_item(db, eval_run_id, item, status, log, scores, error, wall_ms, replace=True, lock_timeout_s=None):
    """An evaluation item written now, or kept in the journal: (run id or None, Kept or None)."""

    def write(timeout):
        with db.transaction(timeout) as cur:
            return insert_item(cur, eval_run_id, item, status, log, scores, error, wall_ms, replace)

    payload = {
        "eval_run_id": eval_run_id,
        "item": {"id": item.id, "question": item.question, "reference": item.reference, "tags": item.tags},
        "status": status,
        "log": log,
        "scores": scores,
        "error": error,
        "wall_ms": wall_ms,
        "replace": replace,
    }
    return save_or_keep(db, "eval_item", payload, write, lock_timeout_s)


def save_received(db, spans: list[ReceivedSpan], received_at: datetime, lock_timeout_s: float | None = None):
    """Spans received over OpenTelemetry written now, or kept in the journal: (None, journal file or None)."""

    def write(timeout):
        try:
            with db.transaction(timeout) as cur:
                insert_received(cur, spans, received_at, all_new=True)  # the common case, at half the cost
        except duckdb.ConstraintException:  # a span already stored (a batch sent again): rolled back, written again
            with db.transaction(timeout) as cur:
                insert_received(cur, spans, received_at)

    return save_or_keep(db, "spans", {"spans": spans, "received_at": received_at}, write, lock_timeout_s)


def save_eval_status(db, eval_run_id: int, status: str, add_wall_s: float, lock_timeout_s: float | None = None):
    """An evaluation's final status written now, or kept in the journal after its items: (None, Kept or None)."""
    finished_at = datetime.now(timezone.utc)

    def write(timeout):
        with db.transaction(timeout) as cur:
            set_eval_status(cur, eval_run_id, status, add_wall_s, finished_at)

    payload = {"eval_run_id": eval_run_id, "status": status, "add_wall_s": add_wall_s, "finished_at": finished_at}
    return save_or_keep(db, "eval_status", payload, write, lock_timeout_s)
