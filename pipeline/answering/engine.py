"""The verified query engine: retrieve, grade, rewrite once, generate with citations, check every claim,
retry with a stricter prompt, decide; every step streams out as an Event and lands in DuckDB."""

from __future__ import annotations

import queue
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import datetime, timezone

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline import tracing
from pipeline.answering import prompts, status
from pipeline.answering.events import AnswerResult, Attempt, Event
from pipeline.answering.retriever import DuckDBRetriever
from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.models.llm import LLM
from pipeline.models.structured import ask
from pipeline.text import one_line
from pipeline.verification.chain import effective_chain
from pipeline.verification.faithfulness import (
    ABSTAIN_SENTENCE,
    SUPPORTED,
    UNVERIFIED,
    FaithfulnessChecker,
    Passage,
    context_block,
)
from pipeline.verification.placement import place_claims
from store.db import Database
from store.journal import save_run
from store.records import AttemptRecord, GradeRecord, RetrievalRecord, RunLog

PROMPTS = (
    prompts.GRADE_CONTEXT,
    prompts.REWRITE_QUERY,
    prompts.GENERATE,
    prompts.GENERATE_STRICT,
    prompts.EXTRACT_CLAIMS,
    prompts.NLI_JUDGE,
)
_DONE = object()


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


def run_config(settings: Settings) -> dict:
    """What a run's result depends on, so runs can be compared later."""
    keys = (
        "generator_model",
        "claim_model",
        "verifier_model",
        "nli_model",
        "embed_model",
        "top_k",
        "chunk_size",
        "chunk_overlap",
        "faithfulness_threshold",
        "max_retries",
        "abstain_below",
        "when_unverified",
        "temperature",
        "precheck_enabled",
        "precheck_novel_share",
        "precheck_novel_words",
        "verify_scope",
        "llm_backend",
        "model_revision",
        "context_window",
    )
    config = {key: getattr(settings, key) for key in keys}
    config["verifier_chain"] = ",".join(effective_chain(settings))
    config["prompts"] = {p.name: p.version for p in PROMPTS}
    return config


