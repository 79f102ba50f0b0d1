"""Every table of the store written as Parquet (hive-partitioned by day), and a DuckDB file that browses it.

The tables come from DuckDB's catalog, so a table a later migration adds is exported too. All tables are
copied in one transaction, so the export is one consistent state of the store. A table is partitioned by
the day of its natural timestamp (`DIR/<table>/day=YYYY-MM-DD/data_0.parquet`); a table without a NOT NULL
timestamp (claims, retrievals: rows that belong to a run) is written as one file, `DIR/<table>/data_0.parquet`,
as is an empty table (a file without rows that still carries the columns and their types).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from store.db import Database
from store.errors import StoreError

PARTITION = "day"
MANIFEST = "export.json"
BROWSE = "browse.duckdb"
TIMESTAMP_TYPES = ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "DATE")


@dataclass(frozen=True)
class TableExport:
    table: str
    rows: int
    day_of: str | None  # the table's natural timestamp, whose day partitions it; None: it has none
    days: int  # partitions written; 0: one unpartitioned file (no timestamp, or no rows)

    @property
    def partitioned(self) -> bool:
        return self.days > 0


def store_tables(cur) -> list[str]:
    return [
        row[0]
        for row in cur.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal AND NOT temporary ORDER BY table_name"
        ).fetchall()
    ]


def day_column(cur, table: str) -> str | None:
    """The table's natural timestamp: `started_at` (when the run or call happened), else the NOT NULL timestamp
    that defaults to the time the row was written (created_at, rated_at, ...), else any NOT NULL timestamp."""
    columns = cur.execute(
        "SELECT column_name, coalesce(column_default, '') FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main' AND table_name = ? "
        "AND NOT is_nullable AND data_type IN (SELECT unnest(?)) ORDER BY column_index",
        [table, list(TIMESTAMP_TYPES)],
    ).fetchall()
    names = [name for name, _ in columns]
    if "started_at" in names:
        return "started_at"
    written = [name for name, default in columns if "current_timestamp" in default.lower()]
    return (written or names or [None])[0]


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _copy(cur, query: str, target: Path, partitioned: bool) -> int:
    options = "FORMAT parquet, COMPRESSION zstd" + (f", PARTITION_BY ({PARTITION})" if partitioned else "")
    return cur.execute(f"COPY ({query}) TO {literal(str(target))} ({options})").fetchone()[0]


def export_table(cur, table: str, folder: Path) -> TableExport:
    target = folder / table
    target.mkdir()
    column = day_column(cur, table)
    if column is not None:
        query = f"SELECT *, CAST({quote(column)} AS DATE) AS {PARTITION} FROM {quote(table)}"
        rows = _copy(cur, query, target, partitioned=True)
        if rows:
            return TableExport(table, rows, column, sum(1 for _ in target.iterdir()))
    rows = _copy(cur, f"SELECT * FROM {quote(table)}", target / "data_0.parquet", partitioned=False)
    return TableExport(table, rows, column, 0)


def _export_or_say_why(cur, table: str, folder: Path) -> TableExport:
    try:
        return export_table(cur, table, folder)
    except (duckdb.Error, OSError) as exc:
        raise StoreError(
            f"the Parquet export stopped at table {table}: {str(exc).splitlines()[0][:300]}",
            fix=f"check the free space and permissions of {folder}, then export again",
        ) from None


def export_store(db: Database, folder: Path) -> list[TableExport]:
    """Write every table under folder (which must exist and be empty), then export.json and browse.duckdb."""
    with db.cursor() as cur:
        cur.begin()  # one snapshot: rows committed by others while this runs are in none of the tables
        try:
            exports = [_export_or_say_why(cur, table, folder) for table in store_tables(cur)]
        finally:
            cur.rollback()  # nothing was written to the store
    manifest = {
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "store": str(Path(db.path).resolve()),
        "layout": f"<table>/{PARTITION}=YYYY-MM-DD/data_0.parquet when partitioned, else <table>/data_0.parquet",
        "tables": [{**asdict(e), "partitioned": e.partitioned} for e in exports],
    }
    build_browse_db(folder, exports)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return exports


def parquet_source(folder: Path, export: TableExport) -> str:
    """The read_parquet call that reads one exported table back with the store's columns, in order."""
    files = folder.resolve() / export.table
    if not export.partitioned:
        return f"read_parquet({literal(str(files / 'data_0.parquet'))})"
    pattern = files / f"{PARTITION}=*" / "*.parquet"
    return f"read_parquet({literal(str(pattern))}, hive_partitioning = true)"


def browse_query(folder: Path, export: TableExport) -> str:
    exclude = f" EXCLUDE ({PARTITION})" if export.partitioned else ""
    return f"SELECT *{exclude} FROM {parquet_source(folder, export)}"


def build_browse_db(folder: Path, exports: list[TableExport]) -> Path:
    """DIR/browse.duckdb: a view per table over its Parquet files (by absolute path), and schema_migrations as a
    table, so the app opens it like a store. The file is made read-only: a user other than root then opens it
    read-only, and many processes can browse it at once."""
    path = folder / BROWSE
    con = duckdb.connect(str(path))
    try:
        for export in exports:
            kind = "TABLE" if export.table == "schema_migrations" else "VIEW"
            con.execute(f"CREATE {kind} {quote(export.table)} AS {browse_query(folder, export)}")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.chmod(path, 0o444)
    return path
