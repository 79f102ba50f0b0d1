"""`synth`: write a golden set from the knowledge base, with a progress bar of what it costs, and report what each
gate dropped and what was kept."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from pipeline.cli.arguments import positive_int
from pipeline.errors import WorkbenchError
from pipeline.text import plural

if TYPE_CHECKING:
    from pipeline.evaluation.synth import SynthReport


# pipeline.evaluation.synth.kinds.default_shares_text(), written here so that `--help` imports no synth (a test checks)
DEFAULT_SHARES_TEXT = "fact=0.3,multi_hop=0.2,numeric=0.15,comparison=0.1,negative=0.15,false_premise=0.1"


def register(sub) -> None:
    synth = sub.add_parser(
        "synth",
        help="write a golden set from the knowledge base: questions of several kinds, each checked by quality gates "
        "before it is kept, saved as the next version of a dataset",
    )
    synth.add_argument(
        "--name", required=True, help="the dataset to save the kept questions as; the same name resumes a killed job"
    )
    synth.add_argument("--n", type=positive_int, default=50, help="candidate questions to write (default 50)")
    synth.add_argument(
        "--kinds",
        default=None,
        help=f"kind=share pairs, comma-separated (default {DEFAULT_SHARES_TEXT})",
    )
    synth.add_argument("--seed", type=int, default=0, help="which chunks are sampled (default 0)")
    synth.add_argument("--json", action="store_true", help="print the counts, the dataset's name and version as JSON")
    synth.set_defaults(handler=cmd_synth)


@contextmanager
def synth_progress(console: Console):
    columns = (
        TextColumn("synthesising"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[kept]} kept"),
        TextColumn("{task.fields[calls]:,} calls"),
        TextColumn("{task.fields[tokens]:,} prompt tokens"),
        TextColumn("{task.fields[hits]:,} cache hits"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = None

        def update(state) -> None:
            nonlocal task
            if task is None:
                for note in state.notes:
                    console.print(Text(note, style="dim"))
                task = bar.add_task("synth", total=state.total, kept=0, calls=0, tokens=0, hits=0)
            bar.update(
                task,
                completed=state.written,
                kept=state.kept,
                calls=state.calls,
                tokens=state.prompt_tokens,
                hits=state.cache_hits,
            )

        yield update


def cmd_synth(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.evaluation.synth import parse_shares, run_synth

    shares = parse_shares(args.kinds)
    with synth_progress(err) as on_progress:
        try:
            result = run_synth(settings, db, args.name, args.n, shares, args.seed, progress=on_progress)
        except KeyboardInterrupt:
            err.print(Text(f"cancelled: the candidates written are kept; run the same command to resume {args.name!r}"))
            _exit_now(db, 130)
    if args.json:
        out.print_json(json.dumps(report_json(result), default=str))
    else:
        print_synth(result, out)
    return 0 if result.version is not None else 1


def report_json(result: SynthReport) -> dict:
    data = result.as_json()
    data["dataset"] = f"dataset:{result.name}@{result.version}" if result.version is not None else None
    return data


def print_synth(result: SynthReport, out: Console) -> None:
    from pipeline.evaluation.synth.gates import GATES
    from pipeline.evaluation.synth.kinds import KIND_TEXT

    for note in result.notes:
        out.print(Text(note, style="dim"))
    rewritten = f", {result.rewritten} of them rewritten" if result.rewritten else ""
    out.print(
        Text(
            f"{plural(result.written, 'candidate')} written: {result.kept} kept{rewritten}, {result.dropped} dropped",
            style="bold",
        )
    )
    kinds = Table("kind", "asked", "kept", title="kept per kind")
    for kind, asked in result.requested.items():
        kinds.add_row(Text(KIND_TEXT.get(kind, kind)), str(asked), str(result.kept_per_kind.get(kind, 0)))
    out.print(kinds)
    if result.drops:
        gates = Table("gate", "dropped", "what it drops", title="dropped per gate")
        for gate, count in result.dropped_per_gate.items():
            gates.add_row(Text(gate), str(count), Text(GATES.get(gate, "")))
        out.print(gates)
        drops = Table("#", "kind", "gate", "question", "reason", title="dropped candidates", show_lines=True)
        for drop in result.drops:
            drops.add_row(
                str(drop.position + 1), Text(drop.kind), Text(drop.gate), Text(drop.question or ""), Text(drop.reason)
            )
        out.print(drops)
    hits = f" and {result.cache_hits:,} answered from the response cache" if result.cache_hits else ""
    out.print(
        Text(
            f"cost: {plural(result.calls, 'model call')}{hits}, {result.prompt_tokens:,} prompt tokens, "
            f"{result.completion_tokens:,} completion tokens"
        )
    )
    if result.version is not None:
        out.print(
            Text(
                f"saved as dataset {result.name!r} version {result.version}; evaluate it with "
                f"`python -m pipeline eval dataset:{result.name} --name NAME`"
            )
        )
    else:
        out.print(Text("no question was kept: no dataset version was saved", style="yellow"))


def _exit_now(db, code: int) -> None:
    """Leave at once: candidates still waiting on a model call are dropped (they are written again on resume);
    those stored are committed."""
    try:
        db.checkpoint()
    except WorkbenchError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
