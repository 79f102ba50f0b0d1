"""Terminal output of evaluations, detector benchmarks and the list of runs: progress bars and tables."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import asdict

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from pipeline.answering.events import (
    Abstained,
    AnswerResult,
    Budgeted,
    ClaimsUnextracted,
    Decided,
    Discarded,
    Event,
    Finished,
    Generated,
    Graded,
    OnTopicChecked,
    Planned,
    Retrieved,
    Retrying,
    Rewritten,
    RunFailed,
    Scored,
    SentenceChecked,
    StandaloneQuestion,
    Token,
    Trimmed,
    UnhandledEvent,
    VerdictSettled,
)
from pipeline.evaluation.conversation_report import ConversationFigures, per_turn_rows, share_sentence
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.registry import UNIT, get_metric, scale_of
from pipeline.evaluation.regression import detectable as regression_detectable
from pipeline.evaluation.runner import EvalOutcome, EvalReport, weak_slices, what_it_measured, worst_items
from pipeline.history.runs import listed_columns
from pipeline.text import plural
from pipeline.verification.sentence_first import claims_label


def print_mapping(dataset: Dataset, err: Console) -> None:
    """How the file's columns were read (and, for given answers, that they are scored as given)."""
    mapping = dataset.mapping
    if mapping is None:
        return
    what = "answers scored as given (no retrieval, no generation)" if dataset.given_answers else "a golden set"
    err.print(Text(f"{dataset.name}: {mapping.convention} columns, {what}", style="dim"))
    for name, column in mapping.describe():
        err.print(Text(f"  {name:<9} <- {column}", style="dim"))
    for note in mapping.notes:
        err.print(Text(f"  note: {note}", style="dim"))
    if mapping.unused:
        err.print(Text(f"  not read: {', '.join(mapping.unused)}", style="dim"))


def positive_int(text: str) -> int:
    """An argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: give 1 or more")
    return value


@contextmanager
def evaluation_progress(console: Console, label: str = "evaluating", current: bool = False):
    """A bar of items finished of all (progress.finished, .total, .failed); `current`: also what runs now
    (progress.current, a sweep's combination)."""
    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[failed]} failed"),
        *([TextColumn("{task.fields[current]}")] if current else []),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = None

        def update(progress) -> None:
            nonlocal task
            now = {"current": progress.current} if current else {}
            if task is None:
                task = bar.add_task(label, total=progress.total, failed=0, **now)
            bar.update(task, completed=progress.finished, failed=progress.failed, **now)

        yield update


def follow_answer(events: Iterable[Event], err: Console, quiet: bool = False) -> AnswerResult | None:
    """Show a question's steps as they happen and the answer's text as it streams (on one line, not a line per
    piece); steps that come in while the answer streams (its sentences' verdicts) are shown after it."""
    result, streaming, held = None, False, []
    for event in events:
        match event:
            case Finished():
                result = event.result
            case _ if quiet:
                continue
            case Token():
                err.print(Text(event.delta, style="dim italic"), end="")
                streaming = True
            case Generated() | Discarded() | RunFailed():  # the streamed text ends: its line is closed first
                if streaming:
                    err.print()
                    streaming = False
                held = _print_steps([*held, event], err)
            case (
                StandaloneQuestion()
                | Retrieved()
                | Planned()
                | Graded()
                | Budgeted()
                | SentenceChecked()
                | VerdictSettled()
                | ClaimsUnextracted()
                | Scored()
                | OnTopicChecked()
                | Trimmed()
                | Retrying()
                | Rewritten()
                | Decided()
                | Abstained()
            ):
                held = [*held, event] if streaming else _print_steps([*held, event], err)
            case _:
                raise UnhandledEvent(event, "`ask`")
    if streaming:
        err.print()
    for step in held:
        _print_step(step, err)
    return result


def print_runs(rows: list[dict], out: Console) -> None:
    """The listed runs in the list's declared columns; long text last, cut to 80 characters."""
    columns = sorted(listed_columns(), key=lambda c: c.wide)
    table = Table(*(c.label for c in columns))
    for row in rows:
        table.add_row(*(Text(c.show(row[c.name])[: 80 if c.wide else None]) for c in columns))
    out.print(table)


# a group's aggregates (store.history.group_runs) in the terminal: key, heading, format
GROUP_COLUMNS = (
    ("runs", "runs", ","),
    ("faithfulness", "mean faithfulness", ".2f"),
    ("p50_latency_ms", "p50 latency ms", ".0f"),
    ("p95_latency_ms", "p95 latency ms", ".0f"),
    ("replayed", "replayed", ".0%"),
    ("tokens", "tokens", ",.0f"),
    ("tokens_per_run", "tokens per run", ",.0f"),
    ("cost", "cost", ".4f"),
)


