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
from store import evals
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
    rows = [json.dumps(i.model_dump(mode="json", exclude=_unset_turn(i)), sort_keys=True) for i in items]
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()


def _unset_turn(item: GoldenItem) -> set[str]:
    """The conversation fields an item leaves empty: not hashed, so an item that is no turn hashes as before they
    existed."""
    return {name for name in TURN_FIELDS if getattr(item, name) is None}


def identity(name: str, version: int, items: list[GoldenItem]) -> str:
    """The evaluation identity of a version (see the module's docstring)."""
    if any(i.given for i in items):
        return questions_hash(items)
    return f"{PREFIX}{name}@{version}"


def version_label(identity: str | None) -> str | None:
    """NAME@VERSION when an evaluation's dataset identity (eval_runs.dataset_hash) is a stored golden set's version;
    None for a content hash (a file, or a dataset with given answers, whose identity is its questions)."""
    return identity.removeprefix(PREFIX) if identity and identity.startswith(PREFIX) else None


def identity_text(identity: str | None, digits: int = 12) -> str:
    """A dataset identity in words: NAME@VERSION for a stored golden set's version, else its content hash's first
    `digits` characters."""
    return version_label(identity) or f"content {(identity or '?')[:digits]}"


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


def import_file(db: Database, dataset: Dataset, name: str | None = None) -> tuple[Saved, bool]:
    """Keep a dataset read from a file as the next version of `name` (default: the file's stem), unless the latest
    version already holds the same items (then nothing is saved: Saved.created is False); and whether a dataset of
    that name existed before."""
    name = check_name(name or Path(dataset.name).stem)
    latest = stored.version_info(db, name)
    if latest is not None and latest.content_hash == content_hash(dataset.items):
        return Saved(name, latest.version, False), True
    return save(db, name, dataset.items, "file", note=f"imported from {dataset.name}"), latest is not None


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
    return kept(db, dataset, str(spec))[0] if keep else dataset


def kept(db: Database, dataset: Dataset, where: str | None = None) -> tuple[Dataset, Saved]:
    """A dataset read from a file (`where`: its path or upload name), kept as a version of the dataset named after
    it (keep_file) and read back as that version, with its identity; the file's bad rows and column mapping stay
    with it for the screens that show them, and so does the hash of its given answers (of the file, as when it is
    evaluated unkept: an evaluation started either way resumes either way)."""
    saved = keep_file(db, dataset)
    version = load(db, saved.name, saved.version)
    return checked(
        Dataset(
            version.name,
            version.items,
            dataset.bad_rows,
            version.content_hash,
            dataset.mapping,
            dataset.answers_hash if version.answers_hash else None,
            version.version,
        ),
        where or dataset.name,
    ), saved


def holds(db: Database, name: str, version: int, items: list[GoldenItem]) -> bool:
    """Whether version `version` of `name` holds exactly these items (a file read again, unkept)."""
    info = stored.version_info(db, name, version)
    return info is not None and info.content_hash == content_hash(items)


def pin_line(saved: Saved, where: str) -> str:
    """The line saying which version an evaluation pinned: `dataset golden, version 3 (kept from
    data/eval/golden.jsonl)`, or `(the same content as version 3)` when an existing version was reused."""
    how = f"kept from {where}" if saved.created else f"the same content as version {saved.version}"
    return f"dataset {saved.name}, version {saved.version} ({how})"


def for_evaluation(db: Database, dataset: Dataset, run_name: str, where: str) -> tuple[Dataset, str]:
    """The dataset an evaluation named `run_name` runs over, and a line saying which version it pinned. A dataset
    loaded from the store (dataset:NAME@VERSION) is that version; one read from a file (`where`) is kept as a
    version (kept). Resuming an evaluation started over a file before datasets were kept, the file is taken as it
    is: kept, its identity would differ from the one the run was started with, and the resume would be refused."""
    if dataset.version is not None:
        return dataset, f"dataset {dataset.name}, version {dataset.version}"
    existing = evals.get_eval_run(db, run_name.strip())
    if existing is not None and existing.dataset_version is None:
        return dataset, f"resuming {run_name.strip()!r} over {where} as it was started (not kept as a dataset version)"
    version, saved = kept(db, dataset, where)
    return version, pin_line(saved, where)


def _replace_items(db: Database, name: str, version: int | None, change, origin: str, note: str) -> Saved:
    """The next version of `name`: the items of `version` (None: the latest) passed through `change`."""
    current = load(db, name, version)
    return save(db, current.name, change(list(current.items)), origin, note)


def _index_of(items: list[GoldenItem], item_id: str, name: str) -> int:
    for n, item in enumerate(items):
        if item.id == item_id:
            return n
    raise InputError(f"dataset {name!r} has no item {item_id!r}", fix="pick one of its items by its id")


EDITABLE = ("question", "reference", "tags")


