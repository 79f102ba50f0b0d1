"""Command line: ask, ingest, doctor, eval, gate, bench-detector, runs, show, export-parquet, snapshot, collect,
datasets (pipeline/cli/datasets.py), synth (pipeline/cli/synth.py), sweep (pipeline/cli/sweep.py).

Exit 0 on success, 1 when the work failed (or a regression was found), 2 on bad usage or input; `gate` exits 3
when the run is below a floor and has no regression; `ask` exits 4 when its answer was printed but could be kept
neither in the store nor in the journal (NOT_KEPT)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.answering.engine import VerifiedQueryEngine
from pipeline.answering.events import AnswerResult
from pipeline.answering.status import made_how
from pipeline.cli import datasets as datasets_cli
from pipeline.cli import sweep as sweep_cli
from pipeline.cli import synth as synth_cli
from pipeline.cli.fresh import add_fresh, fresh
from pipeline.cli.hosts import print_hosts
from pipeline.cli.output import (
    evaluation_progress,
    follow_answer,
    positive_int,
    print_detector,
    print_gate,
    print_groups,
    print_mapping,
    print_report,
    print_runs,
    report_json,
)
from pipeline.cli.terminal import SafeConsole
from pipeline.collect import serve as collect
from pipeline.config import DECLARATIONS
from pipeline.detector.bench import detector_verifiers, run_detector_bench
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation import datasets
from pipeline.evaluation.dataset import load_dataset
from pipeline.evaluation.runner import EXECUTORS, check_executor, report, run_evaluation
from pipeline.history.conversations import history_of, next_turn
from pipeline.history.export import BROWSE, export_parquet, snapshot
from pipeline.history.runs import GROUPS, RunFilter, export_runs, group_runs, list_runs, listed_columns, load_run
from pipeline.history.views import prices
from pipeline.knowledge.documents import count_chunks
from pipeline.knowledge.ingest import ingest_and_record
from pipeline.knowledge.injection import flag_warning
from pipeline.models.health import health
from pipeline.models.replay import replay_note
from pipeline.regression import compare as regression
from pipeline.regression import junit
from pipeline.session import open_workbench
from pipeline.text import plural, short_source
from pipeline.verification.registry import verifier_names

VERDICT_STYLE = {
    "supported": "green",
    "contradicted": "red",
    "unsupported": "yellow",
    "unverified": "magenta",
    "extraction_error": "dim",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=program_name(), description="RAG quality workbench")
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer a question and check every claim")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the result as JSON")
    ask.add_argument("--quiet", action="store_true", help="do not print the steps as they happen")
    add_fresh(ask)
    ask.add_argument(
        "--conversation",
        metavar="NAME",
        help="continue the named conversation (or start it): a follow-up is read with its earlier turns",
    )
    ingest_cmd = sub.add_parser("ingest", help="add Markdown, text or PDF files (or folders) to the knowledge base")
    ingest_cmd.add_argument("paths", nargs="+")
    ingest_cmd.add_argument(
        "--if-empty",
        action="store_true",
        help="do nothing when the knowledge base already has chunks for the embedding model",
    )
    sub.add_parser("doctor", help="check Ollama, the models and the store, and print the fix for each problem")
    ev = sub.add_parser(
        "eval",
        help="run a golden set through the workbench, or score another pipeline's answers as given; judge and "
        "measure every item",
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
    ev.add_argument("--json", action="store_true", help="print the summary as JSON")
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
        choices=[c.name for c in listed_columns()],
        default="id",
        help="list the runs by this column, largest first (default: id, the newest first)",
    )
    runs.add_argument("--ascending", action="store_true", help="with --sort: smallest first")
    runs.add_argument(
        "--group-by",
        choices=list(GROUPS),
        help="instead of the runs, one row per evaluation, model or tag: runs, mean faithfulness, p50/p95 latency, "
        "tokens, cost",
    )
    runs.add_argument("--limit", type=positive_int, default=20, help="show at most this many runs (at least 1)")
    runs.add_argument("--json", action="store_true")
    runs.add_argument(
        "--export", metavar="FILE", help="write every matching run (unpaged) to FILE: .csv, .parquet or .jsonl"
    )
    show = sub.add_parser("show", help="show one run: answer, claims with evidence, attempts, LLM calls")
    show.add_argument("run_id", type=int)
    show.add_argument("--json", action="store_true")
    gate = sub.add_parser(
        "gate",
        help="compare an evaluation with its baseline and its floors; exit 0 pass, 1 on a regression, "
        "3 when below a floor only",
    )
    gate.add_argument("--run", required=True, help="the evaluation's name")
    gate.add_argument(
        "--baseline",
        default=None,
        help="compare with this evaluation (default: the pinned baseline, else the newest earlier run over the same "
        "dataset hash and size, under the same judge pin, with no failed item and no open regression alert)",
    )
    gate.add_argument("--json", action="store_true")
    gate.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the gate as JUnit XML to FILE: one test case per metric x slice (the exit code is the same)",
    )
    parquet = sub.add_parser(
        "export-parquet", help="write every table of the store as Parquet, partitioned by day, into a new folder"
    )
    parquet.add_argument("folder", help="a new or empty folder; it also gets export.json and browse.duckdb")
    snap = sub.add_parser(
        "snapshot", help="copy the store, checkpointed, to a read-only file that many app processes can browse"
    )
    snap.add_argument("path", help="the snapshot file; an earlier snapshot there is replaced")
    col = sub.add_parser(
        "collect",
        help="receive any application's OpenTelemetry traces (OTLP/HTTP) and verify its answers online",
    )
    col.add_argument("--host", default=None, help="address to listen on (default: setting collect_host, 127.0.0.1)")
    col.add_argument("--port", type=positive_int, default=None, help="port (default: setting collect_port, 4318)")
    col.add_argument(
        "--token",
        default=os.environ.get("WORKBENCH_COLLECT_TOKEN") or None,
        help="require Authorization: Bearer TOKEN on every request (default: WORKBENCH_COLLECT_TOKEN; unset: none)",
    )
    col.add_argument("--no-evaluate", action="store_true", help="receive and keep traces; verify none now")
    col.add_argument(
        "--drain", action="store_true", help="do not listen: verify every trace waiting in the store, then exit"
    )
    datasets_cli.add_parser(sub)
    synth_cli.add_parser(sub)
    sweep_cli.add_parser(sub)
    det = sub.add_parser("bench-detector", help="measure the hallucination detector on labelled answers")
    det.add_argument("file", help="JSONL of {id, question?, context, answer, label}; label 1 = hallucinated")
    det.add_argument(
        "--verifier",
        choices=[*detector_verifiers(), "all"],
        default="minicheck",
        help="a registered verifier, minicheck (by --scope), or all registered verifiers",
    )
    det.add_argument(
        "--claims",
        choices=["llm", "answer"],
        default="llm",
        help="claims from the claim extractor (llm) or the answer's own sentences (answer)",
    )
    det.add_argument(
        "--scope",
        choices=["chunk", "context"],
        default=None,
        help="verify each claim per chunk or against the whole context (default: setting)",
    )
    det.add_argument("--no-precheck", action="store_true", help="turn the deterministic pre-check off")
    det.add_argument("--cache", action="store_true", help="use the LLM cache (off by default: honest latency)")
    det.add_argument("--limit", type=int, default=None)
    det.add_argument("--json", action="store_true")
    return parser


def program_name() -> str:
    """`workbench` when started by the installed console command, else `python -m pipeline`."""
    return "workbench" if Path(sys.argv[0]).name == "workbench" else "python -m pipeline"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out, err = SafeConsole(), SafeConsole(stderr=True)  # stored text cannot send escape sequences
    db = None
    try:
        settings, db = open_workbench()
        return COMMANDS[args.command](args, settings, db, out, err)
    except InputError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return 2
    except WorkbenchError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return 1
    finally:
        if db is not None:
            finish_store(db, err)


def finish_store(db, err: Console) -> None:
    """When a command ends: fold the write-ahead log into the file (a copied store file is then complete)
    and say how many journal entries were saved."""
    try:
        db.checkpoint()
    except WorkbenchError:
        pass  # the store is locked, read-only or damaged: nothing of ours is in its write-ahead log
    if db.replayed:
        err.print(Text(f"saved {plural(db.replayed, 'result')} kept in the journal into the store", style="dim"))


NOT_KEPT = 4  # ask: the answer was printed, but neither the store nor any journal folder could keep it


def cmd_ask(args, settings, db, out: Console, err: Console) -> int:
    engine = VerifiedQueryEngine(settings=fresh(settings, args), db=db)
    conversation = {}
    if args.conversation is not None:  # its history: the store's runs of that conversation
        turns = history_of(db, args.conversation)
        conversation = {
            "history": turns,
            "conversation_id": args.conversation,
            "turn_no": next_turn(db, args.conversation),
        }
    result: AnswerResult | None = follow_answer(engine.stream(args.question, **conversation), err, args.quiet)
    if args.json:
        out.print_json(json.dumps(result_json(result), default=str))
    else:
        print_result(result, out)
    if result.not_kept:
        err.print(Text(f"error: this run is not saved: {result.not_kept}", style="red"))
    return 1 if result.status == "failed" else NOT_KEPT if result.not_kept else 0


def result_json(result: AnswerResult) -> dict:
    return {
        "run_id": result.run_id,
        "status": result.status,
        "question": result.question,
        "standalone_question": result.standalone_question or result.question,  # what retrieval was for
        "conversation": result.conversation_id,
        "turn": result.turn_no,
        "answer": result.answer,
        "faithfulness": result.faithfulness,
        "attempts": len(result.attempts),
        "seeds": [a.record.seed for a in result.attempts],
        "latency_ms": result.latency_ms,
        # answered wholly from the response cache, not computed now (replayed_calls: how many calls were)
        "replayed": bool(result.n_calls) and result.n_replayed == result.n_calls,
        "replayed_calls": result.n_replayed,
        "model_calls": result.n_calls,
        "first_computed_at": result.replayed_from,
        "replay": replay_note(result.n_calls, result.n_replayed, result.replayed_from),
        "abstain_reason": result.abstain_reason,
        "error": result.error,
        "fix": result.fix,
        "journal": result.journal,
        "kept_because": result.kept_because,
        "not_kept": result.not_kept,
        "claims": [
            {
                "claim": c.text,
                "verdict": c.verdict,
                "verifier": c.verifier,
                "evidence": c.evidence,
                "source": c.passage.source if c.passage else None,
                "reason": c.reason,
            }
            for c in result.final_claims
        ],
        "passages": [asdict(p) for p in result.passages],
    }


def print_result(result: AnswerResult, out: Console) -> None:
    if result.not_kept:
        out.print(Text(f"note: this run is not saved: {result.not_kept}", style="yellow"))
    if result.journal:
        because = f" ({result.kept_because})" if result.kept_because else ""
        out.print(
            Text(
                f"note: the store could not take this run now{because}; it is kept in the journal "
                f"({result.journal}) and saved the next time the store opens",
                style="yellow",
            )
        )
        if result.kept_fix:
            out.print(Text(f"fix: {result.kept_fix}", style="yellow"))
    if result.status == "failed":
        out.print(Text(f"run {result.run_id} failed: {result.error}", style="red"))
        if result.fix:
            out.print(Text(f"fix: {result.fix}"))
        return
    if result.standalone_question and result.standalone_question != result.question:
        out.print(Text(f"retrieved for: {result.standalone_question}", style="dim"))
    out.print(Text(result.answer or ""))
    faith = "n/a" if result.faithfulness is None else f"{result.faithfulness:.2f}"
    out.print(
        Text(
            f"\nrun {result.run_id} · {result.status} · faithfulness {faith} · "
            f"{plural(len(result.attempts), 'attempt')}"
            + (f" · conversation {result.conversation_id}, turn {result.turn_no}" if result.conversation_id else ""),
            style="bold",
        )
    )
    note = replay_note(result.n_calls, result.n_replayed, result.replayed_from)
    if note:
        out.print(Text(f"{note}; latency {result.latency_ms or 0:,.0f} ms as first measured", style="yellow"))
    if result.abstain_reason:
        out.print(Text(f"reason: {result.abstain_reason}"))
    warning = flag_warning(result.final_claims)
    if warning:
        out.print(Text(f"warning: {warning}", style="yellow"))
    if result.final_claims:
        table = Table("#", "verdict", "claim", "evidence", "source", show_lines=True)
        for claim in result.final_claims:
            table.add_row(
                str(claim.claim_no),
                Text(claim.verdict, style=VERDICT_STYLE.get(claim.verdict, "")),
                Text(claim.text),
                Text(claim.evidence or ""),
                Text(f"[{claim.passage.n}] {short_source(claim.passage.source)}" if claim.passage else ""),
            )
        out.print(table)


def cmd_ingest(args, settings, db, out: Console, err: Console) -> int:
    if args.if_empty and count_chunks(db, settings.embed_model):
        out.print(Text(f"The knowledge base already has chunks embedded with {settings.embed_model}; nothing to do."))
        return 0

    def report(result):
        line = f"{result.status:9} {result.path}"
        line += f" ({result.chunks} chunks)" if result.chunks else ""
        line += f": {result.reason}" if result.reason else ""
        line += f"; {plural(result.flagged, 'chunk')} flagged as possible prompt injection" if result.flagged else ""
        out.print(Text(line, style="yellow" if result.status == "skipped" else ""))

    results = ingest_and_record(args.paths, settings, db, on_result=report)
    if not results:
        err.print(Text("error: no Markdown, text or PDF files found under the given paths", style="red"))
        return 2
    skipped = sum(r.status == "skipped" for r in results)
    out.print(Text(f"{plural(len(results) - skipped, 'file')} ingested or unchanged, {skipped} skipped"))
    return 0 if skipped < len(results) else 1


def cmd_doctor(args, settings, db, out: Console, err: Console) -> int:
    checks, hosts = health(settings, db)
    for check in checks:
        mark = Text("ok  ", style="green") if check.ok else Text("FAIL", style="red")
        out.print(mark, Text(f"{check.name}: {check.detail}"))
        if not check.ok and check.fix:
            out.print(Text(f"      fix: {check.fix}"))
    print_hosts(out, hosts)
    return 0 if all(c.ok for c in checks) else 1


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
    if args.json:
        out.print_json(json.dumps(report_json(result, outcome), default=str))
    else:
        print_report(result, outcome, out)
    if outcome.progress.failed:
        p = outcome.progress
        err.print(Text(f"{p.failed} of {p.total} items failed; run the same command to retry them. Why:", style="red"))
        for error, count in sorted(p.errors.items(), key=lambda kv: -kv[1]):
            err.print(Text(f"  {plural(count, 'item')}: {error}"))
    return 0 if outcome.progress.failed == 0 else 1


def exit_now(db, code: int) -> None:
    """Leave at once: items still waiting on a model call are dropped (they rerun on resume) instead of
    being waited for; what finished is already committed."""
    import os
    import sys

    try:
        db.checkpoint()
    except WorkbenchError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_bench_detector(args, settings, db, out: Console, err: Console) -> int:
    settings = dataclasses.replace(
        settings,
        cache_enabled=args.cache,
        precheck_enabled=settings.precheck_enabled and not args.no_precheck,
        verify_scope=args.scope or settings.verify_scope,
    )
    verifiers = verifier_names() if args.verifier == "all" else [args.verifier]
    summaries = {}
    for verifier in verifiers:

        def progress(done, total, verifier=verifier):
            if done % 25 == 0 or done == total:
                err.print(Text(f"{verifier}: {done}/{total} answers", style="dim"))

        run_id, metrics = run_detector_bench(settings, db, args.file, verifier, args.claims, args.limit, progress)
        summaries[verifier] = {"run_id": run_id, **metrics}
    if args.json:
        out.print_json(json.dumps(summaries, default=str))
    else:
        print_detector(summaries, out)
    return 0


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


def runs_filter(args, settings) -> RunFilter:
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


def export_to(db, run_filter: RunFilter, target: str, out: Console) -> int:
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


def cmd_collect(args, settings, db, out: Console, err: Console) -> int:
    if args.drain:
        worker = collect.drain(settings, db)
        state = worker.state
        out.print(Text(f"{plural(state.evaluated, 'trace')} verified, {state.kept} kept without verdicts"))
        if state.alerts_opened:
            opened = plural(state.alerts_opened, "alert")
            out.print(Text(f"{opened} opened on traced runs' daily faithfulness: see Trends"))
        if state.journaled:
            out.print(Text(f"{plural(len(state.journaled), 'run')} kept in the journal: the store was busy"))
        if state.last_error:
            err.print(Text(f"error: traces are still waiting: {state.last_error}", style="red"))
            return 1
        return 0
    host, port = args.host or settings.collect_host, args.port or settings.collect_port
    collect.serve(settings, db, host, port, args.token, not args.no_evaluate, lambda line: err.print(Text(line)))
    return 0


def cmd_runs(args, settings, db, out: Console, err: Console) -> int:
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
        if args.json:
            out.print_json(json.dumps(groups, default=str))
        else:
            print_groups(groups, args.group_by, out)
        return 0
    rows = list_runs(db, run_filter, args.limit, args.sort, not args.ascending)
    if args.json:
        out.print_json(json.dumps(rows, default=str))
        return 0
    print_runs(rows, out)
    return 0


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
                + (f"; failed claims: {'; '.join(r.failed_claims)}" if r.failed_claims else "")
                + (f"; dropped: {' '.join(r.dropped)}" if r.dropped else ""),
                style="dim",
            )
        )
    print_result(result, out)
    return 0


GATE_REGRESSION = 1  # a drop against the baseline (whether or not a floor is breached too)
GATE_BELOW_FLOOR = 3  # a metric below its floor and no regression (2 is bad usage or input, as for every command)


def cmd_gate(args, settings, db, out: Console, err: Console) -> int:
    run, baseline, comparisons = regression.check(db, settings, args.run, args.baseline)
    regressions = [c for c in comparisons if c.regression]
    below = [c for c in comparisons if c.below_floor]
    if args.json:
        out.print_json(
            json.dumps(
                {
                    "run": run.name,
                    "baseline": baseline.name if baseline else None,
                    "regression": bool(regressions),
                    "below_floor": bool(below),
                    "comparisons": [asdict(c) for c in comparisons],
                },
                default=str,
            )
        )
    else:
        print_gate(run, baseline, comparisons, out)
    if args.junit:
        cause = junit.gate_cause(db, run, baseline, comparisons)
        junit.write_gate_junit(args.junit, run, baseline, comparisons, cause)
    return GATE_REGRESSION if regressions else GATE_BELOW_FLOOR if below else 0


def cmd_export_parquet(args, settings, db, out: Console, err: Console) -> int:
    result = export_parquet(db, args.folder)
    table = Table("table", "rows", "partitioned by", "files", title=f"Parquet export of {settings.store_path}")
    for t in result.tables:
        files = plural(t.days, "day") if t.partitioned else "1 file"
        table.add_row(Text(t.table), f"{t.rows:,}", partitioning(t), files)
    out.print(table)
    out.print(
        Text(
            f"wrote {len(result.tables)} tables, {result.rows:,} rows, {result.bytes / 1e6:,.1f} MB to {result.folder} "
            f"in {result.seconds:.1f} s (one consistent state of the store)"
        )
    )
    out.print(Text(f"browse it read-only: WORKBENCH_DB={result.folder / BROWSE} (views over the Parquet files)"))
    return 0


def partitioning(t) -> str:
    if t.partitioned:
        return f"day of {t.day_of}"
    return "unpartitioned (no rows)" if t.day_of else "unpartitioned (no timestamp column)"


def cmd_snapshot(args, settings, db, out: Console, err: Console) -> int:
    result = snapshot(db, args.path)
    verb = "replaced the snapshot" if result.replaced else "wrote a snapshot"
    out.print(
        Text(
            f"{verb} {result.path}: {sum(result.rows.values()):,} rows in {len(result.rows)} tables "
            f"({result.rows.get('runs', 0):,} runs), {result.bytes / 1e6:,.1f} MB in {result.seconds:.1f} s"
        )
    )
    out.print(Text(f"browse it read-only: WORKBENCH_DB={result.path} (the file is left read-only)"))
    return 0


COMMANDS = {
    "export-parquet": cmd_export_parquet,
    "snapshot": cmd_snapshot,
    "gate": cmd_gate,
    "runs": cmd_runs,
    "show": cmd_show,
    "ask": cmd_ask,
    "ingest": cmd_ingest,
    "doctor": cmd_doctor,
    "eval": cmd_eval,
    "bench-detector": cmd_bench_detector,
    "collect": cmd_collect,
    "datasets": datasets_cli.cmd_datasets,
    "synth": synth_cli.cmd_synth,
    "sweep": sweep_cli.cmd_sweep,
}
