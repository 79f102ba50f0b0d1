"""One attempt of the answer loop as it streams: the answer's tokens go out as they arrive, each finished
sentence is checked as it stands on the run's thread pool while generation goes on (the passages the sentence
cites first) and, where it fails, its claims extracted and checked (claim_granularity, sentence_first.py), and
the round's context grade runs alongside; a grade that finds the context not relevant stops the generation and
withdraws what was streamed."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

from pipeline import tracing
from pipeline.answering import prompts
from pipeline.answering.events import Discarded, Generated, Graded, SentenceChecked, Token
from pipeline.answering.live import LiveSentence, SentenceFeed
from pipeline.models.llm import LLMReply
from pipeline.text import Sentence, find_span, is_meta_statement, one_line, strip_citations
from pipeline.verification.claims import EXTRACTION_ERROR, CheckedClaim, Passage, context_block, scored_claims
from pipeline.verification.extraction_check import REPEAT, extraction_errors, repeats
from pipeline.verification.faithfulness import (
    ABSTAIN_SENTENCE,
    ClaimExtraction,
    example_text,
    with_extraction_errors,
)
from pipeline.verification.placement import place_claim
from pipeline.verification.prompts import EXTRACT_CLAIMS_IN_CONTEXT, EXTRACT_SENTENCE_CLAIMS
from pipeline.verification.sentence_first import checks_sentences, sentence_claim, stands, verify_sentences


def attempt_seed(settings, attempt_no: int) -> int:
    """The sampling seed of an attempt (1-based): the seed setting for the first, then one more each, so a repair
    samples anew even when its prompt is the one an earlier attempt sent."""
    return settings.seed + attempt_no - 1


def is_abstention(answer: str) -> bool:
    return one_line(answer).lower().startswith(ABSTAIN_SENTENCE.lower().rstrip("."))


@dataclass
class SentenceCheck:
    sentence: LiveSentence
    claims: list[CheckedClaim] = field(default_factory=list)
    error: str | None = None  # the claims could not be extracted


class LiveAttempt:
    """`run()` emits the attempt's events; afterwards `reply`, `claims` (numbered in answer order),
    `errors`, `discarded` and `graded` hold its outcome. `run` (the run's context.RunContext) supplies the model
    seam, the checker, the question, the thread pool and the sink the events go to."""

    def __init__(
        self, run, attempt_no: int, passages: list[Passage], failed: list[str], retry: list[dict] | None = None
    ):
        self.run_, self.attempt_no, self.passages = run, attempt_no, passages
        self.strict = attempt_no > 1
        self.failed = failed if self.strict else None
        self.seed = attempt_seed(run.settings, attempt_no)
        self.retry = retry  # the messages of an on-topic retry (repair.on_topic_retry), else the usual prompt
        self.pool: Executor = run.pool
        self.inbox: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.generation_done = threading.Event()
        self.feed = SentenceFeed()
        self.sentences: list[LiveSentence] = []
        self.checked: dict[int, SentenceCheck] = {}
        self.shown = 0  # sentences whose verdicts went out, in answer order
        self.reply: LLMReply | None = None
        self.claims: list[CheckedClaim] = []
        self.errors: list[str] = []
        self.discarded = False
        self.graded: Graded | None = None  # the round's context grade, when it ran alongside and came back
        # rejected claims being classified (contradicted or unsupported) on the pool: that choice does not change
        # the attempt's score or the claims a retry names, so the loop goes on without waiting for it
        self.classifying: list[tuple[CheckedClaim, Future]] = []
        self._classifying_guard = threading.Lock()
        # the sequential schedule (one slot): calls queue, so checking sentences while the answer streams buys
        # nothing; the whole answer's sentences are verified together once it is written, and the claims of those
        # that fail (or of all, with claim_granularity atomic) extracted in one call
        self.whole = getattr(run, "schedule", None) == "sequential"
        self.granularity = run.settings.claim_granularity

    # -- the attempt's event loop -------------------------------------------------------------
    def run(self, grade: Callable[[], Graded] | None = None) -> None:
        """`grade`: the round's context grade (retrieval.Retrieval.grade), run on the pool alongside the
        generation; a grade that finds the context not relevant withdraws the attempt."""
        emit = self.run_.emit
        grading = grade is not None
        if grading:
            self._submit("graded", grade)
        self._submit("generated", self._generate)
        while self.reply is None or self.shown < len(self.sentences) or grading:
            kind, *payload = self.inbox.get()
            if kind == "failed":
                raise payload[0]
            if kind == "token":
                emit(Token(attempt=self.attempt_no, delta=payload[0]))
                self._check(payload[1])
            elif kind == "generated":
                self.reply = payload[0]
                self._check(self.feed.finish())
                if self.whole and self.sentences:
                    self._submit("checked all", self._check_answer, list(self.sentences))
                emit(self._generated_event())
            elif kind == "graded":
                grading = False
                self.graded = payload[0]
                emit(self.graded)
                if self.graded.relevant is False:
                    self._withdraw()
                    return
            elif kind in ("checked", "checked all"):
                for check in payload[0] if kind == "checked all" else payload:
                    self.checked[check.sentence.index] = check
                self._show_ready()

    def _submit(self, kind: str, fn: Callable, *args) -> None:
        """fn on the pool, its result (or its exception, as "failed") posted to the inbox."""

        def work():
            try:
                self.inbox.put((kind, fn(*args)))
            except BaseException as exc:  # noqa: BLE001 - raised again in the event loop's thread
                self.inbox.put(("failed", exc))

        tracing.submit(self.pool, work)

    def _withdraw(self) -> None:
        """Stop generating and wait for the stream to close (its call is recorded, marked stopped)."""
        self.stop.set()
        self.discarded = True
        self.generation_done.wait(self.run_.settings.request_timeout_s)
        self.run_.emit(
            Discarded(
                message=f"attempt {self.attempt_no} withdrawn: the context does not answer the question",
                attempt=self.attempt_no,
            )
        )

    # -- generation ----------------------------------------------------------------------------
    def _generate(self) -> LLMReply:
        run = self.run_
        prompt = prompts.GENERATE_STRICT if self.strict else prompts.GENERATE
        messages = self.retry or prompt.messages(
            prompts.generate_input(
                run.question, context_block(self.passages), self.failed, run.history_text, self.attempt_no - 1
            )
        )
        sent = json.dumps(messages, sort_keys=True)
        earlier = getattr(run, "generation_prompts", set())
        read = sent not in earlier  # an earlier attempt of this run sent it: its reply is the one being repaired
        earlier.add(sent)
        try:
            with tracing.step("generate"):
                return run.llm.stream_chat(
                    "generate",
                    run.settings.generator_model,
                    messages,
                    lambda delta: self.inbox.put(("token", delta, self.feed.add(delta))),
                    options={"seed": self.seed},
                    stop=self.stop.is_set,
                    read=read,
                )
        finally:
            self.generation_done.set()

    def _generated_event(self) -> Generated:
        answer = self.reply.text.strip()
        return Generated(
            message=f"attempt {self.attempt_no}: generated {len(answer.split())} words"
            + (" with the on-topic prompt" if self.retry else " with the stricter prompt" if self.strict else ""),
            attempt=self.attempt_no,
            strict=self.strict,
            answer=answer,
        )

    # -- sentence checks ------------------------------------------------------------------------
    def _check(self, finished: list[LiveSentence]) -> None:
        for sentence in finished:
            earlier = self.sentences[-1].text if self.sentences else ""
            self.sentences.append(sentence)
            if not self.whole:
                self._submit("checked", self._check_sentence, sentence, earlier)

    def _check_sentence(self, sentence: LiveSentence, earlier: str) -> SentenceCheck:
        """Verify one sentence as it stands (claim_granularity auto or sentence), trying the passages it cites
        first; where it fails (auto) or always (atomic), extract its claims and verify them."""
        if self._uncheckable(sentence):
            return SentenceCheck(sentence)
        with tracing.step(f"check sentence {sentence.index + 1}", cited=sorted(sentence.cited)):
            if checks_sentences(self.granularity):
                held = self._sentence_verdicts([sentence], together=False)
                if sentence.index in held:
                    return held[sentence.index]
            extraction = self._extract(sentence, earlier)
            if extraction.claims is None:
                return SentenceCheck(sentence, error=extraction.invalid_reason)
            return self._verify_sentence(sentence, earlier, extraction.claims)

    def _uncheckable(self, sentence: LiveSentence) -> bool:
        return self.stop.is_set() or is_abstention(sentence.text) or is_meta_statement(sentence.text)

    def _check_answer(self, sentences: list[LiveSentence]) -> list[SentenceCheck]:
        """The sequential schedule's check of a written answer: every sentence verified as it stands, all together
        (claim_granularity auto or sentence); of those that fail (auto) or of all (atomic), the sentences found
        verbatim in a passage are one claim each, the others' claims come from one extraction call over them; each
        claim is then verified with the sentence it was placed on (that sentence's cited passages first)."""
        checkable = [s for s in sentences if not self._uncheckable(s)]
        held = self._sentence_verdicts(checkable, together=True) if checks_sentences(self.granularity) else {}
        checkable = [s for s in checkable if s.index not in held]
        claims = {s.index: [strip_citations(s.text)] for s in checkable if self._verbatim(s)}
        rest = [s for s in checkable if s.index not in claims]
        errors: dict[int, str] = {}
        if rest:
            with tracing.step("extract claims", sentences=len(rest)):
                extraction = self.run_.checker.extract_claims(
                    self.run_.question, " ".join(s.text for s in rest), lead=self._extraction_lead()
                )
            if extraction.claims is None:
                errors = dict.fromkeys((s.index for s in rest), extraction.invalid_reason)
            else:
                parts = [Sentence(s.text, s.start, s.end) for s in rest]
                for claim in extraction.claims:  # an unplaced claim goes with the last sentence: found not in it
                    at = place_claim(claim, parts)
                    claims.setdefault(rest[-1 if at is None else at].index, []).append(claim)
        placed = [
            (sentence, sentences[i - 1].text if i else "", claims[sentence.index])
            for i, sentence in enumerate(sentences)
            if sentence.index in claims and sentence.index not in errors
        ]
        verified = {} if self.stop.is_set() else self._verify_together(placed)
        verified.update(held)
        return [
            SentenceCheck(s, error=errors[s.index]) if s.index in errors else verified.get(s.index, SentenceCheck(s))
            for s in sentences
        ]

    def _sentence_verdicts(self, checkable: list[LiveSentence], together: bool) -> dict[int, SentenceCheck]:
        """The sentences whose own verdict stands (sentence_first.stands), each as one claim with its evidence: in
        auto those a verifier supports, the others being decomposed by the caller. `together`: one slot, every
        sentence at once, so that consecutive verifier calls share a passage."""
        if not checkable or self.stop.is_set():
            return {}
        run, rejected = self.run_, []
        items = [(n, sentence_claim(s.text), s.cited) for n, s in enumerate(checkable, start=1)]
        verdicts = verify_sentences(
            run.checker, items, self.passages, run.question, self.granularity, together, rejected
        )
        self._classify_later(rejected)
        held = {}
        for sentence, verdict in zip(checkable, verdicts, strict=True):
            if stands(self.granularity, verdict):
                verdict.answer_span = (sentence.start, sentence.end)
                held[sentence.index] = SentenceCheck(sentence, [verdict])
        tracing.annotate(held=len(held), decomposed=len(checkable) - len(held))
        return held

    def _extraction_lead(self) -> str:
        """The lead the written answer's claim extraction starts with, or none where the claim model is not the
        generator's: each model has a runner and a prompt cache of its own, so the context would be read again."""
        settings = self.run_.settings
        return self._lead() if settings.claim_model == settings.generator_model else ""

    def _lead(self) -> str:
        """The generation's user message up to its question: what the written answer's claim extraction starts
        with, so that the server's prompt cache serves it from the generation's call."""
        run = self.run_
        return prompts.generate_input(run.question, context_block(self.passages), history=run.history_text)

    def _verify_together(self, placed: list[tuple[LiveSentence, str, list[str]]]) -> dict[int, SentenceCheck]:
        """The sequential schedule's verification: every sentence's claims (sentence, the one before, its claims)
        down the verifier chain at once, each with its sentence's cited passages first, so that the verifier can
        ask one passage about several claims in a row (the server's prompt cache then holds the passage)."""
        run, examples = self.run_, example_text(EXTRACT_CLAIMS_IN_CONTEXT)
        screened, items = [], []
        for sentence, earlier, claims in placed:
            reasons = extraction_errors(claims, sentence.text, run.question, earlier, examples)
            screened.append(reasons)
            for claim, why in zip(claims, reasons, strict=True):
                if why is None:
                    items.append((len(items) + 1, claim, sentence.cited))
        rejected: list[CheckedClaim] = []
        verified = iter(run.checker.verify_together(items, self.passages, run.question, rejected) if items else [])
        self._classify_later(rejected)
        checks = {}
        for (sentence, _, claims), reasons in zip(placed, screened, strict=True):
            checked = with_extraction_errors(claims, reasons, verified)
            for claim in checked:
                claim.answer_span = (sentence.start, sentence.end)
            checks[sentence.index] = SentenceCheck(sentence, checked)
        return checks

    def _verify_sentence(self, sentence: LiveSentence, earlier: str, claims: list[str]) -> SentenceCheck:
        """The streamed sentence's claims (extract_sentence_claims) down the verifier chain; a rejected one is
        classified on the pool meanwhile."""
        run = self.run_
        if self.stop.is_set():
            return SentenceCheck(sentence)
        rejected: list[CheckedClaim] = []
        with tracing.step("verify", claims=len(claims)):
            checked = run.checker.verify_extracted(
                claims,
                sentence.text,
                self.passages,
                question=run.question,
                earlier=earlier,
                examples=example_text(EXTRACT_SENTENCE_CLAIMS),
                cited=sentence.cited,
                deferred=rejected,
            )
        self._classify_later(rejected)
        for claim in checked:
            claim.answer_span = (sentence.start, sentence.end)
        return SentenceCheck(sentence, checked)

    def _classify_later(self, rejected: list[CheckedClaim]) -> None:
        """Each rejected claim classified (contradicted or unsupported) off the critical path: on the pool meanwhile
        where there are slots to spare; on one slot only once asked for (the engine asks after the decision, so the
        classification calls never queue before a check or a regeneration the answer waits on)."""
        classify = self.run_.checker.classify_rejected
        for claim in rejected:
            if self.whole:
                future = WhenAsked(classify, claim, self.passages)
            else:
                future = tracing.submit(self.pool, classify, claim, self.passages)
            with self._classifying_guard:
                self.classifying.append((claim, future))

    def _verbatim(self, sentence: LiveSentence) -> bool:
        quoted = strip_citations(sentence.text)
        return any(find_span(p.text, quoted.rstrip(".!?;:")) for p in self.passages)

    def _extract(self, sentence: LiveSentence, earlier: str) -> ClaimExtraction:
        """The sentence's claims: a sentence that stands verbatim in a passage is one claim as it is (splitting
        it could only yield claims that passage states), so it costs no extraction call."""
        if self._verbatim(sentence):
            tracing.annotate(verbatim=True)
            return ClaimExtraction([strip_citations(sentence.text)])
        with tracing.step("extract claims"):
            return self.run_.checker.extract_sentence_claims(self.run_.question, sentence.text, earlier)

    def _show_ready(self) -> None:
        """Verdicts go out sentence by sentence in answer order, so claims are numbered as they read."""
        while self.shown in self.checked:
            check = self.checked[self.shown]
            self.shown += 1
            if check.error:
                self.errors.append(check.error)
            for claim in check.claims:  # a repeat of an earlier sentence's claim (a sentence's own: when checked)
                if claim.verdict != EXTRACTION_ERROR and repeats(
                    claim.text, [c.text for c in scored_claims(self.claims)]
                ):
                    claim.verdict, claim.verifier, claim.reason = EXTRACTION_ERROR, "extraction check", REPEAT
                claim.claim_no = len(self.claims) + 1
                self.claims.append(claim)
            self.run_.emit(_sentence_event(self.attempt_no, check))


class WhenAsked:
    """A call made when its result is first asked for, in the asking thread (a Future's `result` without a pool)."""

    def __init__(self, fn: Callable, *args):
        self._call, self._done, self._value = (fn, args), False, None
        self._guard = threading.Lock()

    def result(self):
        with self._guard:
            if not self._done:
                fn, args = self._call
                self._value, self._done = fn(*args), True
        return self._value


def _sentence_event(attempt_no: int, check: SentenceCheck) -> SentenceChecked:
    n = check.sentence.index + 1
    if check.error:
        message = f"sentence {n}: claims could not be extracted: {check.error}"
    elif not check.claims:
        message = f"sentence {n}: no checkable claim"
    else:
        message = f"sentence {n} — " + ", ".join(f"claim {c.claim_no}: {c.verdict}" for c in check.claims)
    return SentenceChecked(
        message=message,
        attempt=attempt_no,
        index=check.sentence.index,
        span=(check.sentence.start, check.sentence.end),
        cited=sorted(check.sentence.cited),
        claims=list(check.claims),
        error=check.error,
    )
