"""`sweep`: one evaluation per combination of a grid of settings over the same items, one progress bar across
combinations, then the leaderboard (pipeline/experiments/)."""

from __future__ import annotations

import json
import os
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.cli.fresh import add_fresh, fresh
from pipeline.cli.output import evaluation_progress
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation import datasets
from pipeline.experiments import leaderboard, leaderboard_json, list_sweeps, run_sweep
from pipeline.experiments.grid import ALTERNATIVE_SEPARATOR, combinations, parse_grid
from pipeline.experiments.leaderboard import Leaderboard
from pipeline.text import plural


def register(sub) -> None:
    sw = sub.add_parser(
        "sweep",
        help="run one evaluation per combination of a grid of settings over the same items, then rank them: "
        "intervals, cost, latency, paired tests against a reference (Holm), the Pareto front",
    )
    sw.add_argument(
        "dataset",
        nargs="?",
        help="a golden set file (e.g. data/eval/golden.jsonl, kept as a version of the dataset named after it) or "
        "dataset:NAME[@VERSION]",
    )
    sw.add_argument("--name", help="the sweep's name; the same command again continues it")
    sw.add_argument(
        "--grid",
        action="append",
        metavar="SETTING=V1,V2",
        help="a setting and its values, e.g. --grid top_k=3,5,8; repeat for more settings (every combination runs); "
        f"values that hold commas are separated with '{ALTERNATIVE_SEPARATOR}'",
    )
    sw.add_argument(
        "--reference",
        default=None,
        help="the combination every other is tested against, as its label (top_k=3,chunk_size=256) or evaluation "
        "name (default: the first combination)",
    )
    sw.add_argument(
        "--quality",
        default=None,
        metavar="METRIC",
        help="the metric of the Pareto front against latency (default: the first primary metric)",
    )
    sw.add_argument("--limit", type=int, default=None, help="only the first N items")
    sw.add_argument("--tags", nargs="+", default=None, help="only items with any of these tags")
    sw.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metrics to measure (default: every metric; a continued sweep keeps its own)",
    )
    sw.add_argument("--concurrency", type=int, default=None, help="items at once (default: setting eval_concurrency)")
    sw.add_argument("--json", action="store_true", help="print the leaderboard as JSON: one object per combination")
    sw.add_argument("--list", action="store_true", help="list the sweeps in the store and exit")
    add_fresh(sw)
    sw.set_defaults(handler=cmd_sweep)


def cmd_sweep(args, settings, db, out: Console, err: Console) -> int:
    settings = fresh(settings, args)
    if args.list:
        print_sweeps(list_sweeps(db), out)
        return 0
    if not args.dataset or not args.name or not args.grid:
        raise InputError(
            "a sweep needs a dataset, a --name and at least one --grid",
            fix="e.g. `sweep data/eval/golden.jsonl --name chunking --grid chunk_size=256,512 --grid top_k=3,5`",
        )
    combinations(parse_grid(args.grid), settings)  # a bad grid is refused before the dataset is kept as a version
    dataset = datasets.resolve(db, args.dataset).select(args.limit, args.tags)
    for bad in dataset.bad_rows:
        err.print(Text(f"skipped line {bad.line}: {bad.reason}", style="yellow"))
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics is not None else None
    concurrency = args.concurrency or settings.eval_concurrency
    with evaluation_progress(err, "sweeping", current=True) as on_progress:
        try:
            outcome = run_sweep(
                settings,
                db,
                dataset,
                args.name,
                args.grid,
                reference=args.reference,
                metrics=metrics,
                concurrency=concurrency,
                on_progress=on_progress,
            )
        except KeyboardInterrupt:
            err.print(Text(f"cancelled: finished items are kept; run the same command to continue {args.name!r}"))
            _exit_now(db, 130)
    for label in outcome.skipped:
        err.print(Text(f"{label}: finished before, not run again", style="dim"))
    for index in outcome.indexes.values():
        how = f"built ({plural(index.built, 'document')} ingested)" if index.built else "reused"
        err.print(Text(f"index {index.fingerprint}: {how}, {plural(len(index.ids), 'chunk')}, {index.path}", "dim"))
    board = leaderboard(settings, db, outcome.name, args.reference, args.quality)
    if args.json:
        out.print_json(json.dumps(leaderboard_json(board), default=str))
    else:
        print_leaderboard(board, out)
    failed = sum(o.progress.failed for o in outcome.ran.values())
    if failed:
        err.print(Text(f"{plural(failed, 'item')} failed; run the same command to retry them", style="red"))
    return 0 if outcome.status == "finished" else 1


