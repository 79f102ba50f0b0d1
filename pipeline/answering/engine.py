"""The verified query engine: retrieve, grade, rewrite once, generate with citations, check every claim,
retry with a stricter prompt, decide; every step emits a typed event (events.py) and the run lands in DuckDB."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import datetime, timezone

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline import tracing
from pipeline.answering import prompts, status
from pipeline.answering.answer_loop import AnswerRound
from pipeline.answering.context import RunContext
from pipeline.answering.conversation import Turn, bounded, conversation_name
from pipeline.answering.decision import abstain, decide
from pipeline.answering.event_stream import Emit, pulled
from pipeline.answering.events import AnswerResult, Event, Finished, RunFailed
from pipeline.answering.followup import read_question
from pipeline.answering.question import clean_question
from pipeline.answering.retrieval import Retrieval
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import Settings
from pipeline.declarations import option_values, prompt_versions
from pipeline.errors import WorkbenchError
from pipeline.knowledge.similarity_scale import SimilarityScale, scale_for
from pipeline.knowledge.similarity_scale import current as current_scale
from pipeline.models import replay
from pipeline.models.llm import LLM
from pipeline.prompting import Prompt
from pipeline.verification.chain import VerifierChain, effective_chain
from pipeline.verification.faithfulness import FaithfulnessChecker, Passage
from pipeline.verification.registry import load_verifiers, verifier_class
from pipeline.vocabulary import Status
from store.db import Database
from store.errors import ResultNotKept
from store.journal import save_run
from store.records import RunLog

# What the engine itself declares (pipeline/declarations.py): the prompts it sends and the settings its runs'
# results depend on. The checker, the chain and each verifier declare theirs; run_config gathers them all.
PROMPTS = (
    prompts.STANDALONE_QUESTION,
    prompts.GRADE_CONTEXT,
    prompts.REWRITE_QUERY,
    prompts.GENERATE,
    prompts.GENERATE_STRICT,
    prompts.ON_TOPIC,
    prompts.GENERATE_ON_TOPIC,
)
OPTIONS = (
    "generator_model",
    "embed_model",
    "top_k",
    "chunk_size",
    "chunk_overlap",
    "answer_schedule",
    "context_budget_tokens",
    "faithfulness_threshold",
    "max_retries",
    "repair",
    "abstain_below",
    "when_unverified",
    "temperature",
    "llm_backend",
    "model_revision",
    "context_window",
    "retrieval_floor",
    "on_topic_check",
    "on_topic_accept",
    "on_topic_reject",
    "off_topic_final",
    "conversation_history_tokens",
)
# Threads per run: the generation, the context grade, the sentences being checked (each of which verifies
# its claims on a pool of its own, verify_concurrency wide) and the rejected claims being classified.
RUN_THREADS = 8


def run_prompts(settings: Settings) -> list[Prompt]:
    """Every prompt a run under these settings may send, as its parts declare them: the engine's, the checker's
    and those of the verifiers in the effective chain."""
    chain = [verifier_class(name) for name in effective_chain(settings)]
    return [*PROMPTS, *FaithfulnessChecker.prompts, *(p for verifier in chain for p in verifier.prompts)]


def run_options() -> list[str]:
    """The settings a run records, as the parts declare them: the engine's, the chain's, the checker's and every
    registered verifier's (not only the chain's, so that runs with different chains still compare key by key)."""
    verifiers = load_verifiers().values()
    return [*OPTIONS, *VerifierChain.options, *FaithfulnessChecker.options, *(o for v in verifiers for o in v.options)]


def run_config(settings: Settings) -> dict:
    """What a run's result depends on, so runs can be compared later: the values of the declared options, the
    effective verifier chain and the version of every declared prompt the run may send."""
    config = option_values(settings, run_options())
    config["verifier_chain"] = ",".join(effective_chain(settings))
    config["prompts"] = prompt_versions(run_prompts(settings))
    return config


class QuestionRun:
    """One question through the steps: read a follow-up (followup.py), retrieve and grade (retrieval.py), answer
    round by round (answer_loop.py), decide (decision.py), then save. The steps run on a thread of their own and
    emit their events through a sink; `events()` streams them (event_stream.py)."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        question: str,
        kind: str,
        persist: bool = True,
        eval_run_id: int | None = None,
        history: Iterable[Turn | dict | tuple] = (),
        conversation_id: str | None = None,
        turn_no: int | None = None,
    ):
        """`self.result` is the run; `self.log`, its rows, is derived from it once the run ends.
        persist=False leaves writing `self.log` to the caller (the evaluation runner writes it with
        the item's scores in one transaction). `history`: the conversation's earlier turns, oldest first (a
        follow-up is rewritten from them into a standalone question); `conversation_id` and `turn_no` (default:
        the turn after the history's) record the run as that turn of that conversation. An unusable history entry
        raises InputError here, before any run."""
        self.settings, self.db, self.question, self.persist = settings, db, question, persist
        given = list(history)
        self.history = bounded(given, settings.conversation_history_tokens)
        conversation_id = conversation_name(conversation_id)
        if conversation_id is not None and turn_no is None:
            turn_no = len(given) + 1
        self.llm = LLM(settings, db, origin="evaluation" if kind == "eval" else kind, eval_run_id=eval_run_id)
        self.checker = FaithfulnessChecker(self.llm, settings)
        self.retriever = DuckDBRetriever(self.llm, db, settings.top_k)
        self.t0 = time.perf_counter()
        self.result = AnswerResult(
            status=Status.RUNNING,
            question=question,
            kind=kind,
            started_at=datetime.now(timezone.utc),
            generator_model=settings.generator_model,
            config=run_config(settings),
            conversation_id=conversation_id,
            turn_no=turn_no if conversation_id is not None else None,
        )
        self.log: RunLog | None = None
        # the embedding model's similarity scale: measured (or read from the store) on first need; an evaluation
        # on Ray sets the one its knowledge-base snapshot carries
        self.scale: SimilarityScale | None = None

    def events(self) -> Iterator[Event]:
        """The run's events as it goes; the last is Finished (unless the listener stops first: the run is then
        stored as cancelled)."""
        return pulled(self._run, name="question")

    def _run(self, emit: Emit) -> None:
        with (
            tracing.recording("question", kind=self.result.kind) as trace,
            ThreadPoolExecutor(max_workers=RUN_THREADS, thread_name_prefix="question") as pool,
        ):
            ctx = RunContext(
                settings=self.settings,
                llm=self.llm,
                checker=self.checker,
                pool=pool,
                emit=emit,
                result=self.result,
                similarity_scale=self.similarity_scale,
                question=self.question,
            )
            retrieval = Retrieval(ctx, self.retriever)
            try:
                try:
                    self._steps(ctx, retrieval)
                except WorkbenchError as exc:
                    self._fail(exc.message, exc.fix)
                    emit(RunFailed(message=str(exc), error=exc.message, fix=exc.fix))
                except Exception as exc:
                    self._fail(f"internal error: {type(exc).__name__}: {exc}")
                    self._save(trace, retrieval)
                    raise
                self._save(trace, retrieval)
                emit(Finished(message=f"run {self.result.run_id}: {self.result.status}", result=self.result))
            finally:
                if self.log is None:  # the listener stopped listening part-way
                    self.result.status = Status.CANCELLED
                    self._save(trace, retrieval)

    def _steps(self, ctx: RunContext, retrieval: Retrieval) -> None:
        if self.result.conversation_id is not None or self.history.given:
            self.result.standalone_question = self.question
        if self.history.given:
            reading = read_question(ctx, self.history)
            ctx.question, ctx.history_text = reading.question, reading.history_text
        passages = retrieval.retrieve(1, ctx.question)
        if not passages:
            reason = "the knowledge base is empty: ingest documents first (`python -m pipeline ingest data/kb`)"
            ctx.emit(abstain(self.result, reason, answer=status.EMPTY_KB))
            return
        below = retrieval.below_floor(passages)
        if below:  # nothing is generated, not even a rewritten query: the best chunk is as far as unrelated text
            reason = f"the knowledge base does not cover this question ({below})"
            ctx.emit(abstain(self.result, reason, answer=status.NOT_COVERED))
            return
        if self._answered(ctx, retrieval, 1, passages):
            return
        reason = retrieval.grades[-1].reason
        query = retrieval.rewrite()
        if query:
            passages = retrieval.retrieve(2, query)
            below = retrieval.below_floor(passages) if passages else ""
            if passages and not below and self._answered(ctx, retrieval, 2, passages):
                return
            reason = below or (retrieval.grades[-1].reason if passages else "nothing found")
        ctx.emit(abstain(self.result, f"the knowledge base does not cover this question ({reason})"))

    def _answered(self, ctx: RunContext, retrieval: Retrieval, round_no: int, passages: list[Passage]) -> bool:
        """Whether the round answered (then decided); False when its grade found the context not relevant."""
        answer_round = AnswerRound(ctx, retrieval, round_no)
        if not answer_round.answer(passages):
            return False
        ctx.emit(decide(self.settings, self.result, retrieval.relevant))
        answer_round.settle()  # the rejected claims' contradicted-or-unsupported verdicts, after the answer is shown
        return True

    def similarity_scale(self) -> SimilarityScale:
        """The embedding model's similarity scale over this knowledge base (measured once, then stored)."""
        if self.scale is None:
            with tracing.step("similarity scale"):
                if self.db is None:
                    self.scale = scale_for(None, self.llm)
                else:  # a measurement's call is logged apart: it is the knowledge base's, not this question's
                    self.scale = current_scale(self.settings, self.db, self.llm.origin, self.llm)
                tracing.annotate(measured=self.scale.measured, median=self.scale.median)
        return self.scale

    def _fail(self, message: str, fix: str = "") -> None:
        self.result.status, self.result.error, self.result.fix = Status.FAILED, message, fix

    def _save(self, trace: tracing.Trace, retrieval: Retrieval) -> None:
        """Derive the run's rows from the result (once) and write them unless the caller will."""
        calls, wall_ms = self.llm.take_calls(), (time.perf_counter() - self.t0) * 1000
        result = self.result
        costs = replay.run_costs(
            self.llm, calls, self.llm.take_keys(), wall_ms, result.started_at, keep=result.status != Status.FAILED
        )
        result.latency_ms, result.n_calls, result.n_replayed = costs.latency_ms, costs.n_calls, costs.n_replayed
        result.replayed_from = costs.replayed_from
        self.log = result.to_log(
            retrieval.grades,
            retrieval.records,
            datetime.now(timezone.utc),
            calls,
            self.llm.take_cache_entries(),
            spans=trace.records(),
        )
        if self.persist:  # a locked, read-only, newer or damaged store: the run is kept in the journal
            try:
                self.result.run_id, kept = save_run(self.db, self.log, self.settings.store_save_wait_s)
                self.result.journal = str(kept) if kept else None
                if kept:
                    self.result.kept_because, self.result.kept_fix = kept.because.message, kept.because.fix
            except ResultNotKept as exc:  # nor is any journal folder writable: the answer is still shown, and why
                self.result.not_kept = str(exc)


