"""Datasets kept in the store, by name and version (store/datasets.py holds them).

`dataset:NAME` (its latest version) or `dataset:NAME@VERSION` names one wherever a dataset file is taken. A file
given to `eval` is kept as a version of the dataset named after the file's stem (`golden.jsonl` -> `golden`), or
reuses the version of that name whose content is the same, so evaluating the same file twice pins one version.

An evaluation's dataset identity (eval_runs.dataset_hash, what the baseline rule and Trends group by) is
`dataset:NAME@VERSION` for a golden set kept here: two versions are two datasets, whatever their content. A dataset
whose items carry their answers keeps the identity of its questions (questions_hash), as a file of answers does,
so two pipelines' answers to the same questions are compared.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError
from pipeline.evaluation.dataset import Dataset, GoldenItem, checked, load_dataset, questions_hash
from store import datasets as stored
from store.db import Database

PREFIX = "dataset:"


@dataclass(frozen=True)
class Saved:
    name: str
    version: int
    created: bool  # False: an existing version with the same content was reused


def is_spec(text: str) -> bool:
    return str(text).startswith(PREFIX)


def parse_spec(text: str) -> tuple[str, int | None]:
    """`dataset:NAME` -> (NAME, None); `dataset:NAME@3` -> (NAME, 3)."""
    body = str(text).removeprefix(PREFIX).strip()
    name, at, version = body.rpartition("@") if "@" in body else (body, "", "")
    if not name.strip():
        raise InputError(f"{text!r} names no dataset", fix="write dataset:NAME or dataset:NAME@VERSION")
    if at and not version.isdigit():
        raise InputError(f"{text!r}: the version {version!r} is not a number", fix="write dataset:NAME@VERSION")
    return name.strip(), int(version) if at else None


def content_hash(items: list[GoldenItem]) -> str:
    """Of every field of every item, in order: two versions with this hash hold the same items."""
    rows = [json.dumps(i.model_dump(mode="json"), sort_keys=True) for i in items]
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()


def identity(name: str, version: int, items: list[GoldenItem]) -> str:
    """The evaluation identity of a version (see the module's docstring)."""
    if any(i.given for i in items):
        return questions_hash(items)
    return f"{PREFIX}{name}@{version}"


def check_name(name: str) -> str:
    name = " ".join(str(name).split())
    if not name or "@" in name or name.startswith(PREFIX):
        raise InputError(
            f"{name!r} cannot name a dataset",
            fix="use letters, digits, spaces, dots, dashes or underscores, without '@' or the 'dataset:' prefix",
        )
    return name


def save(db: Database, name: str, items: list[GoldenItem], origin: str, note: str | None = None) -> Saved:
    """Keep `items` as the next version of `name` (a new dataset when there is none of that name)."""
    name = check_name(name)
    if not items:
        raise InputError(f"dataset {name!r} would have no items", fix="keep at least one item")
    version = stored.save_version(
        db, name, [i.model_dump(mode="json") for i in items], content_hash(items), origin, note
    )
    return Saved(name, version, True)


def keep_file(db: Database, dataset: Dataset, name: str | None = None) -> Saved:
    """Keep a dataset read from a file as a version of `name` (default: the file's stem), reusing the version of
    that name with the same content if there is one."""
    name = check_name(name or Path(dataset.name).stem)
    existing = stored.version_with_hash(db, name, content_hash(dataset.items))
    if existing is not None:
        return Saved(name, existing, False)
    return save(db, name, dataset.items, "file", note=f"from {dataset.name}")


def load(db: Database, name: str, version: int | None = None) -> Dataset:
    """A version of a stored dataset (None: the latest) as a Dataset, with its evaluation identity."""
    info = stored.version_info(db, name, version)
    if info is None:
        known = stored.version_info(db, name)
        raise InputError(
            f"dataset {name!r} has no version {version}" if known else f"there is no dataset named {name!r}",
            fix=f"its versions are 1 to {known.version}"
            if known
            else "list the datasets with `python -m pipeline datasets`",
        )
    items = [GoldenItem.model_validate(raw) for raw in stored.version_items(db, info.name, info.version)]
    given = any(i.given for i in items)
    answers = content_hash(items) if given else None
    return Dataset(info.name, items, [], identity(info.name, info.version, items), None, answers, info.version)


def resolve(db: Database, spec: str | Path, keep: bool = True) -> Dataset:
    """The dataset `spec` names: `dataset:NAME[@VERSION]`, or a file, read and (with `keep`) kept as a version
    of the dataset named after it, so the evaluation pins that version."""
    if is_spec(str(spec)):
        return load(db, *parse_spec(str(spec)))
    dataset = load_dataset(spec)
    if not keep:
        return dataset
    saved = keep_file(db, dataset)
    kept = load(db, saved.name, saved.version)
    return checked(
        Dataset(
            kept.name, kept.items, dataset.bad_rows, kept.content_hash, dataset.mapping, kept.answers_hash, kept.version
        ),
        str(spec),
    )