def is_abstention(answer: str) -> bool:
    return one_line(answer).lower().startswith(ABSTAIN_SENTENCE.lower().rstrip("."))


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
    ):
        """`self.result` is the run; `self.log`, its rows, is derived from it once the run ends.
        persist=False leaves writing `self.log` to the caller (the evaluation runner writes it with
        the item's scores in one transaction)."""
        self.settings, self.db, self.question, self.persist = settings, db, question, persist
        self.llm = LLM(settings, db, origin="evaluation" if kind == "eval" else kind, eval_run_id=eval_run_id)
        self.checker = FaithfulnessChecker(self.llm, settings)
        self.retriever = DuckDBRetriever(self.llm, db, settings.top_k)
        self.t0 = time.perf_counter()
        self.result = AnswerResult(
            None,
            "running",
            question,
            None,
            kind=kind,
            started_at=datetime.now(timezone.utc),
            generator_model=settings.generator_model,
            config=run_config(settings),
        )
        self.grades: list[GradeRecord] = []
        self.relevant: bool | None = None  # the context grade that let the question through
        self.retrievals: list[RetrievalRecord] = []
        self.log: RunLog | None = None

    # -- the stream ---------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        with tracing.recording("question", kind=self.result.kind) as self.trace:
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
        passages = yield from self._retrieve(1, self.question)
        if not passages:
            yield from self._abstain(
                "the knowledge base is empty: ingest documents first (`python -m pipeline ingest data/kb`)",
                answer=status.EMPTY_KB,
            )
            return
        relevant, reason = yield from self._grade(1, passages)
        self.relevant = relevant
        if relevant is False:
            query = yield from self._rewrite()
            if query:
                passages = yield from self._retrieve(2, query)
                relevant, reason = (yield from self._grade(2, passages)) if passages else (False, "nothing found")
            if relevant is False:
                yield from self._abstain(
                    f"the knowledge base does not cover this question ({reason})", answer=status.NOT_COVERED
                )
                return
            self.relevant = relevant
        yield from self._answer(passages)

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
        self.retrievals += [RetrievalRecord(round_no, query, p.n, p.chunk_id, p.score) for p in passages]
        self.result.passages = passages
        yield Event(
            "retrieve",
            f"retrieved {len(passages)} chunks" + (f" for '{query}'" if round_no > 1 else ""),
            {"round": round_no, "query": query, "passages": passages},
        )
        return passages

    def _grade(self, round_no: int, passages: list[Passage]):
        with tracing.step("grade context", round=round_no):
            result = ask(
                self.llm,
                "grade_context",
                self.settings.generator_model,
                prompts.GRADE_CONTEXT,
                prompts.grade_input(self.question, context_block(passages)),
            )
            tracing.annotate(relevant=result.value.relevant if result.value else None)
        query = self.retrievals[-1].query
        if result.value is None:
            self.grades.append(GradeRecord(round_no, query, None, result.invalid_reason))
            yield Event(
                "grade",
                f"context grade unreadable, answering anyway: {result.invalid_reason}",
                {"round": round_no, "relevant": None, "reason": result.invalid_reason},
            )
            return None, result.invalid_reason
        grade = result.value
        self.grades.append(GradeRecord(round_no, query, grade.relevant, grade.reason))
        yield Event(
            "grade",
            ("context is relevant" if grade.relevant else "context is not relevant") + f": {grade.reason}",
            {"round": round_no, "relevant": grade.relevant, "reason": grade.reason},
        )
        return grade.relevant, grade.reason

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
    def _answer(self, passages: list[Passage]):
        failed: list[str] = []
        for attempt_no in range(1, self.settings.max_retries + 2):
            attempt = yield from self._attempt(attempt_no, passages, failed)
            if attempt.record.status != status.FLAGGED:
                break
            faith = attempt.record.faithfulness
            failed = attempt.record.failed_claims
            if attempt_no <= self.settings.max_retries:
                yield Event(
                    "retry",
                    f"faithfulness {faith:.2f} is below {self.settings.faithfulness_threshold:.2f}; "
                    f"retrying with a stricter prompt that names {len(failed)} failed claim(s)",
                    {"attempt": attempt_no + 1, "failed_claims": failed},
                )
        yield from self._decide()

    def _attempt(self, attempt_no: int, passages: list[Passage], failed: list[str]):
        with tracing.step(f"attempt {attempt_no}", strict=attempt_no > 1):
            attempt = yield from self._checked_attempt(attempt_no, passages, failed)
            tracing.annotate(status=attempt.record.status, faithfulness=attempt.record.faithfulness)
        return attempt

    def _checked_attempt(self, attempt_no: int, passages: list[Passage], failed: list[str]):
        strict = attempt_no > 1
        prompt = prompts.GENERATE_STRICT if strict else prompts.GENERATE
        with tracing.step("generate"):
            reply = self.llm.chat(
                "generate",
                self.settings.generator_model,
                prompt.messages(
                    prompts.generate_input(self.question, context_block(passages), failed if strict else None)
                ),
            )
        answer = reply.text.strip()
        yield Event(
            "generate",
            f"attempt {attempt_no}: generated {len(answer.split())} words"
            + (" with the stricter prompt" if strict else ""),
            {"attempt": attempt_no, "strict": strict, "answer": answer},
        )
        record = AttemptRecord(attempt_no, strict, answer, status.UNVERIFIED, None, 0, 0)
        attempt = Attempt(record)
        self.result.attempts.append(attempt)
        if is_abstention(answer) or not answer:
            record.status = "abstained"
            return attempt
        with tracing.step("extract claims"):
            extraction = self.checker.extract_claims(self.question, answer)
        if extraction.claims is None:
            record.status, record.error = "unverified", extraction.invalid_reason
            yield Event(
                "claims",
                f"claims could not be extracted: {extraction.invalid_reason}",
                {"attempt": attempt_no, "claims": None, "error": extraction.invalid_reason},
            )
            return attempt
        yield Event(
            "claims", f"extracted {len(extraction.claims)} claims", {"attempt": attempt_no, "claims": extraction.claims}
        )
        attempt.claims = place_claims(answer, (yield from self._verify(attempt_no, extraction.claims, passages)))
        faith, scored = self.checker.score(attempt.claims)
        record.status = status.attempt_status(faith, scored, self.settings.faithfulness_threshold)
        record.faithfulness = faith
        record.n_claims = len(attempt.claims)
        record.n_supported = sum(c.verdict == SUPPORTED for c in attempt.claims)
        record.failed_claims = [c.text for c in attempt.claims if c.verdict not in (SUPPORTED, UNVERIFIED)]
        yield Event(
            "score",
            f"attempt {attempt_no}: faithfulness "
            + (
                f"{faith:.2f} ({record.n_supported}/{record.n_claims} claims supported)"
                if faith is not None
                else f"not scored ({record.status})"
            ),
            {"attempt": attempt_no, "faithfulness": faith, "status": record.status},
        )
        return attempt

    def _verify(self, attempt_no: int, claims: list[str], passages: list[Passage]):
        """Verify claims concurrently and stream each verdict as it arrives."""
        arrived: queue.Queue = queue.Queue()
        with tracing.step("verify", claims=len(claims)), ThreadPoolExecutor(max_workers=1) as runner:
            future = tracing.submit(runner, self.checker.verify_claims, claims, passages, arrived.put, self.question)
            future.add_done_callback(lambda _: arrived.put(_DONE))
            while (item := arrived.get()) is not _DONE:
                yield Event("verdict", f"claim {item.claim_no}: {item.verdict}", {"attempt": attempt_no, "claim": item})
            return future.result()

    # -- decision -----------------------------------------------------------------------------
    def _decide(self):
        attempts = self.result.attempts
        scored = [a for a in attempts if a.record.faithfulness is not None]
        if scored:
            best = max(scored, key=lambda a: (a.record.faithfulness, -a.record.attempt_no))
        else:
            best = attempts[-1]
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
                f"below abstain_below {self.settings.abstain_below:.2f} (when_unverified = abstain)",
                best,
                status.NOT_VERIFIED_RELEVANT if self.relevant else status.NOT_VERIFIED,
            )
            return
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
        self.result.latency_ms = (time.perf_counter() - self.t0) * 1000
        self.log = self.result.to_log(
            self.grades,
            self.retrievals,
            datetime.now(timezone.utc),
            self.llm.take_calls(),
            self.llm.take_cache_entries(),
            spans=self.trace.records(),
        )
        if self.persist:  # a locked, read-only, newer or damaged store: the run is kept in the journal
            self.result.run_id, kept = save_run(self.db, self.log, self.settings.store_save_wait_s)
            self.result.journal = str(kept) if kept else None


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

    def stream(self, question: str) -> Iterator[Event]:
        """Events of one question; raises InputError before any run for an unusable question."""
        return QuestionRun(self.settings, self.db, clean_question(question, self.settings), self.kind).events()

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
