"""What `gate`, `eval` and `runs` print, built once as a Report (pipeline/cli/tables.py) and rendered by --format."""

from __future__ import annotations

from dataclasses import asdict

from pipeline.cli.tables import Column, Report, Table, emit
from pipeline.evaluation.conversation_report import ConversationFigures, per_turn_rows, share_sentence
from pipeline.evaluation.registry import get_metric, scale_of
from pipeline.evaluation.regression import detectable as regression_detectable
from pipeline.evaluation.runner import EvalOutcome, EvalReport, weak_slices, what_it_measured, worst_items
from pipeline.formatting import NOT_AVAILABLE, fmt_change, fmt_count, fmt_ms, fmt_on_scale, fmt_pct, fmt_score
from pipeline.text import plural
from pipeline.verification.sentence_first import claims_label


def _blank_or(fmt, key: str, *args):
    """A cell that is empty where the row has no value (a test that was not run)."""
    return lambda row: "" if row.get(key) is None else fmt(row[key], *args)


# ---- gate ----

VERDICTS = {
    "floor": "BELOW FLOOR",
    "drop": "REGRESSION (drop)",
    "ok": "ok",
    "too_few": "too few items",
    "not_comparable": "not compared (prompt version)",
}
GATE_FIELDS = (
    "metric",
    "slice",
    "verdict",
    "kind",
    "baseline_value",
    "new_value",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "n",
    "regression",
    "below_floor",
    "primary",
)


def _change(value: float) -> str:
    """A change between two scores, signed, to three decimals: -0.150."""
    return fmt_change(value, lambda v: fmt_score(v, 3))


def _interval(row: dict) -> str:
    return "" if row["ci_low"] is None else f"[{_change(row['ci_low'])}, {_change(row['ci_high'])}]"


GATE_COLUMNS = (
    Column("metric"),
    Column("slice"),
    Column("baseline_value", "baseline", show=_blank_or(fmt_score, "baseline_value", 3)),
    Column("new_value", "new", show=_blank_or(fmt_score, "new_value", 3)),
    Column("delta", "change", show=_blank_or(_change, "delta")),
    Column("ci_low", "95% interval", show=_interval),
    Column("p_value", "p", show=_blank_or(fmt_score, "p_value", 4)),
    Column("p_adjusted", "Holm p", show=_blank_or(fmt_score, "p_adjusted", 4)),
    Column("n", show=lambda row: fmt_count(row["n"]) if row["n"] else ""),
    Column(
        "verdict",
        style=lambda row: "red" if row["regression"] else "yellow" if row["below_floor"] else "",
    ),
)


def gate_verdict(comparisons) -> str:
    regressions = [c for c in comparisons if c.regression]
    below = [c for c in comparisons if c.below_floor]
    if regressions:
        return plural(len(regressions), "regression")
    return f"no regression; {len(below)} below floor" if below else "no regression"


def gate_report(run, baseline, comparisons, payload=None) -> Report:
    """The gate's table (one row per metric x slice) and its verdict lines."""
    report = Report(payload=payload)
    report.line(f"{run.name} vs " + (baseline.name if baseline else "no baseline (floors only)"), "bold")
    rows = [{**asdict(c), "verdict": VERDICTS[c.kind]} for c in comparisons]
    report.add(Table(GATE_COLUMNS, rows, fields=GATE_FIELDS))
    regressions = [c for c in comparisons if c.regression]
    below = [c for c in comparisons if c.below_floor]
    family = max((c.family_size for c in comparisons), default=0)
    if family:
        primary = [c.metric for c in comparisons if c.primary]
        order = (
            f"primary {', '.join(primary)} first with 80% of alpha, the rest at 10% (90% once every "
            "primary is rejected; 10% held back)"
            if primary
            else "Holm at 90% of alpha, 10% held back"
        )
        report.line(
            f"drops: one-sided tests, {family} metric × slice tests under family-wise control (5%; {order}); "
            "floors are checked separately"
        )
        for line in regression_detectable(comparisons):
            report.line(line)
    report.line(
        plural(len(regressions), "regression") if regressions else "no regression",
        "red bold" if regressions else "green",
    )
    if below:
        report.line(f"{len(below)} below floor: " + ", ".join(c.metric for c in below), "yellow bold")
    return report


