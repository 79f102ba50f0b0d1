"""`datasets`: golden sets kept in the store, by name and version (pipeline.evaluation.datasets).

    datasets                                  list them: name, latest version, versions, items, origin, created
    datasets show NAME[@VERSION]              its versions with their notes, and the items of one version
    datasets import FILE [--name NAME]        keep a file as the next version
    datasets diff NAME A B                    what changed from version A to version B
    datasets export NAME[@VERSION]            JSONL or CSV, to stdout or --out
    datasets edit NAME ITEM_ID ...            a new version with one item's question, reference or tags changed
    datasets accept NAME ITEM_ID              a new version with the item marked reviewed
    datasets reject NAME ITEM_ID              a new version without the item
    datasets add-run RUN_ID NAME              a chat run's question into the next version, its answer a draft

Every change saves a new version; the versions before it stay as they were, and a refused change saves nothing.
Bad input raises InputError with its fix (exit 2, printed by pipeline.cli.main)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from pipeline.cli.tables import Column, Report, Table, add_format, chosen_format, emit
from pipeline.errors import InputError
from pipeline.text import plural

if TYPE_CHECKING:
    from pipeline.evaluation import datasets
    from pipeline.evaluation.dataset import GoldenItem


def register(sub) -> None:
    """The `datasets` command and its actions, on the CLI's subparsers."""
    ds = sub.add_parser(
        "datasets",
        help="golden sets kept in the store, by name and version: list (no action), show, import, diff, export, "
        "edit, accept, reject, add-run",
        description="Golden sets kept in the store; without an action, the list of them. Every change saves a new "
        "version; `eval dataset:NAME@VERSION` evaluates one.",
    )
    add_format(ds, "the list")
    actions = ds.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser("show", help="a dataset's versions with their notes, and the items of one version")
    show.add_argument("dataset", metavar="NAME[@VERSION]", help="a dataset, at its latest version by default")
    add_format(show, "the versions and items (csv: the items)")
    imp = actions.add_parser("import", help="keep a .jsonl, .csv or .parquet file as the next version of a dataset")
    imp.add_argument("file")
    imp.add_argument("--name", default=None, help="the dataset's name (default: the file's name without extension)")
    diff = actions.add_parser("diff", help="what changed between two versions: items added, removed, fields changed")
    diff.add_argument("name")
    diff.add_argument("a", type=int, metavar="A", help="the version before")
    diff.add_argument("b", type=int, metavar="B", help="the version after")
    diff.add_argument("--json", action="store_true")
    export = actions.add_parser("export", help="write a version as JSONL or CSV (`eval` and `import` read it back)")
    export.add_argument("dataset", metavar="NAME[@VERSION]", help="a dataset, at its latest version by default")
    export.add_argument(
        "--format", choices=["jsonl", "csv"], default=None, help="default: csv for an --out ending .csv, else jsonl"
    )
    export.add_argument("--out", default=None, metavar="PATH", help="write to this file (default: standard output)")
    edit = actions.add_parser("edit", help="save a new version with one item's question, reference or tags changed")
    edit.add_argument("name", metavar="NAME[@VERSION]", help="the dataset (its latest version by default)")
    edit.add_argument("item_id")
    edit.add_argument("--question", default=None)
    edit.add_argument("--reference", default=None, help="the reference answer ('' removes it)")
    edit.add_argument("--tags", default=None, help="comma-separated tags, e.g. rag,numbers ('' removes them)")
    for action, what in (("accept", "marked reviewed and kept"), ("reject", "left out")):
        one = actions.add_parser(action, help=f"save a new version with the item {what}")
        one.add_argument("name", metavar="NAME[@VERSION]", help="the dataset (its latest version by default)")
        one.add_argument("item_id")
    add_run = actions.add_parser(
        "add-run", help="add a run's question to a dataset (a new one if needed), its answer as a draft reference"
    )
    add_run.add_argument("run_id", type=int)
    add_run.add_argument("name")
    ds.set_defaults(handler=cmd_datasets)


def named(text: str) -> tuple[str, int | None]:
    """NAME or NAME@VERSION (the `dataset:` prefix is optional here)."""
    from pipeline.evaluation import datasets

    return datasets.parse_spec(text if datasets.is_spec(text) else datasets.PREFIX + text)