def edit_item(db: Database, name: str, item_id: str, changes: dict, version: int | None = None) -> Saved:
    """A new version with one item's question, reference or tags changed (a synthesised item counts as reviewed:
    provenance review "edited"). An edit that empties the question is refused, and nothing is saved."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise InputError(f"cannot edit {', '.join(unknown)} of an item", fix=f"edit only {', '.join(EDITABLE)}")
    if "question" in changes and not str(changes["question"] or "").strip():
        raise InputError(
            f"the edit would leave item {item_id!r} without a question",
            fix="write a question, or reject the item to drop it from the dataset",
        )

    def change(items):
        n = _index_of(items, item_id, name)
        merged = items[n].model_dump() | changes
        merged["provenance"] = {**items[n].provenance, "review": "edited"}
        items[n] = GoldenItem.model_validate(merged)
        return items

    return _replace_items(db, name, version, change, "edited", f"edited {item_id}")


def accept_item(db: Database, name: str, item_id: str, version: int | None = None) -> Saved:
    """A new version with the item marked reviewed and kept (provenance review "accepted")."""

    def change(items):
        n = _index_of(items, item_id, name)
        items[n] = items[n].model_copy(update={"provenance": {**items[n].provenance, "review": "accepted"}})
        return items

    return _replace_items(db, name, version, change, "edited", f"accepted {item_id}")


def reject_item(db: Database, name: str, item_id: str, version: int | None = None) -> Saved:
    """A new version without the item (the versions before keep it). Rejecting the last item is refused."""

    def change(items):
        del items[_index_of(items, item_id, name)]
        return items

    return _replace_items(db, name, version, change, "edited", f"rejected {item_id}")


def pending_review(dataset: Dataset) -> list[GoldenItem]:
    """Items a person has not reviewed yet: synthesised ones, and ones taken from a run (a draft reference)."""
    return [i for i in dataset.items if i.provenance.get("review") == "pending"]


@dataclass(frozen=True)
class Change:
    item_id: str
    field: str
    before: object
    after: object


@dataclass(frozen=True)
class Diff:
    added: list[GoldenItem]
    removed: list[GoldenItem]
    changed: list[Change]  # one per field that differs, of items in both

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


COMPARED = ("question", "reference", "tags", "answer", "contexts", "origin", "provenance")


def diff(before: Dataset, after: Dataset) -> Diff:
    """What changed from `before` to `after`, item by item (matched by id)."""
    old = {i.id: i for i in before.items}
    new = {i.id: i for i in after.items}
    changed = [
        Change(item_id, name, getattr(old[item_id], name), getattr(new[item_id], name))
        for item_id in new
        if item_id in old
        for name in COMPARED
        if getattr(old[item_id], name) != getattr(new[item_id], name)
    ]
    return Diff([new[i] for i in new if i not in old], [old[i] for i in old if i not in new], changed)


EXPORT_FIELDS = ("id", "question", "reference", "tags", "answer", "contexts", "origin", "provenance")
TURN_FIELDS = ("conversation", "turn")  # exported only by a dataset with conversations


def export_rows(dataset: Dataset) -> list[dict]:
    """The items as plain rows (the fields a dataset file can carry, and origin and provenance; a dataset with
    conversations, each item's conversation and turn too: a file read back holds the same turns)."""
    fields = set(EXPORT_FIELDS) | (set(TURN_FIELDS) if any(i.conversation for i in dataset.items) else set())
    return [item.model_dump(mode="json", include=fields) for item in dataset.items]


def export_text(dataset: Dataset, fmt: str) -> str:
    """The dataset as JSONL or CSV text that `eval` (and `datasets import`) read back as the same items; in CSV,
    tags are joined with ';' and lists and objects are JSON."""
    rows = export_rows(dataset)
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if fmt != "csv":
        raise InputError(f"cannot export as {fmt!r}", fix="choose jsonl or csv")
    import csv
    import io

    out = io.StringIO()
    turns = list(TURN_FIELDS) if rows and "conversation" in rows[0] else []
    writer = csv.DictWriter(out, fieldnames=[*EXPORT_FIELDS, *turns])
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                k: ";".join(v)
                if k == "tags"
                else json.dumps(v, ensure_ascii=False)
                if isinstance(v, list | dict)
                else v
                for k, v in row.items()
            }
        )
    return out.getvalue()


def add_run(db: Database, run_id: int, name: str, run: dict | None = None) -> Saved:
    """A chat run's question into the next version of `name` (a new dataset when there is none), with its answer as
    a draft reference for a person to confirm (provenance review "pending"). `run`: the run's row, if read."""
    from store.runs import get_run

    run = run or get_run(db, run_id)
    if run is None:
        raise InputError(
            f"there is no run {run_id}", fix="pick a run on the Runs page or with `python -m pipeline runs`"
        )
    item = GoldenItem(
        id=f"run-{run_id}",
        question=run["question"],
        reference=run.get("answer") or None,
        origin="run",
        provenance={"run_id": run_id, "review": "pending", "draft_reference": bool(run.get("answer"))},
    )
    name = check_name(name)
    items = list(load(db, name).items) if stored.version_info(db, name) else []
    if any(i.id == item.id for i in items):
        raise InputError(f"run {run_id} is already in dataset {name!r}", fix="edit its item there instead")
    return save(db, name, items + [item], "from a run", f"added run {run_id}")


def listing(db: Database) -> list[tuple[stored.VersionInfo, int]]:
    """The latest version of every dataset, by name, with how many versions the dataset has (for the screens,
    which read the store through this layer)."""
    counts = stored.version_counts(db)
    return [(info, counts.get(info.name, 1)) for info in stored.latest_versions(db)]


def versions(db: Database, name: str) -> list[stored.VersionInfo]:
    """Every version of `name`, newest first (none for an unknown name)."""
    return stored.versions(db, name)
