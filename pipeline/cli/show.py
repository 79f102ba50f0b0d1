"""`show`: one run: its attempts, answer, claims with evidence (or all of it as JSON)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text

from pipeline.answering.status import made_how
from pipeline.cli.ask import print_result, result_json
from pipeline.history.runs import load_run
from pipeline.verification.sentence_first import claims_label


def register(sub) -> None:
    show = sub.add_parser("show", help="show one run: answer, claims with evidence, attempts, LLM calls")
    show.add_argument("run_id", type=int)
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_show)


def cmd_show(args, settings, db, out: Console, err: Console) -> int:
    stored = load_run(db, args.run_id)
    if stored is None:
        err.print(Text(f"error: there is no run {args.run_id}", style="red"))
        return 2
    result = stored.result
    if args.json:
        out.print_json(json.dumps({**result_json(result), "calls": stored.calls, "scores": stored.scores}, default=str))
        return 0
    out.print(Text(f"question: {result.question}", style="bold"))
    for attempt in result.attempts:
        r = attempt.record
        faith = "n/a" if r.faithfulness is None else f"{r.faithfulness:.2f}"
        out.print(
            Text(
                f"attempt {r.attempt_no}{f' ({made_how(r)})' if made_how(r) else ''}: {r.status}, faithfulness {faith}"
                f" ({claims_label(result.config)})"
                + (f"; failed claims: {'; '.join(r.failed_claims)}" if r.failed_claims else "")
                + (f"; dropped: {' '.join(r.dropped)}" if r.dropped else ""),
                style="dim",
            )
        )
    print_result(result, out)
    return 0
