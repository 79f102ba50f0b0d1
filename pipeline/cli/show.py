"""`show`: one run: its attempts, answer, claims with evidence (or all of it as JSON)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from pipeline.cli.tables import Report, add_format, chosen_format, emit
from pipeline.formatting import fmt_score


def register(sub) -> None:
    show = sub.add_parser("show", help="show one run: answer, claims with evidence, attempts, LLM calls")
    show.add_argument("run_id", type=int)
    add_format(show, "the run (csv: its claims)")
    show.set_defaults(handler=cmd_show)


def cmd_show(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.answering.status import made_how
    from pipeline.cli.ask import result_json, result_report
    from pipeline.history.runs import load_run
    from pipeline.verification.sentence_first import claims_label

    stored = load_run(db, args.run_id)
    if stored is None:
        err.print(Text(f"error: there is no run {args.run_id}", style="red"))
        return 2
    result = stored.result
    report = Report(payload={**result_json(result), "calls": stored.calls, "scores": stored.scores})
    report.line(f"question: {result.question}", "bold")
    for attempt in result.attempts:
        r = attempt.record
        how = made_how(r)
        report.line(
            f"attempt {r.attempt_no}{f' ({how})' if how else ''}: {r.status}, faithfulness {fmt_score(r.faithfulness)}"
            f" ({claims_label(result.config)})"
            + (f"; failed claims: {'; '.join(r.failed_claims)}" if r.failed_claims else "")
            + (f"; dropped: {' '.join(r.dropped)}" if r.dropped else ""),
            "dim",
        )
    emit(result_report(result, report), chosen_format(args), out)
    return 0
