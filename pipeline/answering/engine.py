"""The verified query engine: retrieve, grade, rewrite once, generate with citations, check every claim,
retry with a stricter prompt, decide; every step streams out as an Event and lands in DuckDB."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from datetime import datetime, timezone

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline import tracing
from pipeline.answering import on_topic, prompts, status
from pipeline.answering.budget import on_whole_chunk, within_budget
from pipeline.answering.conversation import STEP, History, Turn, bounded, conversation_name, refers_back
from pipeline.answering.events import AnswerResult, Attempt, Event
from pipeline.answering.live import grade_view
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.answering.streamed import LiveAttempt, is_abstention
from pipeline.answering.trim import without_unsupported
from pipeline.config import Settings
from pipeline.declarations import option_values, prompt_versions
from pipeline.errors import InputError, WorkbenchError
from pipeline.knowledge.similarity_scale import SimilarityScale, floor, scale_for
from pipeline.knowledge.similarity_scale import current as current_scale
from pipeline.models import replay
from pipeline.models.llm import LLM
from pipeline.models.slots import schedule
from pipeline.models.structured import ask
from pipeline.text import one_line, plural, sentences
from pipeline.verification.chain import VerifierChain, effective_chain
from pipeline.verification.claims import EXTRACTION_ERROR, context_block
from pipeline.verification.faithfulness import CheckedClaim, FaithfulnessChecker, Passage
from pipeline.verification.placement import place_claim
from pipeline.verification.registry import load_verifiers, verifier_class
from store.db import Database
from store.errors import ResultNotKept
from store.journal import save_run
from store.records import AttemptRecord, GradeRecord, RetrievalRecord, RunLog

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


INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def clean_question(question: str | None, settings: Settings) -> str:
    """The question on one line without control, zero-width or direction characters; InputError when nothing
    visible is left or it is too long."""
    raw = question or ""
    text = one_line(INVISIBLE.sub(" ", raw))
    if not text and raw.strip():
        raise InputError(
            "the question has no visible characters (only control, zero-width or blank ones)",
            fix="type a question in words",
        )
    if not text:
        raise InputError("the question is empty", fix="type a question about the knowledge base")
    if len(text) > settings.max_question_chars:
        raise InputError(
            f"the question has {len(text):,} characters; the limit is {settings.max_question_chars:,}",
            fix="shorten it, or raise WORKBENCH_MAX_QUESTION_CHARS",
        )
    return text


def run_prompts(settings: Settings) -> list[prompts.Prompt]:
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
    """The state of one question as it goes through the steps."""

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
        self.history: History = bounded(given, settings.conversation_history_tokens)
        self.history_text = ""  # the earlier turns the generation prompt shows (a follow-up's only)
        conversation_id = conversation_name(conversation_id)
        if conversation_id is not None and turn_no is None:
            turn_no = len(given) + 1
        self.llm = LLM(settings, db, origin="evaluation" if kind == "eval" else kind, eval_run_id=eval_run_id)
        self.checker = FaithfulnessChecker(self.llm, settings)
        self.retriever = DuckDBRetriever(self.llm, db, settings.top_k)
        self.t0 = time.perf_counter()
        self.result = AnswerResult(
            status="running",
            question=question,
            kind=kind,
            started_at=datetime.now(timezone.utc),
            generator_model=settings.generator_model,
            config=run_config(settings),
            conversation_id=conversation_id,
            turn_no=turn_no if conversation_id is not None else None,
        )
        self.grades: list[GradeRecord] = []
        self.relevant: bool | None = None  # the context grade that let the question through
        self.retrievals: list[RetrievalRecord] = []
        self.log: RunLog | None = None
        self.classifying: list[tuple[int, CheckedClaim, Future]] = []  # (attempt, claim, its classification)
        # the embedding model's similarity scale: measured (or read from the store) on first need; an evaluation
        # on Ray sets the one its knowledge-base snapshot carries
        self.scale: SimilarityScale | None = None
        self.schedule: str | None = None  # overlapped | sequential, chosen at the first round (models/slots.py)
        self.generation_prompts: set[str] = set()  # every generation prompt an attempt sent (a repair never replays)

    # -- the stream ---------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        with (
            tracing.recording("question", kind=self.result.kind) as self.trace,
            ThreadPoolExecutor(max_workers=RUN_THREADS, thread_name_prefix="question") as self.pool,
        ):
            yield from self._traced_events()

    def _traced_events(self) -> Iterator[Event]:
        try:
            try:
                yield from self._steps()
            except WorkbenchError as exc:
                self._fail(exc.message, exc.fix)
                yield Event("error", str(exc), {"error": exc.message, "fix": exc.fix})
            except Exception as exc:
                self._fail(f"internal error: {type(exc).__name__}: {exc}")
                self._save()
                raise
            self._save()
            yield Event("final", f"run {self.result.run_id}: {self.result.status}", {"result": self.result})
        finally:
            if self.log is None:  # the consumer stopped listening part-way
                self.result.status = "cancelled"
                self._save()

    def _steps(self) -> Iterator[Event]:
        self.question = yield from self._standalone()
        passages = yield from self._retrieve(1, self.question)
        if not passages:
            yield from self._abstain(
                "the knowledge base is empty: ingest documents first (`python -m pipeline ingest data/kb`)",
                answer=status.EMPTY_KB,
            )
            return
        below = self._below_floor(passages)
        if below:  # nothing is generated, not even a rewritten query: the best chunk is as far as unrelated text
            yield from self._abstain(
                f"the knowledge base does not cover this question ({below})", answer=status.NOT_COVERED
            )
            return
        if (yield from self._answer(1, passages)):
            return
        reason = self.grades[-1].reason
        query = yield from self._rewrite()
        if query:
            passages = yield from self._retrieve(2, query)
            below = self._below_floor(passages) if passages else ""
            if passages and not below and (yield from self._answer(2, passages)):
                return
            reason = below or (self.grades[-1].reason if passages else "nothing found")
        yield from self._abstain(
            f"the knowledge base does not cover this question ({reason})", answer=status.NOT_COVERED
        )

    # -- the embedding model's scale and the retrieval floor ------------------------------------
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

    def _below_floor(self, passages: list[Passage]) -> str:
        """Why the best chunk is too far from the question to answer from (its similarity no higher than the
        retrieval_floor quantile of unrelated pairs); "" when it is above, or there is no floor."""
        quantile = self.settings.retrieval_floor
        if quantile <= 0:
            return ""
        scale = self.similarity_scale()
        limit = floor(scale, quantile)
        best = max(p.score for p in passages)
        tracing.annotate(retrieval_floor=limit, best_similarity=best)
        if limit is None or best > limit:
            return ""
        return (
            f"the best chunk's similarity {best:.2f} is no higher than unrelated text: the "
            f"{_ordinal(quantile)} percentile of unrelated pairs is {limit:.2f}"
        )

    # -- a follow-up's standalone question -------------------------------------------------------
    def _standalone(self):
        """The question the run works on: a follow-up (conversation.refers_back) is rewritten from the bounded
        history into a standalone question by the model; a question that stands alone, or has no earlier turn to
        lean on, is used as asked without a model call; a rewrite reply that cannot be used leaves the question as
        asked (never a made-up rewrite). Only a run given history has this step."""
        asked, history = self.question, self.history
        if self.result.conversation_id is not None or history.given:
            self.result.standalone_question = asked
        if not history.given:
            return asked
        why = refers_back(asked)
        with tracing.step(STEP, question=asked, history=history.summary(), history_tokens=history.tokens):
            if not history.turns:
                method, standalone = "no history", asked
                message = f"no earlier turn to read the question with ({history.summary()}): used as asked"
            elif why is None:
                method, standalone = "rule", asked
                message = "the question stands alone (it refers to no earlier turn): used as asked, no rewrite"
            else:
                method, standalone, message = self._rewrite_followup(asked, why)
            tracing.annotate(method=method, standalone=standalone, why=why or "")
        if why is not None and history.turns:
            self.history_text = history.block()
        self.result.standalone_question = standalone
        yield Event(
            "standalone",
            message,
            {
                "question": asked,
                "standalone": standalone,
                "method": method,
                "why": why,
                "turns": len(history.turns),
                "dropped": history.dropped,
                "skipped": history.skipped,
                "history_tokens": history.tokens,
            },
        )
        return standalone

    def _rewrite_followup(self, asked: str, why: str) -> tuple[str, str, str]:
        """(method, the standalone question, the step's message) from the model's rewrite of a follow-up."""
        result = ask(
            self.llm,
            "standalone_question",
            self.settings.generator_model,
            prompts.STANDALONE_QUESTION,
            prompts.standalone_input(self.history.block(), asked),
        )
        rewrite = one_line(INVISIBLE.sub(" ", result.value.standalone)) if result.value else ""
        problem = result.invalid_reason
        if problem is None and not rewrite:
            problem = "the rewrite is empty"
        elif problem is None and len(rewrite) > self.settings.max_question_chars:
            problem = f"the rewrite has {len(rewrite):,} characters, more than a question may have"
        if problem:
            tracing.annotate(fallback=problem)
            return (
                "fallback",
                asked,
                f"a follow-up ({why}), but its rewrite could not be used ({problem}): used as asked",
            )
        if rewrite == asked:
            return "model", asked, f"a follow-up ({why}); the model found it standalone as asked"
        return "model", rewrite, f"a follow-up ({why}): rewritten from the conversation as '{rewrite}'"

    # -- retrieval, grading, rewriting -----------------------------------------------------------
    def _retrieve(self, round_no: int, query: str):
        with tracing.step("retrieve", round=round_no, top_k=self.settings.top_k):
            nodes = self.retriever.retrieve(query)
        passages = [
            Passage(
                n,
                int(node.node.metadata["chunk_id"]),
                node.node.metadata["source"],
                node.node.get_content(),
                float(node.score),
            )
            for n, node in enumerate(nodes, start=1)
        ]
        # a negative chunk id is no chunk of the knowledge base (a sweep's own index numbers its chunks -rank, as
        # given contexts are): the retrieval keeps the chunk's text and source itself
        self.retrievals += [
            RetrievalRecord(
                round_no,
                query,
                p.n,
                p.chunk_id,
                p.score,
                context_text=p.text if p.chunk_id < 0 else None,
                context_source=p.source if p.chunk_id < 0 else None,
            )
            for p in passages
        ]
        self.result.passages = passages
        yield Event(
            "retrieve",
            f"retrieved {len(passages)} chunks" + (f" for '{query}'" if query != self.result.question else ""),
            {"round": round_no, "query": query, "passages": passages},
        )
        return passages

    def _grade_call(self, round_no: int, passages: list[Passage]):
        """The context grade, read from the short view of the context (runs while the answer streams)."""
        with tracing.step("grade context", round=round_no):
            result = ask(
                self.llm,
                "grade_context",
                self.settings.generator_model,
                prompts.GRADE_CONTEXT,
                prompts.grade_input(self.question, grade_view(self.question, passages)),
            )
            tracing.annotate(relevant=result.value.relevant if result.value else None)
        return result

    def _graded(self, round_no: int, result) -> tuple[Event, bool | None, str]:
        query = self.retrievals[-1].query
        self.relevant = result.value.relevant if result.value else None
        if result.value is None:
            self.grades.append(GradeRecord(round_no, query, None, result.invalid_reason))
            event = Event(
                "grade",
                f"context grade unreadable, answering anyway: {result.invalid_reason}",
                {"round": round_no, "relevant": None, "reason": result.invalid_reason},
            )
            return event, None, result.invalid_reason
        grade = result.value
        self.grades.append(GradeRecord(round_no, query, grade.relevant, grade.reason))
        event = Event(
            "grade",
            ("context is relevant" if grade.relevant else "context is not relevant") + f": {grade.reason}",
            {"round": round_no, "relevant": grade.relevant, "reason": grade.reason},
        )
        return event, grade.relevant, grade.reason

    def _rewrite(self):
        with tracing.step("rewrite query"):
            result = ask(
                self.llm,
                "rewrite_query",
                self.settings.generator_model,
                prompts.REWRITE_QUERY,
                prompts.rewrite_input(self.question),
            )
        query = one_line(result.value.query) if result.value else ""
        if not query or query.lower() == self.question.lower():
            yield Event(
                "rewrite",
                "no different query to try" + (f" ({result.invalid_reason})" if result.invalid_reason else ""),
                {"query": None},
            )
            return None
        self.result.rewritten_query = query
        yield Event("rewrite", f"rewrote the query as '{query}'", {"query": query})
        return query

    # -- generation and checking --------------------------------------------------------------
    def _answer(self, round_no: int, passages: list[Passage]):
        """The attempts on one round's passages; False when that round's grade found the context not relevant
        (the first attempt, streamed while the grade ran, is then withdrawn)."""
        failed: list[str] = []
        topic: on_topic.TopicCheck | None = None  # the previous attempt's on-topic check
        if (yield from self._plan()) == "sequential":  # one slot: grade first, generate from what it kept
            relevant, kept = yield from self._grade_first(round_no, passages)
            if relevant is False:
                return False
            passages, first_grade = (yield from self._within_budget(passages, kept)), None
        else:  # slots to spare: the grade runs alongside the first attempt
            passages, first_grade = (yield from self._within_budget(passages, None)), round_no
        attempt_no = 0
        for generation in range(1, self.settings.max_retries + 2):
            attempt_no += 1
            retry = self._on_topic_retry(passages, failed, topic)
            grade_round = first_grade if generation == 1 else None
            attempt, topic = yield from self._attempt(attempt_no, passages, failed, grade_round, retry)
            if attempt is None:
                yield from self._settle_classifications(announce=False)
                return False
            flagged, off_target = attempt.record.status == status.FLAGGED, topic is not None and not topic.on_topic
            if not flagged and not off_target:
                break
            if flagged and not off_target and self._repairs_by_dropping():
                trimmed = yield from self._trim(attempt_no + 1, attempt)
                if trimmed is not None:
                    attempt_no += 1
                    if trimmed[1] is None or trimmed[1].on_topic is not False:
                        break  # otherwise the trimmed answer misses the question: regenerate from the flagged one
            failed = attempt.record.failed_claims if flagged else []
            if generation <= self.settings.max_retries:
                yield _retry_event(attempt.record, attempt_no + 1, failed, topic if off_target else None, self.settings)
        yield from self._settle_classifications()
        yield from self._decide()
        return True

    def _repairs_by_dropping(self) -> bool:
        """Whether a flagged attempt is first repaired by dropping its unsupported sentences (setting repair; auto:
        on the sequential schedule, where a regeneration queues behind every other call); max_retries = 0 repairs
        nothing: the first answer is shown as it was checked."""
        if self.settings.max_retries == 0:
            return False
        if self.settings.repair == "auto":
            return self.schedule == "sequential"
        return self.settings.repair == "drop"

    def _trim(self, attempt_no: int, flagged: Attempt):
        """Attempt `attempt_no`: the flagged attempt without its sentences whose every claim failed, made without a
        model call (trim.py); (the attempt, its on-topic check), or None, with no event, where dropping cannot
        repair it."""
        trimmed = without_unsupported(flagged.record.answer, flagged.claims)
        if trimmed is None:
            return None
        source = flagged.record.attempt_no
        with tracing.step(f"attempt {attempt_no}", trimmed_from=source, dropped=len(trimmed.dropped)):
            record = AttemptRecord(
                attempt_no,
                False,
                trimmed.answer,
                status.UNVERIFIED,
                None,
                0,
                0,
                trimmed_from=source,
                dropped=trimmed.dropped,
            )
            attempt = Attempt(record, trimmed.claims)
            self.result.attempts.append(attempt)
            attempt.score(self.settings.faithfulness_threshold)
            topic = self._check_on_topic(record)
            tracing.annotate(status=record.status, faithfulness=record.faithfulness)
        yield Event(
            "trim",
            f"attempt {attempt_no}: attempt {source} without its {plural(len(trimmed.dropped), 'unsupported sentence')}"
            " (no model call)",
            {
                "attempt": attempt_no,
                "from_attempt": source,
                "dropped": trimmed.dropped,
                "answer": trimmed.answer,
                "claims": trimmed.claims,
            },
        )
        yield _score_event(attempt)
        if topic is not None:
            yield _on_topic_event(record, topic)
        return attempt, topic

    def _plan(self):
        """The schedule of this run's calls, chosen once from the generator host's slots (an event says which)."""
        if self.schedule is None:
            self.schedule, why = schedule(self.settings)
            tracing.annotate(schedule=self.schedule, schedule_why=why)
            detail = "grading first, then generating" if self.schedule == "sequential" else "grading while generating"
            yield Event("plan", f"{self.schedule} schedule, {detail}: {why}", {"schedule": self.schedule, "why": why})
        return self.schedule

    def _grade_first(self, round_no: int, passages: list[Passage]):
        """The sequential schedule's grade, before any generation: (relevant, the passage numbers it kept)."""
        result = self._grade_call(round_no, passages)
        event, relevant, _ = self._graded(round_no, result)
        yield event
        numbers = {p.n for p in passages}
        kept = set(result.value.passages) & numbers if result.value is not None and relevant else set()
        return relevant, kept

    def _within_budget(self, passages: list[Passage], kept: set[int] | None):
        """The passages the generator reads under the context budget (the whole chunks without one)."""
        budget = self.settings.context_budget_tokens
        with tracing.step("context budget", budget=budget):
            budgeted = within_budget(self.question, passages, budget, kept)
            tracing.annotate(
                kept_tokens=budgeted.kept_tokens,
                total_tokens=budgeted.total_tokens,
                **{f"passage_{c.n}": c.line() for c in budgeted.cuts},
            )
        yield Event("budget", budgeted.summary(), {"budget": budget, "cuts": budgeted.cuts})
        return budgeted.passages

    def _settle_classifications(self, announce: bool = True) -> Iterator[Event]:
        """Wait for the rejected claims still being classified and give each its final verdict, evidence and
        reason (in place: the attempts and the events hold these very claims)."""
        pending, self.classifying = self.classifying, []
        for attempt_no, claim, future in pending:
            final = future.result()
            if claim.verdict == EXTRACTION_ERROR:  # found to repeat an earlier sentence's claim meanwhile
                continue
            final = on_whole_chunk(final, self.result.passages)
            for name in ("verdict", "verifier", "passage", "span", "reason"):
                setattr(claim, name, getattr(final, name))
            if announce:
                yield Event(
                    "verdict",
                    f"attempt {attempt_no}, claim {claim.claim_no}: {claim.verdict}",
                    {"attempt": attempt_no, "claim": claim},
                )

    def _on_topic_retry(self, passages: list[Passage], failed: list[str], topic: on_topic.TopicCheck | None):
        """The retry prompt of an attempt after an off-target one: it names the question's terms the answer
        lacked and the gap the model stated (and any failed claims); None for the usual prompts."""
        if topic is None or topic.on_topic is not False:
            return None
        user = prompts.generate_on_topic_input(
            self.question, context_block(passages), topic.missing, topic.gap, failed, self.history_text
        )
        return prompts.GENERATE_ON_TOPIC.messages(user)

    def _attempt(
        self,
        attempt_no: int,
        passages: list[Passage],
        failed: list[str],
        grade_round: int | None,
        retry: list[dict] | None = None,
    ):
        """(the attempt, its on-topic check or None when it was not checked); (None, None) when withdrawn."""
        with tracing.step(f"attempt {attempt_no}", strict=attempt_no > 1):
            live = LiveAttempt(self, attempt_no, passages, failed, retry)
            try:
                yield from live.run(grade_round)
            finally:
                live.stop.set()
            self.classifying += [(attempt_no, claim, future) for claim, future in live.classifying]
            if live.discarded:
                return None, None
            attempt = self._score(live)
            topic = self._check_on_topic(attempt.record)
            tracing.annotate(status=attempt.record.status, faithfulness=attempt.record.faithfulness)
        if live.errors:
            yield Event(
                "claims",
                f"claims could not be extracted: {live.errors[0]}",
                {"attempt": attempt_no, "claims": None, "error": live.errors[0]},
            )
        elif attempt.record.status != "abstained":
            yield _score_event(attempt)
        if topic is not None:
            yield _on_topic_event(attempt.record, topic)
        return attempt, topic

    def _check_on_topic(self, record: AttemptRecord) -> on_topic.TopicCheck | None:
        """After verification: does the answer address the question (kept on the record); None when the check
        is off or there is no answer to check (an abstention)."""
        if not self.settings.on_topic_check or record.status == "abstained" or not record.answer:
            return None
        with tracing.step("on-topic check"):
            topic = on_topic.check(self.llm, self.settings, self.question, record.answer, self.similarity_scale())
            tracing.annotate(on_topic=topic.on_topic, score=topic.score, method=topic.method)
        on_topic.keep(record, topic)
        return topic

    def _score(self, live: LiveAttempt) -> Attempt:
        """The attempt's record from its streamed answer and the verdicts of its sentences."""
        raw = live.reply.text
        answer = raw.strip()
        record = AttemptRecord(live.attempt_no, live.strict, answer, status.UNVERIFIED, None, 0, 0, seed=live.seed)
        attempt = Attempt(record)
        self.result.attempts.append(attempt)
        if is_abstention(answer) or not answer:
            record.status = "abstained"
            return attempt
        if live.errors:
            record.status, record.error = "unverified", live.errors[0]
            return attempt
        placed = _placed(answer, len(raw) - len(raw.lstrip()), live.claims)
        attempt.claims = [on_whole_chunk(c, self.result.passages) for c in placed]
        return attempt.score(self.settings.faithfulness_threshold)

    # -- decision -----------------------------------------------------------------------------
    def _decide(self):
        best = _best_attempt(self.result.attempts)
        record = best.record
        threshold = self.settings.faithfulness_threshold
        if record.status == "abstained":
            yield from self._abstain(
                "the generator found no answer in the retrieved passages", best, status.NO_ANSWER_IN_SOURCES
            )
            return
        final = record.status  # accepted | flagged | no_claims | unverified: the attempt's own label
        if (
            final == status.FLAGGED
            and record.faithfulness < self.settings.abstain_below
            and self.settings.when_unverified == "abstain"
        ):
            yield from self._abstain(
                f"no attempt reached faithfulness {threshold:.2f}; the best reached {record.faithfulness:.2f}, "
                f"below {self.settings.abstain_below:.2f}, under which an unverified answer is withheld",
                best,
                status.NOT_VERIFIED_RELEVANT if self.relevant else status.NOT_VERIFIED,
            )
            return
        if record.on_topic is False:  # the best attempt is off target, so every checked attempt was
            if self.settings.off_topic_final == "abstain":
                yield from self._abstain(
                    f"no attempt addressed the question, so none is given; the best: {record.on_topic_reason}",
                    best,
                    status.NOT_ON_TOPIC,
                )
                return
            final = status.OFF_TOPIC
        self._finish(final, best, record.answer)
        yield Event("decide", _decision_message(final, record), {"status": final})

    def _abstain(self, reason: str, best: Attempt | None = None, answer: str = status.NOT_COVERED):
        self.result.abstain_reason = reason
        self._finish("abstained", best, answer)
        yield Event("abstain", f"abstained: {reason}", {"reason": reason})

    def _finish(self, status: str, attempt: Attempt | None, answer: str) -> None:
        result = self.result
        result.status, result.answer = status, answer
        if attempt is not None:
            result.final_attempt = attempt.record.attempt_no
            result.faithfulness = attempt.record.faithfulness

    def _fail(self, message: str, fix: str = "") -> None:
        self.result.status, self.result.error, self.result.fix = "failed", message, fix

    def _save(self) -> None:
        """Derive the run's rows from the result (once) and write them unless the caller will."""
        calls, wall_ms = self.llm.take_calls(), (time.perf_counter() - self.t0) * 1000
        result = self.result
        costs = replay.run_costs(
            self.llm, calls, self.llm.take_keys(), wall_ms, result.started_at, keep=result.status != "failed"
        )
        result.latency_ms, result.n_calls, result.n_replayed = costs.latency_ms, costs.n_calls, costs.n_replayed
        result.replayed_from = costs.replayed_from
        self.log = result.to_log(
            self.grades,
            self.retrievals,
            datetime.now(timezone.utc),
            calls,
            self.llm.take_cache_entries(),
            spans=self.trace.records(),
        )
        if self.persist:  # a locked, read-only, newer or damaged store: the run is kept in the journal
            try:
                self.result.run_id, kept = save_run(self.db, self.log, self.settings.store_save_wait_s)
                self.result.journal = str(kept) if kept else None
                if kept:
                    self.result.kept_because, self.result.kept_fix = kept.because.message, kept.because.fix
            except ResultNotKept as exc:  # nor is any journal folder writable: the answer is still shown, and why
                self.result.not_kept = str(exc)


def _ordinal(quantile: float) -> str:
    """0.95 -> "95th", 0.5 -> "50th", 0.975 -> "97.5th"."""
    number = f"{quantile * 100:.1f}".rstrip("0").rstrip(".")
    last = int(float(number)) % 100 if "." not in number else 0
    suffix = "th" if "." in number or 10 <= last % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(last % 10, "th")
    return number + suffix


def _best_attempt(attempts: list[Attempt]) -> Attempt:
    """The on-target attempt with the highest faithfulness (an unchecked or undecided one counts as on
    target); if every scored attempt is off target, the most faithful of them; without a scored attempt,
    the last on-target one, else the last."""
    scored = [a for a in attempts if a.record.faithfulness is not None]
    pool = scored or attempts
    pool = [a for a in pool if a.record.on_topic is not False] or pool
    if not scored:
        return pool[-1]
    return max(pool, key=lambda a: (a.record.faithfulness, -a.record.attempt_no))


def _retry_event(
    record: AttemptRecord, next_no: int, failed: list[str], topic: on_topic.TopicCheck | None, settings
) -> Event:
    why, names = [], []
    if failed:
        why.append(f"faithfulness {record.faithfulness:.2f} is below {settings.faithfulness_threshold:.2f}")
        names.append(plural(len(failed), "failed claim"))
    if topic is not None:
        why.append("the answer does not address the question")
        if topic.missing:
            names.append("the question's terms it lacks (" + ", ".join(topic.missing) + ")")
        if topic.gap:
            names.append(f"what it missed ({topic.gap})")
    prompt = "an on-topic prompt" if topic is not None else "a stricter prompt"
    return Event(
        "retry",
        f"{' and '.join(why)}; retrying with {prompt}" + (f" that names {' and '.join(names)}" if names else ""),
        {
            "attempt": next_no,
            "failed_claims": failed,
            "off_topic": topic is not None,
            "missing_terms": topic.missing if topic else [],
            "gap": topic.gap if topic else "",
        },
    )


def _on_topic_event(record: AttemptRecord, topic: on_topic.TopicCheck) -> Event:
    return Event(
        "on_topic",
        f"attempt {record.attempt_no}: {on_topic.describe(record)}",
        {
            "attempt": record.attempt_no,
            "on_topic": topic.on_topic,
            "score": topic.score,
            "method": topic.method,
            "reason": topic.reason,
            "missing_terms": topic.missing,
        },
    )


def _score_event(attempt: Attempt) -> Event:
    record = attempt.record
    faith = record.faithfulness
    return Event(
        "score",
        f"attempt {record.attempt_no}: faithfulness "
        + (
            f"{faith:.2f} ({record.n_supported}/{record.n_claims} claims supported)"
            if faith is not None
            else f"not scored ({record.status})"
        ),
        {"attempt": record.attempt_no, "faithfulness": faith, "status": record.status},
    )


def _placed(answer: str, lead: int, claims: list[CheckedClaim]) -> list[CheckedClaim]:
    """Claims on the answer sentence they were extracted from (spans moved by the `lead` whitespace the
    answer lost); a claim whose sentence the final answer cuts differently is placed by its text."""
    parts = sentences(answer)
    spans = {(p.start, p.end) for p in parts}
    for claim in claims:
        start, end = claim.answer_span
        claim.answer_span = (start - lead, end - lead)
        if claim.answer_span not in spans:
            at = place_claim(claim.text, parts)
            claim.answer_span = (parts[at].start, parts[at].end) if at is not None else None
    return claims


def _decision_message(status: str, record: AttemptRecord) -> str:
    if status == "accepted":
        return f"accepted attempt {record.attempt_no} (faithfulness {record.faithfulness:.2f})"
    if status == "flagged":
        return (
            f"no attempt reached the threshold; showing attempt {record.attempt_no} "
            f"(faithfulness {record.faithfulness:.2f}) with its unsupported claims marked"
        )
    if status == "no_claims":
        return "the answer makes no checkable claims"
    if status == "off_topic":
        return (
            f"no attempt addressed the question; showing attempt {record.attempt_no} "
            f"(faithfulness {'n/a' if record.faithfulness is None else f'{record.faithfulness:.2f}'}) "
            "marked as not addressing it"
        )
    return f"the answer could not be verified: {record.error or 'no claim got a verdict'}"


def final_result(events: Iterator[Event]) -> AnswerResult:
    """Drain a stream and return its result (the final event always comes last)."""
    result = None
    for event in events:
        if event.kind == "final":
            result = event.data["result"]
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
