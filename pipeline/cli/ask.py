"""`ask`: answer a question, check every claim, print the answer with its claims (or as JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from pipeline.cli.fresh import add_fresh, fresh
from pipeline.cli.tables import Column, Report, Table, emit
from pipeline.formatting import fmt_ms, fmt_score
from pipeline.text import plural, short_source

if TYPE_CHECKING:
    from pipeline.answering.events import AnswerResult


def register(sub) -> None:
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
    ask.set_defaults(handler=cmd_ask)


NOT_KEPT = 4  # ask: the answer was printed, but neither the store nor any journal folder could keep it


def cmd_ask(args, settings, db, out: Console, err: Console) -> int:
    from pipeline.answering.engine import VerifiedQueryEngine
    from pipeline.cli.output import follow_answer
    from pipeline.history.conversations import history_of, next_turn
    from pipeline.vocabulary import Status

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
    return 1 if result.status == Status.FAILED else NOT_KEPT if result.not_kept else 0


def result_json(result: AnswerResult) -> dict:
    from pipeline.models.replay import replay_note

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
    emit(result_report(result), "table", out)


def result_report(result: AnswerResult, report: Report | None = None) -> Report:
    """The answer, its verdict line and notes, and the table of its claims (added to `report` if given)."""
    from pipeline.knowledge.injection import flag_warning
    from pipeline.models.replay import replay_note
    from pipeline.verification.sentence_first import claims_label
    from pipeline.vocabulary import Status

    report = report if report is not None else Report()
    if result.not_kept:
        report.line(f"note: this run is not saved: {result.not_kept}", "yellow")
    if result.journal:
        because = f" ({result.kept_because})" if result.kept_because else ""
        report.line(
            f"note: the store could not take this run now{because}; it is kept in the journal "
            f"({result.journal}) and saved the next time the store opens",
            "yellow",
        )
        if result.kept_fix:
            report.line(f"fix: {result.kept_fix}", "yellow")
    if result.status == Status.FAILED:
        report.line(f"run {result.run_id} failed: {result.error}", "red")
        if result.fix:
            report.line(f"fix: {result.fix}")
        return report
    if result.standalone_question and result.standalone_question != result.question:
        report.line(f"retrieved for: {result.standalone_question}", "dim")
    report.line(result.answer or "")
    report.line(
        f"\nrun {result.run_id} · {result.status} · faithfulness {fmt_score(result.faithfulness)} "
        f"({claims_label(result.config)}) · {plural(len(result.attempts), 'attempt')}"
        + (f" · conversation {result.conversation_id}, turn {result.turn_no}" if result.conversation_id else ""),
        "bold",
    )
    note = replay_note(result.n_calls, result.n_replayed, result.replayed_from)
    if note:
        report.line(f"{note}; latency {fmt_ms(result.latency_ms or 0)} as first measured", "yellow")
    if result.abstain_reason:
        report.line(f"reason: {result.abstain_reason}")
    warning = flag_warning(result.final_claims)
    if warning:
        report.line(f"warning: {warning}", "yellow")
    if result.final_claims:
        rows = [claim_row(c) for c in result.final_claims]
        report.add(Table(CLAIM_COLUMNS, rows, fields=CLAIM_FIELDS, show_lines=True))
    return report


def claim_row(claim) -> dict:
    return {
        "claim_no": claim.claim_no,
        "verdict": claim.verdict,
        "claim": claim.text,
        "evidence": claim.evidence or "",
        "passage": claim.passage.n if claim.passage else None,
        "source": claim.passage.source if claim.passage else None,
        "verifier": claim.verifier,
        "reason": claim.reason,
    }


def _source(row: dict) -> str:
    return f"[{row['passage']}] {short_source(row['source'])}" if row["passage"] is not None else ""


def terminal_style(verdict: str) -> str:
    from pipeline.history.present import VERDICT_STYLES

    style = VERDICT_STYLES.get(verdict)
    return style.terminal if style else ""


CLAIM_FIELDS = ("claim_no", "verdict", "claim", "evidence", "passage", "source", "verifier", "reason")
CLAIM_COLUMNS = (
    Column("claim_no", "#"),
    Column("verdict", style=lambda row: terminal_style(row["verdict"])),
    Column("claim"),
    Column("evidence"),
    Column("source", show=_source),
)