def _exit_now(db, code: int) -> None:
    try:
        db.checkpoint()
    except WorkbenchError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _num(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cell(board: Leaderboard, row, metric: str) -> Text:
    interval = row.metrics.get(metric)
    if interval is None or interval.mean is None:
        return Text("–")
    text = _num(interval.mean)
    if interval.low is not None:
        text += f" [{_num(interval.low)}, {_num(interval.high)}]"
    cell = Text(text)
    if metric in row.best_for:
        cell.append(" ★", style="bold")
    test = row.tests.get(metric)
    if test is not None and test.verdict in ("better", "worse"):
        cell.append(" ↑" if test.verdict == "better" else " ↓", style="green" if test.verdict == "better" else "red")
    return cell


def print_leaderboard(board: Leaderboard, out: Console) -> None:
    out.print(
        Text(f"sweep {board.sweep} over {board.dataset}: {board.status}; reference {board.reference}", style="bold")
    )
    table = Table("combination", "status", *board.metrics, title="metrics: mean [95% t interval]", show_lines=False)
    for row in board.rows:
        name = Text(row.label + (" (reference)" if row.is_reference else ""))
        table.add_row(name, Text(row.status), *(_cell(board, row, m) for m in board.metrics))
    out.print(table)
    costs = Table("combination", "items", "latency p50", "latency p95", "calls", "replayed", "tokens", "cost", "Pareto")
    for row in board.rows:
        costs.add_row(
            Text(row.label),
            f"{row.items_done}" + (f" ({row.items_failed} failed)" if row.items_failed else ""),
            "–" if row.latency_p50_ms is None else f"{row.latency_p50_ms:,.0f} ms",
            "–" if row.latency_p95_ms is None else f"{row.latency_p95_ms:,.0f} ms",
            f"{row.calls:,}",
            f"{row.cache_hits:,}" + (f" ({row.replayed:.0%})" if row.replayed else ""),
            f"{row.prompt_tokens + row.completion_tokens:,}",
            "–" if row.cost is None else f"{row.cost:,.4f}",
            "yes" if row.pareto else "",
        )
    out.print(costs)
    out.print(Text("★ best mean of the metric; ↑ ↓ better or worse than the reference (Holm-adjusted)", style="dim"))
    significant = [t for r in board.rows for t in r.tests.values() if t.significant]
    out.print(
        Text(
            f"{plural(board.n_tests, 'paired test')} against {board.reference}, "
            f"Holm-adjusted at alpha {board.alpha:g}: "
            + (f"{len(significant)} significant" if significant else "no significant difference")
        )
    )
    for t in significant:
        out.print(
            Text(
                f"  {t.label} · {t.metric}: {t.verdict}, change {t.delta:+.3f} [{t.ci_low:+.3f}, {t.ci_high:+.3f}], "
                f"adjusted p {t.p_adjusted:.3g}"
            )
        )
    if board.quality_metric:
        out.print(Text(f"Pareto front of {board.quality_metric} against p50 latency: {', '.join(board.pareto) or '–'}"))
        out.print(Text("latencies and costs are original: a replayed call counts what it cost when first computed"))


def print_sweeps(rows: list[dict], out: Console) -> None:
    if not rows:
        out.print(Text("no sweeps yet: `sweep DATASET --name NAME --grid SETTING=V1,V2`"))
        return
    table = Table("name", "dataset", "items", "combinations", "finished", "status", "started")
    for r in rows:
        label = r["dataset"] if r["dataset_version"] is None else f"{r['dataset']}@{r['dataset_version']}"
        table.add_row(
            Text(r["name"]),
            Text(label),
            str(r["n_items"]),
            str(r["combinations"]),
            str(r["finished"]),
            Text(r["status"]),
            str(r["created_at"])[:19],
        )
    out.print(table)
