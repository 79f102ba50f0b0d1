"""The store's schema as one page: `python -m store.schema_snapshot` migrates an empty store (in a temporary
folder) and writes the DDL of every table, view, sequence and index, with a diagram of how the tables refer to
each other, to docs/reference/schema.md. tests/test_schema_snapshot.py fails when the page is out of date.

The output depends only on the migrations (and on how this DuckDB version prints DDL): no ids, timestamps or
paths. DuckDB declares no foreign keys here, so which column refers to which table is kept in REFERENCES below,
next to the columns that look like references and are not (NOT_REFERENCES); a new `*_id` column must be named
in one of them, or the test fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import duckdb

from store.migrations import MIGRATIONS, migrate

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "reference" / "schema.md"
COMMAND = "python -m store.schema_snapshot"

# column -> the "table.column" (or several) it refers to, in every table with that column (a table's own key
# column is no reference to itself)
REFERENCES: dict[str, str | tuple[str, ...]] = {
    "run_id": "runs.id",
    "eval_run_id": "eval_runs.id",
    "baseline_run_id": "eval_runs.id",
    "document_id": ("documents.id", "retired_documents.id"),  # the latter once the document was deleted or replaced
    "chunk_id": "chunks.id",
    "evidence_chunk_id": "chunks.id",
    "detector_run_id": "detector_runs.id",
    "prompt_text_id": "llm_texts.id",
    "completion_text_id": "llm_texts.id",
    "prompt_text_hash": "llm_texts.hash",
    "completion_text_hash": "llm_texts.hash",
    "correction_ids": "corrections.id",
    "correction_version": "correction_sets.version",
    "span_id": "spans.span_id",
    "parent_id": "spans.span_id",
    "trace_id": "received_spans.trace_id",
    "job_id": "synth_jobs.id",
    "sweep_id": "sweeps.id",
    "chunk_ids": "chunks.id",  # the chunks a synthesised candidate was written from
    # a "table.column" key overrides the column's rule in that table
    "received_spans.span_id": (),  # part of the table's own key: a span id as the application sent it
    "received_spans.parent_id": "received_spans.span_id",
}
# columns named like references that refer to no table: why
NOT_REFERENCES = {
    "id": "a row's own key",
    "item_id": "a golden item's id in its dataset file",
    "record_id": "a detector benchmark record's id in its dataset",
    "conversation_id": "the name of the conversation a run is a turn of, shared by its turns (no table of its own)",
}
# view -> the tables it reads
VIEWS = {"llm_cache": ("llm_texts",)}


def looks_like_reference(column: str) -> bool:
    return column.endswith(("_id", "_ids")) or column == "id"


def migrated_store(folder: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(os.path.join(folder, "schema.duckdb"))
    migrate(con)
    return con


def schema(con) -> dict:
    """What the page shows, read from a migrated store: DDL by kind and name, and each table's columns."""

    def ddl(sql: str) -> dict[str, str]:
        return dict(con.execute(sql).fetchall())

    columns: dict[str, list[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() c WHERE NOT internal AND EXISTS "
        "(SELECT 1 FROM duckdb_tables() t WHERE t.table_name = c.table_name) ORDER BY table_name, column_index"
    ).fetchall():
        columns.setdefault(table, []).append(column)
    return {
        "tables": ddl("SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal ORDER BY table_name"),
        "views": ddl("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY view_name"),
        "sequences": ddl("SELECT sequence_name, sql FROM duckdb_sequences() ORDER BY sequence_name"),
        "indexes": ddl("SELECT index_name, sql FROM duckdb_indexes() ORDER BY index_name"),
        "columns": columns,
    }


def targets(column: str, table: str = "") -> tuple[str, ...]:
    """The "table.column"s a column (of `table`) refers to (none when it is no reference)."""
    target = REFERENCES.get(f"{table}.{column}", REFERENCES.get(column, ()))
    return (target,) if isinstance(target, str) else target


def references(columns: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """(table, column, "target.column") of every reference, sorted."""
    found = []
    for table, names in columns.items():
        for column in names:
            found += [(table, column, t) for t in targets(column, table) if t != f"{table}.{column}"]
    return sorted(found)


def problems(found: dict) -> list[str]:
    """What REFERENCES, NOT_REFERENCES and VIEWS say that the schema contradicts, or leave unsaid."""
    columns = found["columns"]
    every_column = {c for names in columns.values() for c in names}
    out = []
    for column in REFERENCES:
        owner, dot, name = column.rpartition(".")
        if (name not in columns.get(owner, [])) if dot else (column not in every_column):
            out.append(f"REFERENCES names {column!r}, which no table has")
        for target in REFERENCES[column] if isinstance(REFERENCES[column], tuple) else (REFERENCES[column],):
            table, _, key = target.partition(".")
            if key not in columns.get(table, []):
                out.append(f"REFERENCES points {column!r} at {target}, which does not exist")
    out += [f"NOT_REFERENCES names {c!r}, which no table has" for c in NOT_REFERENCES if c not in every_column]
    for table, names in columns.items():
        out += [
            f"{table}.{c} looks like a reference: add it to REFERENCES or NOT_REFERENCES in store/schema_snapshot.py"
            for c in names
            if looks_like_reference(c) and c not in REFERENCES and c not in NOT_REFERENCES
        ]
    if set(VIEWS) != set(found["views"]):
        out.append(f"VIEWS names {sorted(VIEWS)}, the store has the views {sorted(found['views'])}")
    out += [f"view {v} reads {t}, which is not a table" for v, ts in VIEWS.items() for t in ts if t not in columns]
    return out


def diagram(found: dict) -> str:
    """Each table (and view) with what it refers to and what refers to it."""
    refs = references(found["columns"])
    out = []
    for name in sorted([*found["columns"], *found["views"]]):
        if name in found["views"]:
            out.append(f"{name} (view) → reads {', '.join(VIEWS[name])}")
            continue
        outgoing = {}
        for table, column, target in refs:
            if table == name:
                outgoing.setdefault(column, []).append(target)
        incoming = sorted({table for table, _, target in refs if target.partition(".")[0] == name and table != name})
        incoming += sorted(view for view, tables in VIEWS.items() if name in tables)
        if not outgoing and not incoming:
            out.append(f"{name} (no references)")
            continue
        out.append(name)
        out += [f"    {column} → {' or '.join(to)}" for column, to in outgoing.items()]
        if incoming:
            out.append(f"    ← {', '.join(incoming)}")
    return "\n".join(out)


def pretty(sql: str) -> str:
    """A one-line CREATE TABLE with one column or constraint a line (commas inside parentheses or quotes stay)."""
    start, end = sql.find("("), sql.rfind(")")
    if start < 0 or end < start:
        return sql
    parts, depth, quote, current = [], 0, None, ""
    for ch in sql[start + 1 : end]:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    parts.append(current.strip())
    if ", ".join(parts) != sql[start + 1 : end]:  # not the shape expected: shown as DuckDB printed it
        return sql
    return sql[:start].rstrip() + " (\n    " + ",\n    ".join(parts) + "\n)" + sql[end + 1 :]


def render(found: dict) -> str:
    def block(statements: dict[str, str], shape=None) -> str:
        between = "\n\n" if shape else "\n"  # a blank line between tables, none between one-line statements
        shown = [shape(statements[name]) if shape else statements[name] for name in sorted(statements)]
        return "```sql\n" + between.join(shown) + "\n```"

    names = ", ".join(f"`{m.__name__}`" for m in MIGRATIONS)
    return f"""# Store schema

<!-- Generated by `{COMMAND}` from store/migrations.py; change the migrations, then run it. Do not edit. -->

The schema of a new, empty DuckDB store after every migration. An older store reaches the same schema when it
opens: store/migrations.py applies each migration it lacks once, in its own transaction, in this order:
{names}.

DuckDB declares no foreign keys here; the references below are by convention (a `run_id` column holds a row id
of `runs`), kept in store/schema_snapshot.py and checked against the schema by tests/test_schema_snapshot.py.

## How the tables refer to each other

Each table, the columns in it that refer to another table, and (←) the tables that refer to it.

```text
{diagram(found)}
```

## Tables

{block(found["tables"], pretty)}

## Views

{block(found["views"])}

## Sequences

{block(found["sequences"])}

## Indexes

{block(found["indexes"])}
"""


def snapshot() -> tuple[str, list[str]]:
    """(the page, what the hand-kept references contradict) of a freshly migrated empty store."""
    with tempfile.TemporaryDirectory(prefix="schema-snapshot-") as folder:
        con = migrated_store(folder)
        try:
            found = schema(con)
        finally:
            con.close()
    return render(found), problems(found)


def write(path: Path = OUTPUT) -> list[str]:
    """Write the page to path (atomically); the problems found, if any (nothing is written then)."""
    page, found = snapshot()
    if found:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the page (default: %(default)s)")
    args = parser.parse_args(argv)
    found = write(args.output)
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    if not found:
        print(f"wrote {args.output}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