def print_gate(run, baseline, comparisons, out) -> None:
    """The gate as a table on the console (the pytest plugin shows it in a failed test)."""
    emit(gate_report(run, baseline, comparisons), "table", out)


# ---- runs ----


def _run_kind(column) -> str:
    """How a listed run column reads, from its declared format."""
    if column.name == "latency_ms":
        return "ms"
    return {".2f": "score", ".0%": "pct", ".4f": "cost", ".0f": "count", "%Y-%m-%d %H:%M": "time"}.get(
        column.fmt, "text"
    )


def runs_table(rows: list[dict], columns) -> Table:
    """The listed runs in the list's declared columns, long text last."""
    ordered = sorted(columns, key=lambda c: c.wide)
    shown = []
    for c in ordered:
        kind = _run_kind(c)
        label = c.label.removesuffix(" ms") if kind == "ms" else c.label
        show = None if kind != "text" else (lambda row, c=c: "" if row[c.name] is None else c.show(row[c.name]))
        shown.append(Column(c.name, label, kind=kind, show=show, wide=c.wide))
    return Table(shown, rows)


GROUP_COLUMNS = (
    Column("runs", kind="count"),
    Column("faithfulness", "mean faithfulness", kind="score"),
    Column("p50_latency_ms", "p50 latency", kind="ms"),
    Column("p95_latency_ms", "p95 latency", kind="ms"),
    Column("replayed", kind="pct"),
    Column("tokens", kind="count"),
    Column("tokens_per_run", "tokens per run", kind="count"),
    Column("cost", kind="cost"),
)


def groups_table(groups: list[dict], by: str) -> Table:
    """One row per group of runs, with its aggregates; n/a where there is none (no cost without prices)."""
    first = Column("group", by, show=lambda row: f"(no {by})" if row["group"] is None else str(row["group"]))
    return Table((first, *GROUP_COLUMNS), groups)


# ---- eval ----


def fmt_mean(value, metric: str) -> str:
    """A mean on its metric's scale, as the pages write it: 0.83, or 4.20 /5."""
    return fmt_on_scale(value, scale_of(metric))


METRIC_COLUMNS = (
    Column("metric"),
    Column("component"),
    Column("mean", show=lambda row: fmt_mean(row["mean"], row["metric"])),
    Column("n", kind="count"),
    Column("invalid", kind="count"),
    Column("not_applicable", "not applicable", kind="count"),
    Column("abstained", "of them abstained", kind="count"),
)


def metrics_table(result: EvalReport) -> Table:
    rows = []
    for row in result.metrics:
        metric = get_metric(row["metric"])
        component = metric.component if metric else "(not registered)"
        rows.append({**row, "component": component, "abstained": row.get("abstained") or 0})
    return Table(METRIC_COLUMNS, rows)


def eval_report(result: EvalReport, outcome: EvalOutcome, payload=None) -> Report:
    """The evaluation's metrics (its first table), then what it found, in lines and tables."""
    p = outcome.progress
    report = Report(payload=payload)
    report.line(
        f"evaluation {outcome.name!r} {outcome.status}: {fmt_count(p.finished - p.skipped)} items run now, "
        f"{fmt_count(p.skipped)} already done, {fmt_count(p.failed)} failed",
        "bold",
    )
    report.add(metrics_table(result))
    report.line(f"faithfulness counts {claims_label(result.eval_run.config)} (setting claim_granularity)")
    if result.cause is not None:
        report.line(f"since the baseline {result.baseline}: {result.cause.sentence}", "yellow")
    report.line(f"diagnosis: {result.diagnosis.sentence}")
    rate = result.judge_invalid_rate
    report.line(
        f"judge replies invalid after a retry: {fmt_count(result.judge_invalid)} of {fmt_count(result.judge_total)}"
        + (f" ({fmt_pct(rate, 1)})" if rate is not None else "")
    )
    errors, claims = result.extraction_errors
    share = result.extraction_error_rate
    report.line(
        f"claim extraction errors (not scored): {fmt_count(errors)} of {fmt_count(claims)}"
        + (f" ({fmt_pct(share, 1)})" if share else "")
    )
    usage = result.usage
    report.line(
        f"tokens: {fmt_count(usage['prompt_tokens'])} prompt + {fmt_count(usage['completion_tokens'])} completion; "
        f"model time {fmt_ms(usage['model_s'] * 1000)}; wall time {fmt_ms(result.eval_run.wall_s * 1000)}; "
        + what_it_measured(result)
    )
    if isinstance(outcome.regressions, str):
        report.line(f"not compared with a baseline: {outcome.regressions}", "yellow")
    for c in outcome.regressions if isinstance(outcome.regressions, list) else []:
        report.line(f"REGRESSION: {c.message}", "red")
    for c in outcome.below_floor:
        report.line(f"BELOW FLOOR: {c.message}", "yellow")
    for line in outcome.detectable:
        report.line(line)
    for tag, metric, mean in weak_slices(result)[:5]:
        worst = ", ".join(f"{r['item_id']} ({fmt_score(r[metric])})" for r in worst_items(result, tag, metric))
        report.line(f"weak slice {tag} on {metric}: {fmt_score(mean)}; worst: {worst}", "yellow")
    if result.judge_variance:
        judge_variance_blocks(result.judge_variance, report)
    if result.conversations is not None:
        conversation_blocks(result.conversations, report)
    return report


