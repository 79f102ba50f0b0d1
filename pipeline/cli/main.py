"""Command line: one module of pipeline/cli/ per command (ask, ingest, doctor, eval, runs, show, gate,
export-parquet, snapshot, collect, datasets, synth, sweep, bench-detector, align), each registering its own
subparser and handler (`register(sub)`); this module builds the parser from them and runs the chosen handler.

Exit 0 on success, 1 when the work failed (or a regression was found), 2 on bad usage or input; `gate` exits 3
when the run is below a floor and has no regression; `ask` exits 4 when its answer was printed but could be kept
neither in the store nor in the journal (NOT_KEPT)."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from pipeline.cli.terminal import SafeConsole
from pipeline.errors import InputError, WorkbenchError
from pipeline.text import plural

# The modules of pipeline/cli/ that each register one command (its name, arguments and handler), in the order
# `--help` lists them.
COMMAND_MODULES = (
    "ask",
    "ingest",
    "doctor",
    "evaluate",
    "runs",
    "show",
    "gate",
    "export_parquet",
    "snapshot",
    "collect",
    "datasets",
    "synth",
    "sweep",
    "bench_detector",
    "align",
)


# Building the parser imports only the command modules, which import the workbench inside their handlers: `--help`
# answers without loading models, the store or LlamaIndex (tests/test_cli_help.py checks).
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=program_name(), description="RAG quality workbench")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        importlib.import_module(f"pipeline.cli.{module}").register(sub)
    return parser


def program_name() -> str:
    """`workbench` when started by the installed console command, else `python -m pipeline`."""
    return "workbench" if Path(sys.argv[0]).name == "workbench" else "python -m pipeline"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pipeline.session import open_workbench  # only now: `--help` has already answered

    out, err = SafeConsole(), SafeConsole(stderr=True)  # stored text cannot send escape sequences
    db = None
    try:
        settings, db = open_workbench()
        return args.handler(args, settings, db, out, err)
    except InputError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return 2
    except WorkbenchError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return 1
    finally:
        if db is not None:
            finish_store(db, err)


def finish_store(db, err: Console) -> None:
    """When a command ends: fold the write-ahead log into the file (a copied store file is then complete)
    and say how many journal entries were saved."""
    try:
        db.checkpoint()
    except WorkbenchError:
        pass  # the store is locked, read-only or damaged: nothing of ours is in its write-ahead log
    if db.replayed:
        err.print(Text(f"saved {plural(db.replayed, 'result')} kept in the journal into the store", style="dim"))