def final_result(events: Iterator[Event]) -> AnswerResult | None:
    """Drain a stream and return its result (the Finished event always comes last)."""
    result = None
    for event in events:
        if isinstance(event, Finished):
            result = event.result
    return result


class VerifiedQueryEngine(CustomQueryEngine):
    """LlamaIndex query engine whose answers carry their claim-by-claim verification."""

    settings: Settings
    db: Database
    kind: str = "chat"

    def stream(
        self,
        question: str,
        history: Iterable[Turn | dict | tuple] = (),
        conversation_id: str | None = None,
        turn_no: int | None = None,
    ) -> Iterator[Event]:
        """Events of one question; raises InputError before any run for an unusable question (or history entry).
        `history`: the conversation's earlier turns, oldest first (conversation.Turn); `conversation_id` and
        `turn_no` record the run as that turn of that conversation (turn_no defaults to the one after the
        history's)."""
        return QuestionRun(
            self.settings,
            self.db,
            clean_question(question, self.settings),
            self.kind,
            history=history,
            conversation_id=conversation_id,
            turn_no=turn_no,
        ).events()

    def custom_query(self, query_str: str) -> Response:
        result = final_result(self.stream(query_str))
        nodes = [
            NodeWithScore(
                node=TextNode(id_=str(p.chunk_id), text=p.text, metadata={"source": p.source, "n": p.n}), score=p.score
            )
            for p in result.passages
        ]
        return Response(
            response=result.answer,
            source_nodes=nodes,
            metadata={
                "run_id": result.run_id,
                "status": result.status,
                "faithfulness": result.faithfulness,
                "error": result.error,
                "claims": [asdict(c) for c in result.final_claims],
            },
        )
