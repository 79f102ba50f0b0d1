"""`eval`: run a golden set (or score answers as given), judge and measure every item, print the report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from rich.console import Console
from rich.text import Text

from pipeline.cli.fresh import add_fresh, fresh
from pipeline.cli.tables import add_format, chosen_format
from pipeline.config import DECLARATIONS
from pipeline.errors import WorkbenchError
from pipeline.text import plural

# where items run (pipeline.evaluation.runner.EXECUTORS, named here so that `--help` imports no runner)
EXECUTORS = ("local", "ray")


def register(sub) -> None:
    ev = sub.add_parser(
        "eval",
        help="run a golden set through the workbench, or score another pipeline's answers as given; judge and "
        "measure every item",
        epilog="exit codes: 0 every item finished; 1 some item failed (run the same command to retry it) or the work "
        "failed; 2 bad usage or input; 130 cancelled. With GITHUB_STEP_SUMMARY set (GitHub Actions), the report is "
        "also appended to that file in Markdown.",
    )
    ev.add_argument(
        "dataset",
        help="a .jsonl, .csv or .parquet file: a golden set (id, question, reference, tags), or rows that carry "
        "their answer and contexts in our, Ragas's or DeepEval's column names, e.g. data/eval/golden.jsonl (kept as "
        "a version of the dataset named after the file); or a dataset kept in the store: dataset:NAME (its latest "
        "version) or dataset:NAME@VERSION",
    )
    ev.add_argument(
        "--pipeline",
        default=None,
        help="with rows that carry answers: the name of the pipeline that wrote them (default: the file's name); "
        "trends and baselines keep each pipeline's runs apart",
    )
    ev.add_argument("--name", required=True, help="the evaluation's name; the same name resumes it")
    ev.add_argument("--concurrency", type=int, default=None, help="items at once (default: setting eval_concurrency)")
    ev.add_argument("--limit", type=int, default=None, help="only the first N items")
    ev.add_argument("--tags", nargs="+", default=None, help="only items with any of these tags")
    add_format(ev, "the report (csv: its metrics table)")
    add_fresh(ev)
    ev.add_argument(
        "--metrics",
        type=metric_list,
        default=None,
        help="comma-separated metrics to measure, e.g. judge_grounding,judge_topicality (default: every metric; "
        "a resumed run measures the ones it was started with)",
    )
    ev.add_argument(
        "--judge-repeats",
        type=judge_repeats_arg,
        default=None,
        metavar="K",
        help="judge each item K times per criterion (repeats after the first bypass the response cache, each with "
        "its own seed); the score is the mean of the valid repeats, and the report shows the judge's spread and "
        "its agreement with itself (default: setting judge_repeats, 1; a resumed run needs the K it was started "
        "with)",
    )
    ev.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where items run: local (threads of this process) or ray (Ray tasks; needs "
        "`pip install -r requirements-scale.txt`)",
    )
    ev.add_argument(
        "--ray-address",
        default=None,
        help="with --executor ray: the Ray cluster to run on, e.g. 10.0.0.5:6379 (default: a local Ray, started "
        "for the run and bound to 127.0.0.1)",
    )
    ev.set_defaults(handler=cmd_eval)


def metric_list(text: str) -> list[str]:
    """--metrics: names separated by commas (run_evaluation checks them against the registry)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def judge_repeats_arg(text: str) -> int:
    """--judge-repeats: a whole number in the setting judge_repeats' declared range."""
    declared = DECLARATIONS["judge_repeats"]
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not declared.allows(value):
        raise argparse.ArgumentTypeError(f"{value} is out of range: use a value {declared.valid_values()}")
    return value


def cmd_eval(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.cli.output import evaluation_progress, print_mapping, report_json
    from pipeline.cli.reports import eval_report
    from pipeline.cli.tables import emit
    from pipeline.evaluation import datasets
    from pipeline.evaluation.dataset import load_dataset
    from pipeline.evaluation.runner import check_executor, report, run_evaluation

    settings = fresh(settings, args)
    read = datasets.resolve(db, args.dataset) if datasets.is_spec(args.dataset) else load_dataset(args.dataset)
    print_mapping(read, err)  # how the file's columns were read (a stored dataset has no file)
    dataset, pinned = datasets.for_evaluation(db, read, args.name, args.dataset)
    err.print(Text(pinned, style="dim"))
    for bad in dataset.bad_rows:
        err.print(Text(f"skipped line {bad.line}: {bad.reason}", style="yellow"))
    dataset = dataset.select(args.limit, args.tags)
    if not dataset.items:
        err.print(Text("error: no items match --tags/--limit", style="red"))
        return 2
    concurrency = args.concurrency or settings.eval_concurrency
    if args.judge_repeats is not None:
        settings = dataclasses.replace(settings, judge_repeats=args.judge_repeats)
    check_executor(args.executor, args.ray_address)  # before saying where items run
    if args.executor == "ray":
        where = f"the Ray cluster at {args.ray_address}" if args.ray_address else "a local Ray (it starts in seconds)"
        err.print(Text(f"items run as Ray tasks on {where}", style="dim"))
    with evaluation_progress(err) as on_progress:
        try:
            outcome = run_evaluation(
                settings,
                db,
                dataset,
                args.name,
                concurrency,
                on_progress=on_progress,
                metrics=args.metrics,
                executor=args.executor,
                ray_address=args.ray_address,
                pipeline=args.pipeline,
            )
        except KeyboardInterrupt:
            err.print(Text(f"cancelled: finished items are kept; run the same command to resume {args.name!r}"))
            exit_now(db, 130)
    result = report(settings, db, args.name)
    shown = eval_report(result, outcome, payload=report_json(result, outcome))
    emit(shown, chosen_format(args), out)
    p = outcome.progress
    if p.failed:
        err.print(Text(f"{p.failed} of {p.total} items failed; run the same command to retry them. Why:", style="red"))
        for error, count in sorted(p.errors.items(), key=lambda kv: -kv[1]):
            err.print(Text(f"  {plural(count, 'item')}: {error}"))
    code = 0 if p.failed == 0 else 1
    summarise(outcome, shown, code, err)
    return code


def summarise(outcome, shown, code: int, err: Console) -> None:
    """The report, appended to the GitHub step summary when one is named."""
    from pipeline.cli.step_summary import append_summary

    p = outcome.progress
    found = [
        *(["regression against the baseline"] if isinstance(outcome.regressions, list) and outcome.regressions else []),
        *(["below a floor"] if outcome.below_floor else []),
    ]
    verdict = f"{outcome.status}: {p.done} of {p.total} items done, {p.failed} failed" + (
        f"; {' and '.join(found)}" if found else ""
    )
    reason = "every item finished" if code == 0 else f"{plural(p.failed, 'item')} failed (rerun to retry them)"
    append_summary(f"Evaluation {outcome.name}", verdict, f"exit {code}: {reason}", shown, err)


def exit_now(db, code: int) -> None:
    """Leave at once: items still waiting on a model call are dropped (they rerun on resume) instead of
    being waited for; what finished is already committed."""

    try:
        db.checkpoint()
    except WorkbenchError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
