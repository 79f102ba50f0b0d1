"""Terminal output of questions being answered, evaluations in progress and detector benchmarks: progress bars,
steps and tables (what `gate`, `eval` and `runs` print is built in reports.py)."""

from __future__ import annotations

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
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.runner import EvalOutcome, EvalReport, weak_slices


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