def print_groups(groups: list[dict], by: str, out: Console) -> None:
    """One row per group of runs, with its aggregates; n/a where there is none (no cost without prices)."""
    table = Table(by, *(label for _, label, _ in GROUP_COLUMNS))
    for group in groups:
        cells = ["n/a" if group[key] is None else format(group[key], fmt) for key, _, fmt in GROUP_COLUMNS]
        table.add_row(Text(f"(no {by})" if group["group"] is None else str(group["group"])), *cells)
    out.print(table)


def _print_steps(steps: list[Event], err: Console) -> list[Event]:
    """Each step printed; none is left held."""
    for step in steps:
        _print_step(step, err)
    return []


def _print_step(event: Event, err: Console) -> None:
    """One line per step; a sentence's verdicts one line per claim."""
    claims = event.claims if isinstance(event, SentenceChecked) else None
    for line in [f"claim {c.claim_no}: {c.verdict}" for c in claims] if claims else [event.message]:
        err.print(Text(f"· {line}", style="dim"))


def _fmt(value, metric: str) -> str:
    """A mean on its metric's scale: 0.83, or 4.20 / 5."""
    if value is None:
        return "n/a"
    scale = scale_of(metric)
    return f"{value:.2f}" + ("" if scale == UNIT else f" / {scale[1]:g}")


def print_report(result: EvalReport, outcome: EvalOutcome, out: Console) -> None:
    p = outcome.progress
    out.print(
        Text(
            f"evaluation {outcome.name!r} {outcome.status}: {p.finished - p.skipped} items run now, "
            f"{p.skipped} already done, {p.failed} failed",
            style="bold",
        )
    )
    table = Table("metric", "component", "mean", "n", "invalid", "not applicable", "of them abstained")
    for row in result.metrics:
        metric = get_metric(row["metric"])
        table.add_row(
            row["metric"],
            metric.component if metric else "(not registered)",
            _fmt(row["mean"], row["metric"]),
            str(row["n"]),
            str(row["invalid"]),
            str(row["not_applicable"]),
            str(row.get("abstained") or 0),
        )
    out.print(table)
    out.print(Text(f"faithfulness counts {claims_label(result.eval_run.config)} (setting claim_granularity)"))
    if result.cause is not None:
        out.print(Text(f"since the baseline {result.baseline}: {result.cause.sentence}", style="yellow"))
    out.print(Text(f"diagnosis: {result.diagnosis.sentence}"))
    rate = result.judge_invalid_rate
    usage = result.usage
    out.print(
        Text(
            f"judge replies invalid after a retry: {result.judge_invalid} of {result.judge_total}"
            + (f" ({rate:.1%})" if rate is not None else "")
        )
    )
    errors, claims = result.extraction_errors
    share = result.extraction_error_rate
    out.print(
        Text(f"claim extraction errors (not scored): {errors} of {claims}" + (f" ({share:.1%})" if share else ""))
    )
    out.print(
        Text(
            f"tokens: {usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion; "
            f"model time {usage['model_s']:.1f} s; wall time {result.eval_run.wall_s:.1f} s; "
            + what_it_measured(result)
        )
    )
    if isinstance(outcome.regressions, str):
        out.print(Text(f"not compared with a baseline: {outcome.regressions}", style="yellow"))
    for c in outcome.regressions if isinstance(outcome.regressions, list) else []:
        out.print(Text(f"REGRESSION: {c.message}", style="red"))
    for c in outcome.below_floor:
        out.print(Text(f"BELOW FLOOR: {c.message}", style="yellow"))
    for line in outcome.detectable:
        out.print(Text(line))
    for tag, metric, mean in weak_slices(result)[:5]:
        worst = ", ".join(f"{r['item_id']} ({r[metric]:.2f})" for r in worst_items(result, tag, metric))
        out.print(Text(f"weak slice {tag} on {metric}: {mean:.2f}; worst: {worst}", style="yellow"))
    if result.judge_variance:
        print_judge_variance(result.judge_variance, out)
    if result.conversations is not None:
        print_conversations(result.conversations, out)


