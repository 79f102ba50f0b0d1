"""`runs`: list, group or export runs, filtered as on the Runs page."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.text import Text

from pipeline.cli.arguments import Later, positive_int
from pipeline.cli.tables import add_format, chosen_format
from pipeline.errors import InputError
from pipeline.text import plural


# The names --sort and --group-by accept, read from the store's declarations (store.history, which
# pipeline.history.runs re-exports) only when a value is checked or `runs --help` prints them: pipeline.history
# would load the answering engine and LlamaIndex with them.
def _column_names() -> list[str]:
    from store.history import listed_columns

    return [c.name for c in listed_columns()]


def _group_names() -> list[str]:
    from store.history import GROUPS

    return list(GROUPS)


def register(sub) -> None:
    runs = sub.add_parser("runs", help="list runs, newest first, filtered as on the Runs page; or export them")
    runs.add_argument("--status", action="append", help="only runs with this status (accepted, flagged...); repeatable")
    runs.add_argument(
        "--kind", action="append", help="only runs of this kind (chat, eval, imported, traced); repeatable"
    )
    runs.add_argument(
        "--pipeline",
        action="append",
        metavar="NAME",
        help="only runs of this pipeline or service (an imported run's pipeline, a traced run's OpenTelemetry "
        "service name); repeatable",
    )
    runs.add_argument("--model", action="append", help="only runs answered by this generator model; repeatable")
    runs.add_argument("--tag", action="append", help="only evaluation runs of items with this tag; repeatable")
    runs.add_argument("--since", type=_date, help="only runs started on or after this date (YYYY-MM-DD)")
    runs.add_argument("--until", type=_date, help="only runs started before this date (YYYY-MM-DD)")
    runs.add_argument("--min-faithfulness", type=_share, help="only runs with at least this faithfulness (0-1)")
    runs.add_argument("--max-faithfulness", type=_share, help="only runs with at most this faithfulness (0-1)")
    runs.add_argument("--text", default="", help="only runs whose question or answer contains this text")
    runs.add_argument(
        "--evaluation", action="append", metavar="NAME", help="only runs of this evaluation's items; repeatable"
    )
    runs.add_argument(
        "--conversation",
        action="append",
        metavar="NAME",
        help="only the turns of this conversation (a chat's, `ask --conversation`'s); repeatable",
    )
    runs.add_argument("--min-latency-ms", type=_non_negative, help="only runs that took at least this long (ms)")
    runs.add_argument("--max-latency-ms", type=_non_negative, help="only runs that took at most this long (ms)")
    runs.add_argument(
        "--min-tokens", type=_non_negative, help="only runs whose model calls used at least this many tokens"
    )
    runs.add_argument(
        "--max-tokens", type=_non_negative, help="only runs whose model calls used at most this many tokens"
    )
    runs.add_argument(
        "--min-cost", type=_non_negative, help="only runs that cost at least this much (needs price_per_1k_* set)"
    )
    runs.add_argument(
        "--max-cost", type=_non_negative, help="only runs that cost at most this much (needs price_per_1k_* set)"
    )
    runs.add_argument(
        "--sort",
        choices=Later(_column_names),
        metavar="COLUMN",
        default="id",
        help="list the runs by this column, largest first: %(choices)s (default: id, the newest first)",
    )
    runs.add_argument("--ascending", action="store_true", help="with --sort: smallest first")
    runs.add_argument(
        "--group-by",
        choices=Later(_group_names),
        metavar="GROUP",
        help="instead of the runs, one row per %(choices)s: runs, mean faithfulness, p50/p95 latency, tokens, cost",
    )
    runs.add_argument("--limit", type=positive_int, default=20, help="show at most this many runs (at least 1)")
    add_format(runs, "the runs (or groups)")
    runs.add_argument(
        "--export", metavar="FILE", help="write every matching run (unpaged) to FILE: .csv, .parquet or .jsonl"
    )
    runs.set_defaults(handler=cmd_runs)


def _date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date: write it as YYYY-MM-DD") from None


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give a share between 0 and 1") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: give a share between 0 and 1, e.g. 0.8")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give 0 or more") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} is out of range: give 0 or more")
    return value


def runs_filter(args, settings):
    from pipeline.history.runs import RunFilter
    from pipeline.history.views import prices

    return RunFilter(
        since=args.since,
        until=args.until,
        kinds=args.kind or [],
        statuses=args.status or [],
        faithfulness_min=args.min_faithfulness,
        faithfulness_max=args.max_faithfulness,
        models=args.model or [],
        tags=args.tag or [],
        text=args.text,
        pipelines=args.pipeline or [],
        evaluations=args.evaluation or [],
        conversations=args.conversation or [],
        latency_min_ms=args.min_latency_ms,
        latency_max_ms=args.max_latency_ms,
        tokens_min=args.min_tokens,
        tokens_max=args.max_tokens,
        cost_min=args.min_cost,
        cost_max=args.max_cost,
        prices=prices(settings),
    )


EXPORT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl"}


def export_to(db, run_filter, target: str, out: Console) -> int:
    from pipeline.history.runs import export_runs

    fmt = EXPORT_FORMATS.get(Path(target).suffix.lower())
    if fmt is None:
        raise InputError(
            f"cannot tell the export format of {target!r} from its extension",
            fix="name the file .csv, .parquet or .jsonl",
        )
    if not Path(target).resolve().parent.is_dir():
        raise InputError(f"the folder of {target!r} does not exist", fix="create it, or export somewhere else")
    n = export_runs(db, run_filter, fmt, target)
    out.print(Text(f"exported {plural(n, 'run')} to {target} ({fmt})"))
    return 0


def cmd_runs(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.reports import groups_table, runs_table
    from pipeline.cli.tables import Report, emit
    from pipeline.history.runs import group_runs, list_runs, listed_columns

    run_filter = runs_filter(args, settings)
    if (args.min_cost is not None or args.max_cost is not None) and not any(run_filter.prices):
        raise InputError(
            "runs have no cost without prices",
            fix="set price_per_1k_prompt_tokens and price_per_1k_completion_tokens (WORKBENCH_PRICE_PER_1K_...)",
        )
    if args.export:
        return export_to(db, run_filter, args.export, out)
    if args.group_by:
        groups = group_runs(db, run_filter, args.group_by)
        emit(Report([groups_table(groups, args.group_by)], payload=groups), chosen_format(args), out)
        return 0
    rows = list_runs(db, run_filter, args.limit, args.sort, not args.ascending)
    emit(Report([runs_table(rows, listed_columns())], payload=rows), chosen_format(args), out)
    return 0
