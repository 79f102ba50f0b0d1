"""A checkpointed copy of the store file, for processes that only browse.

DuckDB lets a file be opened by one writing process or by any number of readers, not both. The writer keeps the
store; a snapshot is a copy that many app processes can open read-only at once. The copy is taken while this
process holds the store (so no other process can write meanwhile), right after CHECKPOINT has folded the
write-ahead log into the file, so the file alone is complete. It is written beside the target and renamed into
place: a process browsing an earlier snapshot keeps reading that one, and its next open finds the new one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb

from store.db import Database
from store.errors import StoreError
from store.export import quote, store_tables

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def is_duckdb_file(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(12)[8:12] == DUCKDB_MAGIC
    except OSError:
        return False


def table_counts(con) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {quote(t)}").fetchone()[0] for t in store_tables(con)}


def take_snapshot(db: Database, target: Path) -> dict[str, int]:
    """Copy the store to target (replaced atomically, left read-only); the rows per table, as checked in the copy."""
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with db.cursor() as cur:  # held until the copy is done: no other process can write the file meanwhile
            if db.read_only:
                if Path(db.path + ".wal").exists():
                    raise StoreError(
                        f"the store {db.path} is read-only and has a write-ahead log that only a writer can fold in",
                        fix="take the snapshot from a process that can write the store",
                    )
            else:
                cur.execute("CHECKPOINT")
            shutil.copyfile(db.path, partial)
            counts = table_counts(cur)
        copied = duckdb.connect(str(partial), read_only=True)
        try:
            if table_counts(copied) != counts:
                raise StoreError(f"the copy of {db.path} does not hold the same rows", fix="take the snapshot again")
        finally:
            copied.close()
        os.chmod(partial, 0o444)
        Path(f"{target}.wal").unlink(missing_ok=True)  # an earlier snapshot's log would be replayed into this one
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return counts