def print_conversations(figures: ConversationFigures, out: Console) -> None:
    """Per turn (each metric's mean by turn number, with how many turns were scored) and per conversation."""
    numbers, rows = per_turn_rows(figures)
    table = Table("metric", *(f"turn {n}" for n in numbers), title="Per turn (mean, n scored)")
    for row in rows:
        cells = [row["turns"].get(n) for n in numbers]
        table.add_row(
            row["metric"], *("" if c is None else f"{_fmt(c['mean'], row['metric'])} ({c['n']})" for c in cells)
        )
    out.print(table)
    table = Table(
        "conversation", "turns", "mean faithfulness", "worst turn", "every turn faithful", title="Per conversation"
    )
    for c in figures.conversations:
        worst = "n/a" if c["worst_turn"] is None else f"turn {c['worst_turn']} ({c['worst_faithfulness']:.2f})"
        table.add_row(
            c["conversation"],
            str(c["turns"]),
            _figure(c["mean_faithfulness"]),
            worst,
            "yes" if c["all_faithful"] else f"no ({c['faithful_turns']} of {c['turns']})",
        )
    out.print(table)
    out.print(Text(share_sentence(figures)))


def _figure(value, fmt: str = ".2f") -> str:
    return "n/a" if value is None else format(value, fmt)


def kappa_interval_text(v) -> str:
    """A self-agreement interval, or n/a with why it is withheld."""
    if v.kappa_low is not None:
        return f"[{v.kappa_low:.2f}, {v.kappa_high:.2f}]"
    why = v.why_not("kappa_low")
    return f"n/a ({why})" if why else "n/a"


def print_judge_variance(variance: list, out: Console) -> None:
    """The judge's variance per criterion over its repeats (judge_variance.py), and the items it spread most on."""
    table = Table(
        "criterion",
        "items",
        "repeats",
        "changed",
        "mean SD",
        "pooled SD",
        "max range",
        "self-agreement κ",
        "95% interval",
        "invalid repeats",
        title="judge variance (each item judged several times; the score is the mean of its valid repeats)",
    )
    for v in variance:
        table.add_row(
            v.metric,
            str(v.items) + (f" (+{v.fewer_than_two} with < 2 valid)" if v.fewer_than_two else ""),
            str(v.repeats),
            "n/a" if v.changed_share is None else f"{v.changed_share:.0%}",
            _figure(v.mean_sd),
            _figure(v.pooled_sd),
            _figure(v.max_range, "g"),
            _figure(v.kappa),
            kappa_interval_text(v),
            str(v.invalid_repeats),
        )
    out.print(table)
    for v in variance:
        spread = sorted((s for s in v.per_item if s.range), key=lambda s: (-s.range, s.item_id))[:5]
        if spread:
            items = ", ".join(f"{s.item_id} ({', '.join(f'{x:g}' for x in s.values)})" for s in spread)
            out.print(Text(f"{v.metric}: widest spread on {items}"))


def report_json(result: EvalReport, outcome: EvalOutcome) -> dict:
    p = outcome.progress
    return {
        "eval_run_id": outcome.eval_run_id,
        "name": outcome.name,
        "status": outcome.status,
        "items": {"total": p.total, "done": p.done, "failed": p.failed, "skipped": p.skipped},
        "metrics": result.metrics,
        "diagnosis": {"component": result.diagnosis.component, "sentence": result.diagnosis.sentence},
        "baseline": result.baseline,
        "cause": None
        if result.cause is None
        else {
            "component": result.cause.component,
            "parts": list(result.cause.parts),
            "sentence": result.cause.sentence,
        },
        "judge_invalid": result.judge_invalid,
        "judge_total": result.judge_total,
        "extraction_errors": {"errors": result.extraction_errors[0], "claims": result.extraction_errors[1]},
        "usage": result.usage,
        "replayed": result.replayed_share,  # the share of the items' calls replayed from the response cache
        "abstained": {"items": result.abstained[0], "of": result.abstained[1], "share": result.abstained_share},
        "wall_s": result.eval_run.wall_s,
        "weak_slices": [{"tag": t, "metric": m, "mean": v} for t, m, v in weak_slices(result)],
        "below_floor": [
            {"metric": c.metric, "mean": c.new_value, "floor": c.baseline_value} for c in result.below_floor
        ],
        "detectable": outcome.detectable,
        "judge_variance": [{**v.summary(), "per_item": [asdict(s) for s in v.per_item]} for v in result.judge_variance],
        # per turn and per conversation; null when the evaluation has no conversation
        "conversations": None if result.conversations is None else result.conversations.as_dict(),
    }


