"""One table, four renderings (`--format table|markdown|json|csv`).

A command builds what it prints once, as a Report: its tables (columns over rows of raw values) and its lines of
text. `emit` renders the Report by format:

- table: rich tables on the console, each cell shown through pipeline/formatting.py (thousands separators, 24-hour
  times); on a terminal a wide column's long text is cut to WIDE_CUT characters, elsewhere nothing is cut;
- markdown: GitHub tables and paragraphs, the cells shown as in `table`, never cut (also the step summary);
- json: the command's own payload (raw values: numbers as numbers, times in ISO 8601), else its main table's rows;
- csv: its main table's raw fields (the first table unless it names another), numbers as numbers, times in ISO
  8601."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from pipeline.formatting import fmt_cost, fmt_count, fmt_ms, fmt_pct, fmt_score, fmt_time

FORMATS = ("table", "markdown", "json", "csv")
WIDE_CUT = 80  # a wide column's text on a terminal: this many characters, the rest cut


def _text(value) -> str:
    return "" if value is None else str(value)


# how a cell of each kind reads in `table` and `markdown`
SHOW: dict[str, Callable[[object], str]] = {
    "text": _text,
    "count": lambda n: fmt_count(None if n is None else round(n)),
    "score": fmt_score,
    "ms": fmt_ms,
    "time": fmt_time,
    "cost": fmt_cost,
    "pct": fmt_pct,
}


@dataclass(frozen=True)
class Column:
    """A column of a table: the raw field it shows (`key`), its heading, and how a cell reads (`kind`, or `show`
    for a cell made of several fields of the row); `style` colours a cell on the console."""

    key: str
    label: str = ""
    kind: str = "text"
    show: Callable[[dict], str] | None = None
    style: Callable[[dict], str] | None = None
    wide: bool = False  # long free text (a question): cut on a terminal only

    @property
    def heading(self) -> str:
        return self.label or self.key

    def cell(self, row: dict) -> str:
        return self.show(row) if self.show else SHOW[self.kind](row.get(self.key))


@dataclass
class Table:
    """Columns over rows of raw values; `fields`: the raw fields csv writes (default: each column's key)."""

    columns: Sequence[Column]
    rows: list[dict]
    title: str = ""
    fields: Sequence[str] | None = None
    show_lines: bool = False  # on the console, a rule between rows (rows of several lines)

    def raw_fields(self) -> list[str]:
        return list(self.fields or [c.key for c in self.columns])


@dataclass(frozen=True)
class Line:
    """A line of text between tables; `style` colours it on the console."""

    text: str
    style: str = ""


@dataclass
class Report:
    """What a command prints, in order; `payload` is its JSON (default: its first table's rows)."""

    blocks: list[Table | Line] = field(default_factory=list)
    payload: object = None
    main: Table | None = None  # the table csv writes (default: the first)

    def add(self, *blocks: Table | Line) -> Report:
        self.blocks.extend(blocks)
        return self

    def line(self, text: str, style: str = "") -> Report:
        return self.add(Line(text, style))

    @property
    def tables(self) -> list[Table]:
        return [b for b in self.blocks if isinstance(b, Table)]


def add_format(parser, what: str = "the output") -> None:
    """--format, and --json as its old spelling."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help=f"how to print {what}: table (default), markdown (GitHub tables), json or csv (raw values: numbers "
        "as numbers, times in ISO 8601)",
    )
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def chosen_format(args) -> str:
    return "json" if getattr(args, "json", False) else getattr(args, "format", None) or "table"


def emit(report: Report, fmt: str, out: Console) -> None:
    """Print the report in the format."""
    if fmt == "table":
        for block in report.blocks:
            if isinstance(block, Line):
                out.print(Text(block.text, style=block.style))
            else:
                out.print(rich_table(block, cut=out.is_terminal))
        return
    text = {"markdown": markdown, "json": as_json, "csv": as_csv}[fmt](report)
    if fmt == "json":
        out.print_json(text)
    else:
        out.print(Text(text), soft_wrap=True, end="" if text.endswith("\n") else "\n")


def rich_table(table: Table, cut: bool) -> RichTable:
    shown = RichTable(title=table.title or None, show_lines=table.show_lines)
    for column in table.columns:
        shown.add_column(column.heading, overflow="fold")  # a terminal too narrow wraps a cell, never cuts it
    for row in table.rows:
        cells = []
        for column in table.columns:
            text = column.cell(row)
            if cut and column.wide and len(text) > WIDE_CUT:
                text = text[: WIDE_CUT - 1] + "…"
            cells.append(Text(text, style=column.style(row) if column.style else ""))
        shown.add_row(*cells)
    return shown


# Markdown: characters that would start emphasis, a link, an HTML tag or a table cell are escaped.
MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|~])")


def md_escape(text: str) -> str:
    return MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("\r", " ").replace("\n", " ")


def markdown_table(table: Table) -> str:
    lines = [f"**{md_escape(table.title)}**", ""] if table.title else []
    lines.append("| " + " | ".join(md_escape(c.heading) for c in table.columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(md_escape(c.cell(row)) for c in table.columns) + " |")
    return "\n".join(lines)


def markdown(report: Report) -> str:
    """The report as GitHub Markdown: each line a paragraph, each table a GitHub table."""
    parts = [markdown_table(b) if isinstance(b, Table) else md_escape(b.text) for b in report.blocks]
    return "\n\n".join(p for p in parts if p) + "\n"


def raw(value):
    """A value for json and csv: a moment in ISO 8601 with a space between date and time (RFC 3339's form, as the
    JSON of every command has always written it: 2026-12-06 14:05:07), anything else as it is."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return value.isoformat() if isinstance(value, date) else value


def to_json(payload) -> str:
    return json.dumps(payload, default=lambda v: raw(v) if isinstance(v, date) else str(v))


def main_table(report: Report) -> Table:
    return report.main or (report.tables[0] if report.tables else Table([], []))


def as_json(report: Report) -> str:
    if report.payload is not None:
        return to_json(report.payload)
    main = main_table(report)
    names = main.raw_fields()
    return to_json([{name: row.get(name) for name in names} for row in main.rows])


def _csv_cell(value):
    value = raw(value)
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, default=str)
    return "" if value is None else value


def as_csv(report: Report) -> str:
    """The main table's raw fields, a header line first."""
    main = main_table(report)
    names = main.raw_fields()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    for row in main.rows:
        writer.writerow([_csv_cell(row.get(name)) for name in names])
    return buffer.getvalue()
