"""One evaluation item: answered by the verified engine (or, when the row carries its own answer, that answer
checked against its given contexts: pipeline/evaluation/given.py), then judged and measured; nothing is written
here.

The per-item work both executors share: the runner's local threads (runner.py) and the Ray tasks
(ray_executor.py) call `evaluate_item` and return an `ItemOutcome`; the runner saves it.

A turn of a golden conversation is answered with the turns before it (`InConversation`: the history the runner has
produced, oldest first) and stored as that turn of its conversation; a given answer that names its conversation and
turn is stored with them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pipeline import tracing
from pipeline.answering.conversation import Turn
from pipeline.answering.engine import QuestionRun, clean_question
from pipeline.answering.events import AnswerResult, Finished
from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.evaluation import registry
from pipeline.evaluation.dataset import GoldenItem
from pipeline.evaluation.given import check_given
from pipeline.evaluation.judge import MetricScore
from pipeline.evaluation.kb_snapshot import KnowledgeSnapshot
from pipeline.models.llm import LLM
from pipeline.vocabulary import Status
from store.db import Database
from store.records import RunLog

# (status, run log, scores, error) of one item
ItemOutcome = tuple[str, RunLog | None, list[MetricScore], str | None]


@dataclass(frozen=True)
class InConversation:
    """Where an item stands in its conversation: the id its run is stored under, and the turns before it, oldest
    first, as they were answered (their questions, answers and standalone questions)."""

    conversation_id: str
    history: tuple[Turn, ...] = ()


def conversation_id_of(eval_name: str, conversation: str) -> str:
    """The conversation id an evaluation's turns are stored under: the evaluation's name and the dataset's id of the
    conversation, so that two evaluations of one dataset are two conversations in Runs."""
    return f"eval:{eval_name}:{conversation}"


def turn_of(item: GoldenItem, log: RunLog | None) -> Turn:
    """The turn an answered item makes for the next one: its run's question, answer and standalone question (none
    when it failed before answering: the question alone)."""
    if log is None:
        return Turn(item.question)
    run = log.run
    standalone = run.standalone_question
    return Turn(run.question, run.answer, standalone if standalone and standalone != run.question else None)


def evaluate_item(
    settings: Settings,
    db: Database | None,
    item: GoldenItem,
    pin,
    abandon: threading.Event,
    eval_run_id: int | None = None,
    metrics: list[str] | None = None,
    knowledge: KnowledgeSnapshot | None = None,
    pipeline: str | None = None,
    conversation: InConversation | None = None,
    side_by_side: int = 1,
) -> ItemOutcome:
    """(status, log, scores, error) of one item; nothing is written here. The item's trace has the question
    run and every metric under one root. With `knowledge` (a Ray worker, db None) it retrieves from that
    snapshot of the knowledge base instead of the store, and the response cache (in the store) is not used. An
    item that carries its answer is checked as given (`pipeline`: who wrote it). `conversation`: a turn's
    conversation and the turns answered before it. `side_by_side`: how many items the caller evaluates at once."""
    question = clean_question(item.question, settings)
    if item.given:
        return _given_item(
            settings, db, item, question, pin, abandon, eval_run_id, metrics, pipeline, conversation, side_by_side
        )
    history = conversation.history if conversation else ()
    with tracing.recording("evaluate item", item=item.id) as trace:
        run = QuestionRun(
            settings,
            db,
            question,
            kind="eval",
            persist=False,
            eval_run_id=eval_run_id,
            history=history,
            conversation_id=conversation.conversation_id if conversation else None,
            turn_no=item.turn if conversation else None,
        )
        if knowledge is not None:
            run.retriever = knowledge.retriever(run.llm, settings.top_k)
            run.scale = knowledge.scale
        result: AnswerResult | None = None
        for event in run.events():
            if abandon.is_set():
                raise TimeoutError("abandoned")
            if isinstance(event, Finished):
                result = event.result
        outcome = _scored(settings, db, item, pin, eval_run_id, run.log, result, metrics, run.scale, history)
    run.log.spans = trace.records()
    return outcome


def _given_item(
    settings,
    db,
    item: GoldenItem,
    question: str,
    pin,
    abandon,
    eval_run_id,
    metrics,
    pipeline,
    conversation=None,
    side_by_side: int = 1,
):
    with tracing.recording("evaluate item", item=item.id) as trace:
        llm = LLM(settings, db, origin="evaluation", eval_run_id=eval_run_id)
        given = check_given(
            settings, llm, question, item.answer, item.contexts, pipeline or "imported", side_by_side=side_by_side
        )
        if conversation is not None:  # the turn the file gives, stored on the run (the Runs conversation view)
            for record in (given.result, given.log.run):
                record.conversation_id, record.turn_no = conversation.conversation_id, item.turn
        if abandon.is_set():
            raise TimeoutError("abandoned")
        history = conversation.history if conversation else ()
        outcome = _scored(settings, db, item, pin, eval_run_id, given.log, given.result, metrics, None, history)
    given.log.spans = trace.records()
    return outcome


def _scored(
    settings, db, item: GoldenItem, pin, eval_run_id, log, result: AnswerResult, metrics=None, scale=None, history=()
):
    if result.status == Status.FAILED:
        return "failed", log, [], result.error
    scorer = LLM(settings, db, origin="evaluation", eval_run_id=eval_run_id)
    try:
        scores = score_item(scorer, settings, item, result, pin, metrics, scale, history)
    except WorkbenchError as exc:
        log.calls += scorer.take_calls()
        return "failed", log, [], f"scoring failed: {exc}"
    log.calls += scorer.take_calls()
    log.cache_entries += scorer.take_cache_entries()
    return "done", log, scores, None


def score_item(
    llm: LLM,
    settings: Settings,
    item: GoldenItem,
    result: AnswerResult,
    pin,
    metrics: list[str] | None = None,
    scale=None,
    history=(),
) -> list[MetricScore]:
    """The chosen metrics (default: every registered one) of one answered item, each a step of the item's trace
    (`scale`: the embedding model's similarity scale the question was answered under, when known; `history`: a
    turn's earlier turns)."""
    inputs = registry.MetricInput(llm, settings, item, result, pin, scale, tuple(history))
    scores = []
    for metric in registry.ordered_metrics():
        if metrics is not None and metric.name not in metrics:
            continue
        with tracing.step(f"metric {metric.name}"):
            scores.append(metric.measure(inputs))
            tracing.annotate(value=scores[-1].value, status=scores[-1].status)
    return scores


def timed_out(timeout: float) -> ItemOutcome:
    return "timeout", None, [], f"timed out after {timeout:g} s"
