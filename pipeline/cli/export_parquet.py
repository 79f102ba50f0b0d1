"""`export-parquet`: every table of the store as Parquet, partitioned by day."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.text import plural


def register(sub) -> None:
    parquet = sub.add_parser(
        "export-parquet", help="write every table of the store as Parquet, partitioned by day, into a new folder"
    )
    parquet.add_argument("folder", help="a new or empty folder; it also gets export.json and browse.duckdb")
    parquet.set_defaults(handler=cmd_export_parquet)


def cmd_export_parquet(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.history.export import BROWSE, export_parquet

    result = export_parquet(db, args.folder)
    table = Table("table", "rows", "partitioned by", "files", title=f"Parquet export of {settings.store_path}")
    for t in result.tables:
        files = plural(t.days, "day") if t.partitioned else "1 file"
        table.add_row(Text(t.table), f"{t.rows:,}", partitioning(t), files)
    out.print(table)
    out.print(
        Text(
            f"wrote {len(result.tables)} tables, {result.rows:,} rows, {result.bytes / 1e6:,.1f} MB to {result.folder} "
            f"in {result.seconds:.1f} s (one consistent state of the store)"
        )
    )
    out.print(Text(f"browse it read-only: WORKBENCH_DB={result.folder / BROWSE} (views over the Parquet files)"))
    return 0


def partitioning(t) -> str:
    if t.partitioned:
        return f"day of {t.day_of}"
    return "unpartitioned (no rows)" if t.day_of else "unpartitioned (no timestamp column)"
