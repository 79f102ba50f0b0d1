"""Datasets: golden sets (rows {id, question, reference?, tags?}, and conversations {id, turns: [{question,
reference?}], tags?}) and rows that already carry an answer and its contexts (another pipeline's output, scored as
given, optionally with a conversation id and turn number), as JSONL, CSV or Parquet.

A conversation row becomes one item per turn, ids `ID#1`, `ID#2`, ..., each carrying its conversation (the row's
id) and its turn (from 1) and the row's tags: every per-item figure (scores, slices, baselines, Compare's item
matching, stored datasets, export) works per turn, and the runner answers a conversation's turns in order with the
history it has produced.

The column names are mapped once per file (columns.py: ours, Ragas's and DeepEval's). Every row is validated;
bad rows are reported by line number (a Parquet file's row number) and the good ones are kept. A row's id is
made from its question when the file has no id column, so two files of the same questions match item by item.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ValidationError, field_validator

from pipeline.errors import InputError
from pipeline.evaluation.columns import ALIASES, ColumnMap, map_columns
from pipeline.text import question_key

FORMATS = ("jsonl", "csv", "parquet")
QUESTION_ALIASES = ALIASES["question"]


class GivenContext(BaseModel):
    """A context the row's pipeline retrieved: a string, or {text, source?, score?}."""

    text: str
    source: str | None = None
    score: float | None = None

    @field_validator("text")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a context's text must not be empty")
        return value


def no_value(value) -> bool:
    """None, or NaN: an empty Parquet/pandas cell."""
    return value is None or (isinstance(value, float) and value != value)


class GoldenItem(BaseModel):
    id: str
    question: str
    reference: str | None = None
    tags: list[str] = []
    answer: str | None = None  # given: the row is scored as it is, with no retrieval and no generation
    contexts: list[GivenContext] | None = None  # the contexts the given answer was written from
    origin: str = "file"  # file, synthesised, run: where the item came from (a dataset in the store keeps it)
    provenance: dict = {}  # synthesised: kind, chunk_ids, model, prompt_version, review; from a run: run_id
    conversation: str | None = None  # a turn of a conversation: the conversation's id (a golden row's, or a column)
    turn: int | None = None  # its turn number in the conversation, from 1

    @property
    def given(self) -> bool:
        return self.answer is not None

    @field_validator("conversation", mode="before")
    @classmethod
    def _conversation_text(cls, value):
        if no_value(value):
            return None
        text = " ".join(str(value).split())
        return text or None

    @field_validator("turn", mode="before")
    @classmethod
    def _turn_number(cls, value):
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"must be a whole number from 1, not {value!r}") from None
        if number != number:  # NaN
            return None
        if number < 1 or number != int(number):
            raise ValueError(f"must be a whole number from 1, not {value!r}")
        return int(number)

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

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_text(cls, value):
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"must be text, not {type(value).__name__}")
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("contexts", mode="before")
    @classmethod
    def _context_list(cls, value):
        """A list of contexts, a JSON list in a string (a CSV cell), or one context as a plain string."""
        if value is None:
            return None
        if hasattr(value, "tolist"):  # a numpy array (Parquet read through pandas)
            value = value.tolist()
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return []
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"looks like a JSON list but is not valid JSON ({exc.msg})") from None
            else:
                value = [text]
        if not isinstance(value, list):
            raise ValueError(f"must be a list of contexts or a string, not {type(value).__name__}")
        return [{"text": c} if isinstance(c, str) else c for c in value]

    @field_validator("origin", mode="before")
    @classmethod
    def _origin_text(cls, value):
        """An exported dataset's origin column; an empty cell is a file's row."""
        if no_value(value) or not str(value).strip():
            return "file"
        return str(value).strip()

    @field_validator("provenance", mode="before")
    @classmethod
    def _provenance_object(cls, value):
        """An exported dataset's provenance: an object, or a JSON object in a string (a CSV cell); empty: none."""
        if no_value(value):
            return {}
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"looks like a JSON object but is not valid JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise ValueError(f"must be an object, not {type(value).__name__}")
        return value


@dataclass
class BadRow:
    line: int
    reason: str