def conversation_blocks(figures: ConversationFigures, report: Report) -> None:
    """Per turn (each metric's mean by turn number, with how many turns were scored) and per conversation."""
    numbers, rows = per_turn_rows(figures)

    def turn_cell(n):
        def show(row):
            cell = row["turns"].get(n)
            return "" if cell is None else f"{fmt_mean(cell['mean'], row['metric'])} ({fmt_count(cell['n'])})"

        return show

    turns = [Column(f"turn_{n}", f"turn {n}", show=turn_cell(n)) for n in numbers]
    report.add(Table((Column("metric"), *turns), rows, title="Per turn (mean, n scored)"))
    columns = (
        Column("conversation"),
        Column("turns", kind="count"),
        Column("mean_faithfulness", "mean faithfulness", kind="score"),
        Column(
            "worst_turn",
            "worst turn",
            show=lambda c: (
                NOT_AVAILABLE
                if c["worst_turn"] is None
                else f"turn {c['worst_turn']} ({fmt_score(c['worst_faithfulness'])})"
            ),
        ),
        Column(
            "all_faithful",
            "every turn faithful",
            show=lambda c: "yes" if c["all_faithful"] else f"no ({c['faithful_turns']} of {c['turns']})",
        ),
    )
    report.add(Table(columns, figures.conversations, title="Per conversation"))
    report.line(share_sentence(figures))


def kappa_interval_text(v) -> str:
    """A self-agreement interval, or n/a with why it is withheld."""
    if v.kappa_low is not None:
        return f"[{fmt_score(v.kappa_low)}, {fmt_score(v.kappa_high)}]"
    why = v.why_not("kappa_low")
    return f"{NOT_AVAILABLE} ({why})" if why else NOT_AVAILABLE


def _items(row) -> str:
    extra = row["fewer_than_two"]
    return fmt_count(row["items"]) + (f" (+{extra} with < 2 valid)" if extra else "")


JUDGE_VARIANCE_COLUMNS = (
    Column("metric", "criterion"),
    Column("items", show=_items),
    Column("repeats", kind="count"),
    Column("changed_share", "changed", kind="pct"),
    Column("mean_sd", "mean SD", kind="score"),
    Column("pooled_sd", "pooled SD", kind="score"),
    Column("max_range", "max range", show=lambda r: NOT_AVAILABLE if r["max_range"] is None else f"{r['max_range']:g}"),
    Column("kappa", "self-agreement κ", kind="score"),
    Column("kappa_low", "95% interval", show=lambda r: r["interval"]),
    Column("invalid_repeats", "invalid repeats", kind="count"),
)


def judge_variance_blocks(variance: list, report: Report) -> None:
    """The judge's variance per criterion over its repeats, and the items it spread most on."""
    rows = [{**v.summary(), "interval": kappa_interval_text(v)} for v in variance]
    title = "judge variance (each item judged several times; the score is the mean of its valid repeats)"
    report.add(Table(JUDGE_VARIANCE_COLUMNS, rows, title=title))
    for v in variance:
        spread = sorted((s for s in v.per_item if s.range), key=lambda s: (-s.range, s.item_id))[:5]
        if spread:
            items = ", ".join(f"{s.item_id} ({', '.join(f'{x:g}' for x in s.values)})" for s in spread)
            report.line(f"{v.metric}: widest spread on {items}")
