"""`align CRITERION`: fit the criterion's judge prompt on people's ratings, kept only when its held-out agreement
rises (pipeline/calibration/align_run.py); `--versions` lists the fitted versions, `--use N` goes back to one."""

from __future__ import annotations

import argparse
import sys

from rich.text import Text

from pipeline.formatting import fmt_count, fmt_score, fmt_time

# pipeline.evaluation.judge.CRITERIA, written out so that `--help` imports no model code (test_cli_help checks it)
CRITERIA = ("correctness", "helpfulness", "faithfulness", "grounding", "topicality")


def register(sub) -> None:
    align = sub.add_parser(
        "align",
        help="align a criterion's judge prompt on people's ratings; kept only when held-out agreement rises",
    )
    align.add_argument("criterion", choices=CRITERIA, help="the criterion whose judge to align")
    align.add_argument("--yes", action="store_true", help="run without asking to confirm the planned model calls")
    align.add_argument("--seed", type=int, default=0, help="the folds' and the bootstrap's seed (default 0)")
    align.add_argument("--versions", action="store_true", help="list the criterion's judge prompt versions and exit")
    align.add_argument(
        "--use", type=int, metavar="VERSION", help="make the judge use this version (0: the built-in rubric) and exit"
    )
    align.set_defaults(handler=run)


def run(args: argparse.Namespace, settings, db, out, err) -> int:
    from pipeline.calibration.align_run import Aligner, use_version, versions

    if args.use is not None:
        use_version(db, args.criterion, args.use)
        out.print(f"{args.criterion}: the judge now uses {'the built-in rubric' if not args.use else f'v{args.use}'}")
        return 0
    if args.versions:
        print_versions(out, args.criterion, versions(db, args.criterion))
        return 0
    aligner = Aligner(settings, db, args.criterion, args.seed)
    plan = aligner.plan()
    out.print(
        f"align {args.criterion}: {fmt_count(plan.items)} rated answers of {fmt_count(plan.questions)} questions; "
        f"planned {fmt_count(plan.calls)} model calls, about {fmt_count(plan.tokens)} prompt tokens"
        + (f" ({fmt_count(plan.done_steps)} steps already done, not counted)" if plan.done_steps else "")
    )
    if not args.yes and not confirmed(err):
        err.print("stopped before any model call; nothing changed")
        return 1
    done = [0]

    def on_item() -> None:
        done[0] += 1
        if done[0] % 10 == 0 or done[0] == plan.calls:
            err.print(f"  {fmt_count(done[0])} of about {fmt_count(plan.calls)} calls", highlight=False)

    result, version = aligner.run(on_item=on_item)
    print_outcome(out, args.criterion, result, version)
    return 0


def confirmed(err) -> bool:
    err.print("proceed? [y/N] ", end="")
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def interval(low, high) -> str:
    return "no interval" if low is None else f"[{fmt_score(low)}, {fmt_score(high)}]"


def print_outcome(out, criterion: str, result, version: int | None) -> None:
    out.print(
        f"held-out weighted kappa (questions never chosen on): {fmt_score(result.kappa)} "
        f"{interval(result.kappa_low, result.kappa_high)}; current prompt {fmt_score(result.current_kappa)}"
    )
    out.print(f"gain: {fmt_score(result.gain)} {interval(result.gain_low, result.gain_high)}")
    tried = ", ".join(f"fold {f.index + 1}: {f.recipe}" for f in result.folds)
    out.print(f"tried: current, clarification, few-shot, combined; chosen by inner folds ({tried})")
    if version is None:
        out.print(Text(f"kept the current prompt: {result.reason}", style="yellow"))
        return
    out.print(Text(f"{criterion}: new judge prompt v{version} ({result.final.recipe}); {result.reason}", style="green"))
    if result.final.clarification:
        out.print(Text(f"clarification: {result.final.clarification}"))
    out.print("runs judged before are not compared with runs judged under it (the judge pin changed)")


def print_versions(out, criterion: str, rows: list[dict]) -> None:
    if not rows:
        out.print(f"{criterion}: no fitted versions; the judge uses the built-in rubric")
        return
    in_use = next((r["version"] for r in rows if r["active"]), 0)
    out.print(f"{criterion}: the judge uses {'the built-in rubric (v0)' if not in_use else f'v{in_use}'}")
    for r in rows:
        out.print(
            f"{'*' if r['active'] else ' '} v{r['version']}  {fmt_time(r['created_at'])}  {r['recipe']:<13} "
            f"held-out kappa {fmt_score(r['held_out_kappa'])} {interval(r['kappa_low'], r['kappa_high'])}  "
            f"gain {fmt_score(r['gain'])}  fitted on {fmt_count(len(r['fitted_on']))} ratings",
            highlight=False,
        )