def cmd_datasets(args, settings, db, out: Console, err: Console) -> int:
    return ACTIONS[args.action or "list"](args, db, out, err)


def _list(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    rows = [
        {
            "name": info.name,
            "latest_version": info.version,
            "versions": count,
            "items": info.n_items,
            "origin": info.origin,
            "created_at": info.created_at,
        }
        for info, count in datasets.listing(db)
    ]
    fmt = chosen_format(args)
    if not rows and fmt == "table":
        out.print(
            Text(
                "no datasets kept yet: `python -m pipeline datasets import FILE` keeps one, and so does evaluating a "
                "file with `python -m pipeline eval FILE`"
            )
        )
        return 0
    emit(Report([Table(LIST_COLUMNS, rows)], payload=rows), fmt, out)
    return 0


LIST_COLUMNS = (
    Column("name"),
    Column("latest_version", "latest version", kind="count"),
    Column("versions", kind="count"),
    Column("items", kind="count"),
    Column("origin"),
    Column("created_at", "created", kind="time"),
)
VERSION_COLUMNS = (
    Column("version", kind="count"),
    Column("items", kind="count"),
    Column("origin"),
    Column("note"),
    Column("created_at", "created", kind="time"),
)
ITEM_COLUMNS = (
    Column("id"),
    Column("origin", show=lambda row: f"{row['origin']} ({row['kind']})" if row["kind"] else row["origin"]),
    Column("tags", show=lambda row: ", ".join(row["tags"])),
    Column("review"),
    Column("question", wide=True),
)
ITEM_FIELDS = ("id", "origin", "kind", "tags", "review", "question", "reference")


def _show(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, version = named(args.dataset)
    dataset = datasets.load(db, name, version)
    history = datasets.versions(db, dataset.name)
    versions = [
        {
            "version": v.version,
            "items": v.n_items,
            "origin": v.origin,
            "note": v.note,
            "created_at": v.created_at,
            "content_hash": v.content_hash,
        }
        for v in history
    ]
    payload = {
        "name": dataset.name,
        "version": dataset.version,
        "versions": versions,
        "items": [item.model_dump(mode="json") for item in dataset.items],
    }
    pending = len(datasets.pending_review(dataset))
    title = f"{dataset.name}@{dataset.version}: {plural(len(dataset.items), 'item')}" + (
        f", {pending} awaiting review" if pending else ""
    )
    items = Table(ITEM_COLUMNS, [_item_row(item) for item in dataset.items], title=title, fields=ITEM_FIELDS)
    report = Report([Table(VERSION_COLUMNS, versions, title=f"dataset {dataset.name}"), items], payload=payload)
    report.main = items  # csv: the items
    emit(report, chosen_format(args), out)
    return 0


def _item_row(item: GoldenItem) -> dict:
    return {
        "id": item.id,
        "origin": item.origin,
        "kind": item.provenance.get("kind"),  # a synthesised item's kind of question
        "tags": list(item.tags),
        "review": item.provenance.get("review") or "",
        "question": item.question,
        "reference": item.reference,
    }


def _import(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets
    from pipeline.evaluation.dataset import load_dataset

    dataset = load_dataset(args.file)
    for bad in dataset.bad_rows:
        err.print(Text(f"skipped line {bad.line}: {bad.reason}", style="yellow"))
    saved, existed = datasets.import_file(db, dataset, args.name)
    if not saved.created:
        out.print(Text(f"unchanged: same content as version {saved.version} of dataset {saved.name}"))
    elif existed:
        out.print(
            Text(
                f"dataset {saved.name} exists: saved as version {saved.version} ({plural(len(dataset.items), 'item')})"
            )
        )
    else:
        out.print(Text(f"saved dataset {saved.name}, version {saved.version} ({plural(len(dataset.items), 'item')})"))
    return 0


def _plain(value):
    """A field's value for JSON: given contexts as objects."""
    from pydantic import BaseModel

    if isinstance(value, list):
        return [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return value


def _brief(item: GoldenItem) -> dict:
    return {"id": item.id, "question": item.question}


def _diff(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, _ = named(args.name)
    before, after = datasets.load(db, name, args.a), datasets.load(db, name, args.b)
    change = datasets.diff(before, after)
    if args.json:
        payload = {
            "name": before.name,
            "from": before.version,
            "to": after.version,
            "added": [_brief(i) for i in change.added],
            "removed": [_brief(i) for i in change.removed],
            "changed": [
                {"item_id": c.item_id, "field": c.field, "before": _plain(c.before), "after": _plain(c.after)}
                for c in change.changed
            ],
        }
        out.print_json(json.dumps(payload, default=str))
        return 0
    out.print(
        Text(
            f"{before.name}: version {before.version} -> version {after.version}: {len(change.added)} added, "
            f"{len(change.removed)} removed, {plural(len(change.changed), 'field')} changed",
            style="bold",
        )
    )
    for item in change.added:
        out.print(Text(f"+ {item.id}: {item.question}", style="green"))
    for item in change.removed:
        out.print(Text(f"- {item.id}: {item.question}", style="red"))
    for c in change.changed:
        out.print(Text(f"~ {c.item_id} {c.field}: {_plain(c.before)!r} -> {_plain(c.after)!r}", style="yellow"))
    return 0


def _export(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, version = named(args.dataset)
    dataset = datasets.load(db, name, version)
    fmt = args.format or ("csv" if args.out and Path(args.out).suffix.lower() == ".csv" else "jsonl")
    text = datasets.export_text(dataset, fmt)
    if args.out is None:
        if out.is_terminal:  # shown, its control characters made visible (SafeConsole)
            out.print(Text(text.replace("\r\n", "\n")), end="", soft_wrap=True)
        else:  # piped: the bytes as written
            sys.stdout.write(text)
        return 0
    target = Path(args.out)
    if target.is_dir():
        raise InputError(f"{args.out!r} is a folder", fix="give a file name, e.g. golden.jsonl")
    if not target.resolve().parent.is_dir():
        raise InputError(f"the folder of {args.out!r} does not exist", fix="create it, or export somewhere else")
    target.write_text(text, encoding="utf-8", newline="")
    out.print(
        Text(f"exported {dataset.name}@{dataset.version} ({plural(len(dataset.items), 'item')}) to {args.out} ({fmt})")
    )
    return 0


def _saved(out: Console, saved: datasets.Saved, what: str) -> int:
    out.print(Text(f"{what}: saved dataset {saved.name}, version {saved.version}"))
    return 0


def _edit(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, version = named(args.name)
    changes = {
        key: value
        for key, value in (("question", args.question), ("reference", args.reference), ("tags", args.tags))
        if value is not None
    }
    if not changes:
        raise InputError(f"nothing to change in item {args.item_id!r}", fix="give --question, --reference or --tags")
    if "tags" in changes:
        changes["tags"] = [t.strip() for t in changes["tags"].split(",") if t.strip()]
    saved = datasets.edit_item(db, name, args.item_id, changes, version)
    return _saved(out, saved, f"edited {args.item_id} ({', '.join(changes)})")


def _accept(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, version = named(args.name)
    return _saved(out, datasets.accept_item(db, name, args.item_id, version), f"accepted {args.item_id}")


def _reject(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    name, version = named(args.name)
    return _saved(out, datasets.reject_item(db, name, args.item_id, version), f"rejected {args.item_id}")


def _add_run(args, db, out: Console, err: Console) -> int:
    from pipeline.evaluation import datasets

    saved = datasets.add_run(db, args.run_id, args.name)
    _saved(out, saved, f"added run {args.run_id}")
    out.print(
        Text(
            f"item run-{args.run_id} awaits review (its reference, if any, is the run's answer: a draft): "
            f"`python -m pipeline datasets accept {saved.name} run-{args.run_id}` keeps it as it is",
            style="dim",
        )
    )
    return 0


ACTIONS = {
    "list": _list,
    "show": _show,
    "import": _import,
    "diff": _diff,
    "export": _export,
    "edit": _edit,
    "accept": _accept,
    "reject": _reject,
    "add-run": _add_run,
}
