"""`sweep`: one evaluation per combination of a grid of settings over the same items, one progress bar across
combinations, then the leaderboard (pipeline/experiments/)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from pipeline.cli.fresh import add_fresh, fresh
from pipeline.cli.tables import Column, Report, Table, add_format, chosen_format, emit
from pipeline.errors import InputError, WorkbenchError
from pipeline.formatting import fmt_count, fmt_ms, fmt_pct, fmt_score
from pipeline.text import plural

if TYPE_CHECKING:
    from pipeline.experiments.leaderboard import Leaderboard

# pipeline.experiments.grid.ALTERNATIVE_SEPARATOR, named here so that `--help` imports no experiment (a test checks)
ALTERNATIVE_SEPARATOR = "|"


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
    add_format(sw, "the leaderboard (json: one object per combination; csv: one row per combination)")
    sw.add_argument("--list", action="store_true", help="list the sweeps in the store and exit")
    add_fresh(sw)
    sw.set_defaults(handler=cmd_sweep)


def cmd_sweep(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.output import evaluation_progress
    from pipeline.evaluation import datasets
    from pipeline.experiments import leaderboard, leaderboard_json, list_sweeps, run_sweep
    from pipeline.experiments.grid import combinations, parse_grid

    settings = fresh(settings, args)
    if args.list:
        sweeps = list_sweeps(db)
        if not sweeps and chosen_format(args) == "table":
            out.print(Text("no sweeps yet: `sweep DATASET --name NAME --grid SETTING=V1,V2`"))
            return 0
        emit(Report([Table(SWEEP_COLUMNS, sweeps)], payload=sweeps), chosen_format(args), out)
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
    emit(leaderboard_report(board, payload=leaderboard_json(board)), chosen_format(args), out)
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


def _mean_cell(metric: str):
    def show(row: dict) -> str:
        mean = row.get(f"{metric}_mean")
        if mean is None:
            return "–"
        text = fmt_score(mean)
        if row.get(f"{metric}_ci_low") is not None:
            text += f" [{fmt_score(row[f'{metric}_ci_low'])}, {fmt_score(row[f'{metric}_ci_high'])}]"
        if metric in row["best_for"]:
            text += " ★"
        verdict = row.get(f"{metric}_verdict")
        return text + {"better": " ↑", "worse": " ↓"}.get(verdict, "")

    return show


def _verdict_style(metric: str):
    return lambda row: {"better": "green", "worse": "red"}.get(row.get(f"{metric}_verdict"), "")


def _dash_or(fmt):
    return lambda value: "–" if value is None else fmt(value)


def board_row(row) -> dict:
    """A combination's figures, flat: each metric's mean, interval and verdict against the reference."""
    flat = {
        "combination": row.label,
        "status": row.status,
        "reference": row.is_reference,
        "evaluation": row.eval_name,
        "best_for": row.best_for,
        "items_done": row.items_done,
        "items_failed": row.items_failed,
        "latency_p50_ms": row.latency_p50_ms,
        "latency_p95_ms": row.latency_p95_ms,
        "calls": row.calls,
        "cache_hits": row.cache_hits,
        "replayed": row.replayed,
        "tokens": row.prompt_tokens + row.completion_tokens,
        "cost": row.cost,
        "pareto": row.pareto,
    }
    for metric, interval in row.metrics.items():
        flat |= {f"{metric}_mean": interval.mean, f"{metric}_ci_low": interval.low, f"{metric}_ci_high": interval.high}
    for metric, test in row.tests.items():
        flat[f"{metric}_verdict"] = test.verdict
    return flat


COST_COLUMNS = (
    Column("combination"),
    Column(
        "items_done",
        "items",
        show=lambda r: fmt_count(r["items_done"]) + (f" ({r['items_failed']} failed)" if r["items_failed"] else ""),
    ),
    Column("latency_p50_ms", "latency p50", show=lambda r: _dash_or(fmt_ms)(r["latency_p50_ms"])),
    Column("latency_p95_ms", "latency p95", show=lambda r: _dash_or(fmt_ms)(r["latency_p95_ms"])),
    Column("calls", kind="count"),
    Column(
        "cache_hits",
        "replayed",
        show=lambda r: fmt_count(r["cache_hits"]) + (f" ({fmt_pct(r['replayed'])})" if r["replayed"] else ""),
    ),
    Column("tokens", kind="count"),
    Column("cost", show=lambda r: "–" if r["cost"] is None else f"{r['cost']:,.4f}"),
    Column("pareto", "Pareto", show=lambda r: "yes" if r["pareto"] else ""),
)
COST_FIELDS = (
    "items_done",
    "items_failed",
    "latency_p50_ms",
    "latency_p95_ms",
    "calls",
    "cache_hits",
    "replayed",
    "tokens",
    "cost",
    "pareto",
)


def leaderboard_report(board: Leaderboard, payload=None) -> Report:
    report = Report(payload=payload)
    report.line(f"sweep {board.sweep} over {board.dataset}: {board.status}; reference {board.reference}", "bold")
    rows = [board_row(r) for r in board.rows]
    name = Column("combination", show=lambda r: r["combination"] + (" (reference)" if r["reference"] else ""))
    metrics = [Column(f"{m}_mean", m, show=_mean_cell(m), style=_verdict_style(m)) for m in board.metrics]
    fields = [
        "combination",
        "status",
        "reference",
        *(f"{m}_{part}" for m in board.metrics for part in ("mean", "ci_low", "ci_high", "verdict")),
        *COST_FIELDS,
    ]
    title = "metrics: mean [95% t interval]"
    report.add(Table((name, Column("status"), *metrics), rows, title=title, fields=fields), Table(COST_COLUMNS, rows))
    report.line("★ best mean of the metric; ↑ ↓ better or worse than the reference (Holm-adjusted)", "dim")
    significant = [t for r in board.rows for t in r.tests.values() if t.significant]
    report.line(
        f"{plural(board.n_tests, 'paired test')} against {board.reference}, "
        f"Holm-adjusted at alpha {board.alpha:g}: "
        + (f"{len(significant)} significant" if significant else "no significant difference")
    )
    for t in significant:
        report.line(
            f"  {t.label} · {t.metric}: {t.verdict}, change {t.delta:+.3f} [{t.ci_low:+.3f}, {t.ci_high:+.3f}], "
            f"adjusted p {t.p_adjusted:.3g}"
        )
    if board.quality_metric:
        report.line(f"Pareto front of {board.quality_metric} against p50 latency: {', '.join(board.pareto) or '–'}")
        report.line("latencies and costs are original: a replayed call counts what it cost when first computed")
    return report


SWEEP_COLUMNS = (
    Column("name"),
    Column(
        "dataset",
        show=lambda r: r["dataset"] if r["dataset_version"] is None else f"{r['dataset']}@{r['dataset_version']}",
    ),
    Column("n_items", "items", kind="count"),
    Column("combinations", kind="count"),
    Column("finished", kind="count"),
    Column("status"),
    Column("created_at", "started", kind="time"),
)
