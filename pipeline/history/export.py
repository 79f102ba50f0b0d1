"""The store for a team: every table exported as Parquet for a warehouse, and read-only copies to browse.

A Parquet export folder also holds browse.duckdb (views over its files) and a checkpointed snapshot is a copy of
the store file: the app, pointed at either with WORKBENCH_DB, browses it read-only while one writer keeps the
store (DuckDB lets a file be opened by one writing process or by readers, not both)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError
from store.db import Database
from store.export import BROWSE, MANIFEST, TableExport, export_store
from store.snapshot import is_duckdb_file, take_snapshot

__all__ = ["BROWSE", "MANIFEST", "ParquetExport", "Snapshot", "TableExport", "export_parquet", "snapshot"]


@dataclass(frozen=True)
class ParquetExport:
    folder: Path
    tables: list[TableExport]
    seconds: float
    bytes: int

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


@dataclass(frozen=True)
class Snapshot:
    path: Path
    rows: dict[str, int]  # per table, counted in the copy
    replaced: bool  # an earlier snapshot was at path
    seconds: float
    bytes: int


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _empty_folder(folder: Path) -> bool:
    """Make sure folder exists and is empty; True when it was created here."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is a file, not a folder", fix="give a new or empty folder to export into")
    if folder.is_dir():
        if any(folder.iterdir()):
            raise InputError(
                f"{folder} is not empty; nothing was written",
                fix="export into a new or empty folder, e.g. one per day: exports/$(date +%F)",
            )
        return False
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise InputError(f"cannot create {folder} ({exc.strerror})", fix="export somewhere you can write") from None
    return True


def export_parquet(db: Database, folder: str | Path) -> ParquetExport:
    """Every table of the store under folder as Parquet, partitioned by day; a failed export leaves nothing."""
    folder = Path(folder)
    created = _empty_folder(folder)
    started = time.perf_counter()
    try:
        tables = export_store(db, folder)
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            for entry in folder.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        raise
    return ParquetExport(folder, tables, time.perf_counter() - started, folder_size(folder))


def snapshot(db: Database, path: str | Path) -> Snapshot:
    """A checkpointed, read-only copy of the store at path; an earlier snapshot there is replaced."""
    target = Path(path)
    if db.path == ":memory:":
        raise InputError("the store is in memory; there is no file to snapshot", fix="set WORKBENCH_DB to a file")
    if target.is_dir():
        raise InputError(f"{target} is a folder", fix="give the snapshot a file name, e.g. snapshots/workbench.duckdb")
    if not target.parent.is_dir():
        raise InputError(f"the folder of {target} does not exist", fix="create it, or snapshot somewhere else")
    if target.exists() and target.resolve() == Path(db.path).resolve():
        raise InputError(f"{target} is the store itself", fix="give the snapshot another file name")
    replaced = target.exists()
    if replaced and not (is_duckdb_file(target) and target.stat().st_mode & 0o222 == 0):
        raise InputError(
            f"{target} exists and is not an earlier snapshot (a read-only DuckDB file); nothing was written",
            fix="give a new file name: a snapshot replaces only an earlier snapshot",
        )
    started = time.perf_counter()
    rows = take_snapshot(db, target)
    return Snapshot(target, rows, replaced, time.perf_counter() - started, target.stat().st_size)
