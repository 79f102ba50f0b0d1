"""Golden sets: JSONL rows {id, question, reference?, tags?}, or CSV with the same columns.

Every row is validated; bad rows are reported by line number and the good ones are kept.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator

from pipeline.errors import InputError


class GoldenItem(BaseModel):
    id: str
    question: str
    reference: str | None = None
    tags: list[str] = []

    @field_validator("id", "question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = " ".join(str(value).split())
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("reference", mode="before")
    @classmethod
    def _blank_is_none(cls, value):
        return None if value is None or not str(value).strip() else str(value).strip()

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_list(cls, value):
        if value is None or value == "":
            return []
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                value = json.loads(text)
            else:
                value = [t for part in text.replace("|", ";").split(";") for t in part.split(",")]
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise ValueError("must be a list of strings")
        return [t.strip() for t in value if t.strip()]


@dataclass
class BadRow:
    line: int
    reason: str


@dataclass
class Dataset:
    name: str
    items: list[GoldenItem]
    bad_rows: list[BadRow] = field(default_factory=list)
    content_hash: str = ""

    def select(self, limit: int | None = None, tags: list[str] | None = None) -> Dataset:
        items = [i for i in self.items if not tags or set(tags) & set(i.tags)]
        return Dataset(self.name, items[:limit] if limit else items, self.bad_rows, self.content_hash)

    @property
    def tags(self) -> list[str]:
        return sorted({t for item in self.items for t in item.tags})


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "row"
        parts.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def _rows_jsonl(text: str):
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, None, f"not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        yield number, row, None if isinstance(row, dict) else "not a JSON object"


def _rows_csv(text: str):
    reader = csv.DictReader(io.StringIO(text), strict=True)
    read_up_to = 0
    try:
        for row in _csv_rows(reader):
            read_up_to = reader.line_num
            yield row
    except csv.Error as exc:  # strict: an unterminated quote would otherwise swallow the rest of the file
        raise InputError(
            f"the CSV file is malformed after line {max(read_up_to, 1)} ({exc}): "
            "a quoted field there is never closed, or a quote is misplaced",
            fix='close every quoted field; a quote inside a quoted field is written twice ("")',
        ) from None


def _csv_rows(reader: csv.DictReader):
    if not reader.fieldnames or not {"id", "question"} <= {f.strip() for f in reader.fieldnames}:
        raise InputError(
            "the CSV file needs a header row with at least the columns id and question",
            fix="add a first line such as: id,question,reference,tags",
        )
    for row in reader:
        yield reader.line_num, {k.strip(): v for k, v in row.items() if k}, None


def parse_dataset(text: str, name: str, fmt: str) -> Dataset:
    """fmt: 'jsonl' or 'csv'. A byte-order mark at the start (Excel and Notepad write one) is ignored."""
    text = text.removeprefix("\ufeff")
    rows = _rows_csv(text) if fmt == "csv" else _rows_jsonl(text)
    items, bad, seen = [], [], set()
    for number, row, problem in rows:
        if problem:
            bad.append(BadRow(number, problem))
            continue
        try:
            item = GoldenItem.model_validate(row)
        except ValidationError as exc:
            bad.append(BadRow(number, _reason(exc)))
            continue
        if item.id in seen:
            bad.append(BadRow(number, f"id {item.id!r} repeats an earlier row"))
            continue
        seen.add(item.id)
        items.append(item)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Dataset(name, items, bad, digest)


def load_dataset(path: str | Path) -> Dataset:
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"dataset {path} does not exist",
            fix="give the path of a .jsonl or .csv golden set, for example data/eval/golden.jsonl",
        )
    fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"dataset {path} is not UTF-8 text", fix="save it as UTF-8") from None
    dataset = parse_dataset(text, path.name, fmt)
    if not dataset.items:
        raise InputError(
            f"dataset {path} has no valid rows ({len(dataset.bad_rows)} bad)",
            fix="each row needs at least an id and a question",
        )
    return dataset