@dataclass
class Dataset:
    name: str
    items: list[GoldenItem]
    bad_rows: list[BadRow] = field(default_factory=list)
    content_hash: str = ""  # of the questions (id, question, reference, tags): a dataset's identity
    mapping: ColumnMap | None = None  # how the file's columns were read
    answers_hash: str | None = None  # of the given answers and contexts; None for a golden set
    version: int | None = None  # a dataset kept in the store: its version (its name is `name`); None: a file

    def select(self, limit: int | None = None, tags: list[str] | None = None) -> Dataset:
        items = [i for i in self.items if not tags or set(tags) & set(i.tags)]
        return replace(self, items=items[:limit] if limit else items)

    @property
    def tags(self) -> list[str]:
        return sorted({t for item in self.items for t in item.tags})

    @property
    def given_answers(self) -> bool:
        """Whether its rows carry their answers (scored as given) rather than being answered here."""
        return self.answers_hash is not None

    @property
    def how_answered(self) -> str:
        """How its items are answered, in words for the screens that show its mapping."""
        if self.given_answers:
            return "answers scored as given (no retrieval, no generation)"
        return "a golden set: the workbench answers each question (retrieval and generation here)"


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


def _jsonl_columns(text: str) -> list[str]:
    keys: dict[str, None] = {}
    for _, row, problem in _rows_jsonl(text):
        if not problem:
            keys.update(dict.fromkeys(row))
    return list(keys)


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
    for row in reader:
        yield reader.line_num, {k.strip(): v for k, v in row.items() if k}, None


def _csv_columns(text: str) -> list[str]:
    header = next(csv.reader(io.StringIO(text)), [])
    return [h.strip() for h in header]


def parse_rows(rows, columns: list[str], name: str, hash_of: bytes) -> Dataset:
    """A dataset from (line, raw row, problem) triples and the file's column names (mapped here; a column no row
    fills, such as `"answer": null` in every row, is not read)."""
    rows = list(rows)
    filled = {k for _, row, problem in rows if not problem for k, v in row.items() if v not in (None, "")}
    names = [c for c in columns if c in filled and c != TURNS]
    if TURNS in filled and not set(QUESTION_ALIASES) & set(names):  # conversations only: their turns hold questions
        names.append("question")
    mapping = map_columns(names)
    items, bad, seen = [], [], set()
    for number, row, problem in rows:
        if problem:
            bad.append(BadRow(number, problem))
            continue
        if TURNS in row:  # a golden conversation: one item per turn
            problem, turns = _conversation_items(mapping, row)
            clash = next((t.id for t in turns if t.id in seen), None)
            if clash:
                problem = f"id {clash!r} repeats an earlier row"
            if problem:
                bad.append(BadRow(number, problem))
                continue
            seen.update(t.id for t in turns)
            items.extend(turns)
            continue
        problem, item = _item(mapping, row)
        if problem:
            bad.append(BadRow(number, problem))
            continue
        if item.id in seen:
            if "id" in mapping.columns:
                bad.append(BadRow(number, f"id {item.id!r} repeats an earlier row"))
                continue
            item = item.model_copy(update={"id": _next_free(item.id, seen)})
        seen.add(item.id)
        items.append(item)
    given = mapping.given_answers
    return Dataset(
        name,
        items,
        bad,
        questions_hash(items) if given else hashlib.sha256(hash_of).hexdigest(),
        mapping,
        hashlib.sha256(hash_of).hexdigest() if given else None,
    )


TURNS = "turns"  # the key of a golden conversation's turns


def _conversation_items(mapping: ColumnMap, raw: dict) -> tuple[str | None, list[GoldenItem]]:
    """(problem, items) of a golden conversation row {id?, turns: [{question, reference?}], tags?}: one item per
    turn, ids ID#1, ID#2, ... (ID made from the first question when the row has none)."""
    if mapping.given_answers:
        return (
            "a conversation row (turns) in a file with answers: give each answered turn a row of its own, with "
            "conversation_id and turn columns",
            [],
        )
    turns = raw.get(TURNS)
    if not isinstance(turns, list):
        return f"turns: must be a list of turns {{question, reference?}}, not {type(turns).__name__}", []
    if not turns:
        return "turns: no turns (a conversation needs at least one)", []
    for n, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            return f"turns[{n}]: must be an object {{question, reference?}}, not {type(turn).__name__}", []
        if not isinstance(turn.get("question"), str) or not turn["question"].strip():
            return f"turns[{n}].question: missing or empty (every turn needs a question)", []
    row = mapping.row(raw)
    conversation = row.get("id")
    if conversation is None or not str(conversation).strip():
        conversation = question_id(turns[0]["question"])
    conversation = " ".join(str(conversation).split())
    items = []
    for n, turn in enumerate(turns, start=1):
        fields = {
            "id": f"{conversation}#{n}",
            "question": turn["question"],
            "reference": turn.get("reference"),
            "tags": row.get("tags"),
            "conversation": conversation,
            "turn": n,
        }
        try:
            items.append(GoldenItem.model_validate(fields))
        except ValidationError as exc:
            return f"turns[{n}]: {_reason(exc)}", []
    return None, items