def print_detector(summaries: dict[str, dict], out: Console) -> None:
    table = Table("figure", *summaries.keys())
    rows = [
        ("answers scored", "n", "{:d}"),
        ("balanced accuracy", "balanced_accuracy", "{:.3f}"),
        ("precision (hallucinated) [95% Wilson]", "precision", "{:.3f}"),
        ("recall (hallucinated) [95% Wilson]", "recall", "{:.3f}"),
        ("F1 (hallucinated)", "f1", "{:.3f}"),
        ("TP / FP / TN / FN", None, None),
        ("latency per answer (median ms)", "latency_ms_per_answer", "{:.1f}"),
        ("LLM calls per answer", "llm_calls_per_answer", "{:.2f}"),
        ("prompt tokens per answer", "prompt_tokens_per_answer", "{:.0f}"),
        ("claims / decided by pre-check", None, None),
        ("pre-check flags truly hallucinated", "flagged_by_precheck_truly_hallucinated", "{:.3f}"),
        ("pre-check hints passed on: claims / answers (hallucinated)", None, None),
        ("invalid (claims unreadable)", "invalid", "{:d}"),
    ]
    for label, key, fmt in rows:
        cells = []
        for m in summaries.values():
            if label.startswith("TP"):
                cells.append(f"{m['tp']} / {m['fp']} / {m['tn']} / {m['fn']}")
            elif label.startswith("claims"):
                cells.append(f"{m['claims']} / {m['claims_decided_by_precheck']}")
            elif label.startswith("pre-check hints"):
                h = m.get("precheck_hints") or {}
                cells.append(f"{h.get('claims', 0)} / {h.get('answers', 0)} ({h.get('answers_truly_hallucinated', 0)})")
            elif key in ("precision", "recall"):
                cells.append(with_interval(m[key], m.get(f"{key}_ci")))
            else:
                cells.append("n/a" if m.get(key) is None else fmt.format(m[key]))
        table.add_row(label, *cells)
    out.print(table)
    for verifier, m in summaries.items():
        if m.get("by_model"):
            print_by_model(verifier, m["by_model"], out)
    for verifier, m in summaries.items():
        best = max(m["sweep"], key=lambda row: row["f1"])
        out.print(
            Text(
                f"{verifier}: run {m['run_id']}; decision: {m['threshold']}; best F1 on the sweep "
                f"{best['f1']:.3f} at faithfulness < {best['threshold']:g} "
                f"({len(m['sweep'])} thresholds)"
            )
        )


def with_interval(value: float | None, interval) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else f"{value:.3f} [n/a]"


def print_by_model(verifier: str, models: dict[str, dict], out: Console) -> None:
    """Per writing model, for information: some have very few hallucinated answers."""
    table = Table(
        "meta.model",
        "n",
        "pos",
        "TP/FP/FN",
        "precision [95%]",
        "recall [95%]",
        title=f"{verifier} by writing model (for information: small counts; pos = hallucinated)",
    )
    for column in table.columns:
        column.no_wrap = True
    for model, m in models.items():
        table.add_row(
            model,
            str(m["n"]),
            str(m["hallucinated"]),
            f"{m['tp']} / {m['fp']} / {m['fn']}",
            with_interval(m["precision"], m["precision_ci"]) if m["tp"] + m["fp"] else "n/a (none flagged)",
            with_interval(m["recall"], m["recall_ci"]) if m["tp"] + m["fn"] else "n/a (none)",
        )
    out.print(table)


def print_gate(run, baseline, comparisons, out: Console) -> None:
    out.print(Text(f"{run.name} vs " + (baseline.name if baseline else "no baseline (floors only)"), style="bold"))
    table = Table("metric", "slice", "baseline", "new", "change", "95% interval", "p", "Holm p", "n", "verdict")
    for c in comparisons:
        interval = f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]" if c.ci_low is not None else ""
        verdict = Text(
            {
                "floor": "BELOW FLOOR",
                "drop": "REGRESSION (drop)",
                "ok": "ok",
                "too_few": "too few items",
                "not_comparable": "not compared (prompt version)",
            }[c.kind],
            style="red" if c.regression else "yellow" if c.below_floor else "",
        )
        table.add_row(
            c.metric,
            c.slice,
            _num(c.baseline_value),
            _num(c.new_value),
            "" if c.delta is None else f"{c.delta:+.3f}",
            interval,
            "" if c.p_value is None else f"{c.p_value:.4f}",
            "" if c.p_adjusted is None else f"{c.p_adjusted:.4f}",
            str(c.n or ""),
            verdict,
        )
    out.print(table)
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
        out.print(
            Text(
                f"drops: one-sided tests, {family} metric × slice tests under family-wise control (5%; {order}); "
                "floors are checked separately"
            )
        )
        for line in regression_detectable(comparisons):
            out.print(Text(line))
    out.print(
        Text(
            plural(len(regressions), "regression") if regressions else "no regression",
            style="red bold" if regressions else "green",
        )
    )
    if below:
        out.print(Text(f"{len(below)} below floor: " + ", ".join(c.metric for c in below), style="yellow bold"))


def _num(value) -> str:
    return "" if value is None else f"{value:.3f}"