def conversations(items: list[GoldenItem]) -> dict[str, list[GoldenItem]]:
    """The items that are turns of a conversation, by conversation (in the order they first appear), each
    conversation's turns in turn order."""
    out: dict[str, list[GoldenItem]] = {}
    for item in items:
        if item.conversation is not None:
            out.setdefault(item.conversation, []).append(item)
    return {c: sorted(turns, key=lambda i: i.turn or 0) for c, turns in out.items()}


def _item(mapping: ColumnMap, raw: dict) -> tuple[str | None, GoldenItem | None]:
    row = mapping.row(raw)
    if mapping.given_answers and row.get("answer") is None:
        return f"{mapping.columns['answer']}: missing (every row of a file with answers needs one)", None
    if "id" not in mapping.columns and isinstance(row.get("question"), str):
        row["id"] = question_id(row["question"])
    try:
        return None, GoldenItem.model_validate(row)
    except ValidationError as exc:
        return _reason(exc), None


def normalised_question(question: str) -> str:
    """The question as items are matched by it (pipeline.text.question_key)."""
    return question_key(question)


def question_id(question: str) -> str:
    """The id of a row without one: made from its normalised question, so files of the same questions match."""
    return "q-" + hashlib.sha256(normalised_question(question).encode("utf-8")).hexdigest()[:12]


def _next_free(item_id: str, seen: set[str]) -> str:
    n = 2
    while f"{item_id}-{n}" in seen:
        n += 1
    return f"{item_id}-{n}"


def questions_hash(items: list[GoldenItem]) -> str:
    """The identity of a dataset's questions (ids, questions, references, tags), whatever answers it carries: two
    files of one pipeline's answers to the same questions are runs over the same dataset."""
    rows = sorted(
        json.dumps(i.model_dump(include={"id", "question", "reference", "tags"}), sort_keys=True) for i in items
    )
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()


def parse_dataset(text: str, name: str, fmt: str) -> Dataset:
    """fmt: 'jsonl' or 'csv'. A byte-order mark at the start (Excel and Notepad write one) is ignored."""
    text = text.removeprefix("\ufeff")
    if fmt == "csv":
        return parse_rows(_rows_csv(text), _csv_columns(text), name, text.encode("utf-8"))
    return parse_rows(_rows_jsonl(text), _jsonl_columns(text), name, text.encode("utf-8"))


def parse_parquet(data: bytes, name: str) -> Dataset:
    """A Parquet file's rows (numbered from 1); lists and structs arrive as Python lists and dicts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(
            f"{name} is not a readable Parquet file ({exc})", fix="write it with pandas.to_parquet or pyarrow"
        ) from None
    rows = ((n, row, None) for n, row in enumerate(table.to_pylist(), start=1))
    return parse_rows(rows, table.column_names, name, data)


def format_of(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "jsonl")


def parse_file(data: bytes, name: str) -> Dataset:
    """A dataset from a file's bytes, its format told by the name's suffix (.csv, .parquet, else JSONL)."""
    fmt = format_of(name)
    if fmt == "parquet":
        return parse_parquet(data, name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"dataset {name} is not UTF-8 text", fix="save it as UTF-8") from None
    return parse_dataset(text, name, fmt)


def load_dataset(path: str | Path) -> Dataset:
    path = Path(path)
    if path.is_dir():
        raise InputError(
            f"dataset {path} is a folder, not a file",
            fix="give the path of a .jsonl, .csv or .parquet file in it, for example data/eval/golden.jsonl",
        )
    if not path.is_file():
        raise InputError(
            f"dataset {path} does not exist",
            fix="give the path of a .jsonl, .csv or .parquet dataset, for example data/eval/golden.jsonl",
        )
    dataset = parse_file(path.read_bytes(), path.name)
    return checked(dataset, str(path))


def checked(dataset: Dataset, where: str) -> Dataset:
    """The dataset, or InputError when no row of it is usable."""
    if not dataset.items:
        first = f": line {dataset.bad_rows[0].line}: {dataset.bad_rows[0].reason}" if dataset.bad_rows else ""
        raise InputError(
            f"dataset {where} has no valid rows ({len(dataset.bad_rows)} bad){first}",
            fix="each row needs at least a question (and, in a file with answers, an answer)",
        )
    return dataset
