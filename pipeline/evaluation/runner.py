"""The evaluation runner: every golden item through the verified engine, then judged and measured.

Items run concurrently (asyncio, each item in a worker thread because the engine is synchronous),
each with a timeout. An item's question run, its row and its scores are written in one transaction,
so a run killed at any point leaves a valid store; running the same evaluation name again resumes
and skips the items already done. Unchanged items cost nothing the second time: the LLM cache
answers every call.

An evaluation measures the metrics chosen for it (default: every registered metric); its configuration
records them, and a resume measures the same ones.

A golden conversation's turns (items with a conversation and a turn number: dataset.py) are answered in order, one
after another, each with the history the earlier ones produced; conversations run concurrently with each other and
with single questions. On resume, a turn already done gives its stored run (question, answer, standalone question) as
history to the next; a turn left undone stops its conversation there, to run again on resume.

Where items run is the executor's business: "local" (threads of this process, against the store) or "ray"
(Ray tasks, ray_executor.py). Everything else — resume, cancel, progress, failures, saving each finished item
in one transaction — is done here, the same way for both.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.answering.conversation import Turn
from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation import registry, regression
from pipeline.evaluation.conversation_report import ConversationFigures, conversation_figures
from pipeline.evaluation.corrections import corrections_pin
from pipeline.evaluation.dataset import Dataset, GoldenItem, conversations
from pipeline.evaluation.datasets import holds, identity_text
from pipeline.evaluation.diagnosis import Diagnosis, diagnose
from pipeline.evaluation.item import InConversation, ItemOutcome, conversation_id_of, evaluate_item, timed_out, turn_of
from pipeline.evaluation.judge import ALL_CRITERIA, JudgePin, judge_pin, own_versions, with_aligned
from pipeline.evaluation.judge_variance import CriterionVariance, evaluation_variance
from pipeline.models.llm import LLM
from store import baselines, evals, journal, judge_versions
from store.annotations import current_corrections
from store.db import Database


@dataclass
class Progress:
    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    started: float = field(default_factory=time.monotonic)
    last_error: str | None = None
    errors: dict[str, int] = field(default_factory=dict)  # each distinct error of a failed item, with its count

    @property
    def finished(self) -> int:
        return self.done + self.failed

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def remaining_s(self) -> float | None:
        if not self.finished:
            return None
        return self.elapsed_s() / self.finished * (self.total - self.finished)


@dataclass
class EvalOutcome:
    eval_run_id: int
    name: str
    status: str  # finished | finished with N failures | cancelled
    progress: Progress
    regressions: list | str = field(default_factory=list)  # the drops found; a reason when not compared
    below_floor: list = field(default_factory=list)  # the metrics below their floors (not regressions)
    detectable: list[str] = field(default_factory=list)  # the drops the comparison could have detected, in words


EXECUTORS = ("local", "ray")


@dataclass
class EvalPin(JudgePin):
    """The judge pin of an evaluation, with the corrections its prompt version names (if any)."""

    corrections: list = field(default_factory=list)


def evaluation_pin(settings: Settings, db: Database) -> EvalPin:
    base = judge_pin(LLM(settings, db, origin="evaluation"), settings)
    version, corrections = current_corrections(db) if settings.judge_corrections_k > 0 else (None, [])
    pinned = with_aligned(corrections_pin(base, version), judge_versions.active(db))
    return EvalPin(pinned.model, pinned.digest, pinned.prompt_version, pinned.aligned, corrections=corrections)


def chosen_metrics(metrics: Sequence[str] | None) -> list[str] | None:
    """The chosen metric names in registry order, checked; None (every registered metric) when none are named."""
    if metrics is None:
        return None
    names = registry.metric_names()
    unknown = [m for m in metrics if m not in names]
    if unknown:
        raise InputError(f"unknown metric {', '.join(map(repr, unknown))}", fix=f"choose among {', '.join(names)}")
    if not metrics:
        raise InputError("no metric chosen", fix=f"choose at least one of {', '.join(names)}")
    return [m for m in names if m in metrics]


def recorded_metrics(db: Database, existing: evals.EvalRun) -> list[str]:
    """The metrics a stored run measures: as its configuration records them; for a run from before the choice
    was recorded, the metrics it has scores of, or without any, those of that time (all but the criteria with
    prompt versions of their own)."""
    if "metrics" in existing.config:
        return list(existing.config["metrics"])
    scored = {row["metric"] for row in evals.metric_summary(db, existing.id)}
    later = {f"judge_{c}" for c in own_versions(ALL_CRITERIA)}
    return [m for m in registry.metric_names() if m in scored] or [m for m in registry.metric_names() if m not in later]


def pipeline_of(dataset: Dataset, pipeline: str | None) -> str | None:
    """Who wrote the answers of a dataset that carries them: `pipeline`, by default the file's name without its
    suffix; None for a golden set (this workbench answers it), which refuses a pipeline name."""
    name = " ".join((pipeline or "").split())
    if not dataset.given_answers:
        if name:
            raise InputError(
                f"a pipeline name ({name!r}) goes with a dataset that carries answers; {dataset.name} has no answer "
                "column, so this workbench answers its questions",
                fix="drop --pipeline, or add the answers (column answer, response or actual_output)",
            )
        return None
    return name or Path(dataset.name).stem or "imported"


def evaluation_config(settings: Settings, dataset: Dataset, metrics: list[str], pipeline: str | None) -> dict:
    """The configuration an evaluation records; over given answers, also their hash (a resume over other answers
    is refused, and a comparison shows that the answers changed)."""
    config = registry.evaluation_config(settings, metrics, given_by=pipeline)
    return {**config, "answers_hash": dataset.answers_hash} if dataset.given_answers else config


def _same_answers(existing: evals.EvalRun, name: str, pipeline: str | None, dataset: Dataset) -> None:
    """Refuse to resume an evaluation with answers of another pipeline, or other answers of the same one."""

    def whose(p):
        return f"answers of {p!r}" if p else "a golden set this workbench answers"

    if existing.pipeline != pipeline:
        why = f"was started over {whose(existing.pipeline)}; this is {whose(pipeline)}"
    elif existing.config.get("answers_hash") != dataset.answers_hash:
        why = f"was started over other answers of {pipeline!r} (the answers or contexts in the file changed)"
    else:
        return
    raise InputError(
        f"evaluation {name!r} {why}",
        fix="give this run a new --name, or resume it with the file and pipeline name it was started with",
    )


def _same_version(db: Database, existing: evals.EvalRun, dataset: Dataset) -> bool:
    """Whether a dataset read from a file (unkept) holds the items of the stored version the run was started over:
    a run started with `eval FILE` (which keeps the file as a version) resumes with the same file read again."""
    if existing.dataset_version is None or dataset.version is not None:
        return False
    return holds(db, existing.dataset, existing.dataset_version, dataset.items)


def _open(
    settings: Settings,
    db: Database,
    name: str,
    dataset: Dataset,
    concurrency: int,
    pin,
    metrics: list[str] | None,
    pipeline: str | None = None,
) -> tuple[int, dict[str, str], list[str]]:
    """(evaluation run id, status of every item stored so far, the metrics it measures) of a new or resumed
    evaluation; `metrics` None: every registered metric for a new run, the recorded ones for a resumed one."""
    # the configuration is what the engine, the verifiers and the measured metrics declare (evaluation_config); the
    # cache setting among it is recorded and shown in comparisons, but does not change a score: no reason to refuse
    existing = evals.get_eval_run(db, name)
    if existing is None:
        metrics = metrics or registry.metric_names()
        run_id = evals.create_eval_run(
            db,
            name,
            dataset.name,
            dataset.content_hash,
            evaluation_config(settings, dataset, metrics, pipeline),
            pin.model,
            pin.digest,
            pin.prompt_version,
            len(dataset.items),
            concurrency,
            pipeline,
            dataset.version,
        )
        return run_id, {}, metrics
    stored_hash = (baselines.dataset_identity(db, existing.id) or (None,))[0]
    if (
        stored_hash
        and dataset.content_hash
        and stored_hash != dataset.content_hash
        and not _same_version(db, existing, dataset)
    ):
        raise InputError(
            f"evaluation {name!r} was started over a different dataset ({identity_text(stored_hash)}, "
            f"this one {identity_text(dataset.content_hash)}); resuming would merge two datasets into one run",
            fix="give this run a new --name, or resume it with the golden set it was started with",
        )
    _same_answers(existing, name, pipeline, dataset)
    stored_metrics = recorded_metrics(db, existing)
    if metrics is not None and metrics != stored_metrics:
        raise InputError(
            f"evaluation {name!r} measures {', '.join(stored_metrics)}; resuming it with "
            f"{', '.join(metrics)} would leave its items scored on different metrics",
            fix="resume it without choosing metrics (it keeps its own), or give this run a new --name",
        )
    metrics = metrics or stored_metrics
    # its metric choice was checked above; the versions of its criteria are compared like any other setting
    config = evaluation_config(settings, dataset, metrics, pipeline)
    changed = registry.config_changes(existing.config, config)
    if changed or (existing.judge_digest, existing.judge_prompt_version) != (pin.digest, pin.prompt_version):
        what = ", ".join(changed) or "judge model digest or prompt version"
        raise InputError(
            f"evaluation {name!r} was started with a different configuration ({what})",
            fix="give this run a new --name, or restore the settings it was started with",
        )
    evals.mark_eval_run(db, existing.id, "running", n_items=max(existing.n_items, len(dataset.items)))
    return existing.id, evals.item_statuses(db, existing.id), metrics


def run_evaluation(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    concurrency: int = 4,
    item_timeout_s: float | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    metrics: Sequence[str] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    pipeline: str | None = None,
    knowledge=None,
    compare: bool = True,
) -> EvalOutcome:
    """Run (or resume) an evaluation; `metrics`: the names of the metrics to measure (default: every registered
    one for a new evaluation, the ones it was started with for a resumed one); `executor`: where items run,
    "local" or "ray" (`ray_address`: the Ray cluster to use; default a local one started for this run). A dataset
    whose rows carry their answers is scored as given; `pipeline` names who wrote them (default the file's name).
    `knowledge` (a KnowledgeSnapshot, local executor only): retrieve from it instead of the store's knowledge base (a
    sweep's own index); `compare` False: no comparison with a baseline and no alerts (a sweep's combinations)."""
    if not name.strip():
        raise InputError("the evaluation needs a name", fix="give one with --name, e.g. --name baseline")
    if concurrency < 1:
        raise InputError(f"concurrency must be at least 1, not {concurrency}", fix="use --concurrency 1 or more")
    check_executor(executor, ray_address)
    cancel = cancel or threading.Event()
    chosen = chosen_metrics(metrics)
    pipeline = pipeline_of(dataset, pipeline)
    pin = evaluation_pin(settings, db)
    with _executor(executor, settings, db, ray_address, concurrency, knowledge) as items_for:
        eval_run_id, stored, chosen = _open(settings, db, name.strip(), dataset, concurrency, pin, chosen, pipeline)
        todo = [item for item in dataset.items if stored.get(item.id) != "done"]
        progress = Progress(total=len(dataset.items), skipped=len(dataset.items) - len(todo))
        progress.done = progress.skipped
        timeout = item_timeout_s or settings.request_timeout_s * 10
        started = time.monotonic()
        status = "failed"
        try:
            items = items_for(pin, eval_run_id, chosen, cancel, pipeline)
            turns = Turns(db, eval_run_id, name.strip(), dataset.items)
            asyncio.run(
                _run_items(
                    settings,
                    db,
                    eval_run_id,
                    todo,
                    items,
                    concurrency,
                    timeout,
                    progress,
                    on_progress,
                    cancel,
                    stored,
                    turns,
                )
            )
            status = "cancelled" if cancel.is_set() else finished_status(progress.failed)
        except KeyboardInterrupt:
            status = "cancelled"
            raise
        finally:
            # items kept in the journal while the store was busy are saved first (save_or_keep replays), then the
            # status; a store another process holds still: the status waits in the journal after the items
            _, kept = journal.save_eval_status(
                db, eval_run_id, status, time.monotonic() - started, settings.store_save_wait_s
            )
    outcome = EvalOutcome(eval_run_id, name, status, progress)
    if kept is not None:
        outcome.regressions = (
            f"{kept.because.message}; its items and status are kept in the journal and saved the next time the "
            "store opens; run it again under the same name to compare it (no item runs again)"
        )
    elif status == "finished" and compare:
        alerted = check_regressions(settings, db, name)
        if isinstance(alerted, str):
            outcome.regressions = alerted
        else:
            outcome.regressions = [c for c in alerted if c.regression]
            outcome.below_floor = [c for c in alerted if c.below_floor]
            outcome.detectable = regression.detectable([c for c in alerted if c.primary])
    return outcome


def check_executor(executor: str, ray_address: str | None = None) -> None:
    """Refuse an unknown executor, an address without Ray, or Ray where it is not installed, before anything
    is stored."""
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}", fix=f"choose one of {', '.join(EXECUTORS)}")
    if ray_address and executor != "ray":
        raise InputError("a Ray address needs the Ray executor", fix="add --executor ray, or drop --ray-address")
    if executor == "ray":
        _ray_executor()


def _ray_executor():
    """The Ray executor module; Ray is optional, and only this module imports it."""
    try:
        from pipeline.evaluation import ray_executor
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "ray":
            raise
        raise WorkbenchError(
            "the Ray executor needs Ray, which is not installed",
            fix="pip install -r requirements-scale.txt (or run with --executor local)",
        ) from exc
    return ray_executor


@contextmanager
def _executor(
    executor: str, settings: Settings, db: Database, ray_address: str | None, concurrency: int, knowledge=None
):
    """While the executor is up: a function (pin, eval run id, metrics, cancel event, pipeline) -> its runner of
    items."""
    if executor == "ray":
        if knowledge is not None:
            raise InputError("an evaluation over an index of its own runs locally", fix="run it with --executor local")
        with _ray_executor().session(settings, db, ray_address, concurrency) as items_for:
            yield items_for
        return
    yield lambda pin, eval_run_id, metrics, cancel, pipeline: LocalItems(
        settings, db, pin, eval_run_id, metrics, pipeline, knowledge, concurrency
    )


class LocalItems:
    """Items on threads of this process, against the store. An item that times out is abandoned (its thread
    stops at its next step); on cancel, the items already running finish and are saved."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        pin,
        eval_run_id: int,
        metrics: list[str],
        pipeline: str | None = None,
        knowledge=None,
        side_by_side: int = 1,
    ):
        self.settings, self.db, self.pin, self.eval_run_id, self.metrics = settings, db, pin, eval_run_id, metrics
        self.pipeline = pipeline
        self.knowledge = knowledge  # a KnowledgeSnapshot to retrieve from instead of the store's knowledge base
        self.side_by_side = side_by_side  # items evaluated at once (the evaluation's concurrency)

    async def run(
        self, item: GoldenItem, timeout: float, pool: ThreadPoolExecutor, conversation: InConversation | None = None
    ) -> ItemOutcome:
        """The item's outcome; asyncio.TimeoutError after `timeout` s, WorkbenchError when it cannot run.
        `conversation`: a turn's conversation and the turns before it."""
        abandon = threading.Event()
        call = (
            self.settings,
            self.db,
            item,
            self.pin,
            abandon,
            self.eval_run_id,
            self.metrics,
            self.knowledge,
            self.pipeline,
            conversation,
            self.side_by_side,
        )
        try:
            return await asyncio.wait_for(
                asyncio.get_running_loop().run_in_executor(pool, evaluate_item, *call), timeout
            )
        except asyncio.TimeoutError:
            abandon.set()
            raise


def finished_status(failed: int) -> str:
    """A run whose items all finished is "finished"; one with failed items says how many, never plain finished."""
    return "finished" if failed == 0 else f"finished with {failed} failure{'s' if failed != 1 else ''}"


def check_regressions(settings: Settings, db: Database, name: str) -> list | str:
    """Compare a finished run with its baseline and store alerts; return the comparisons that opened one
    (regressions and floor breaches, told apart by Comparison.regression and .below_floor) and the primary
    endpoints' tests (Comparison.primary), or a reason instead when it cannot compare."""
    try:
        _, _, comparisons = regression.check(db, settings, name)
    except InputError as exc:
        return exc.message
    return [c for c in comparisons if c.alert or c.primary]


@contextmanager
def _pool(concurrency: int):
    """The items' threads (the local executor's items, and every item's save). When the evaluation is
    interrupted (Ctrl-C) the pool does not wait for items still in a model call: they are abandoned (nothing of
    theirs is written) and run again on resume."""
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="eval")
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class Turns:
    """The conversations of an evaluation's dataset: each turn's place (its conversation's id in the store, the
    conversation's turns in order) and, for a turn stored done by an earlier attempt, the turn it gives as history."""

    def __init__(self, db: Database, eval_run_id: int, eval_name: str, items: list[GoldenItem]):
        self.db, self.eval_run_id, self.eval_name = db, eval_run_id, eval_name
        self.by_conversation = conversations(items)

    def conversation_id(self, item: GoldenItem) -> str:
        return conversation_id_of(self.eval_name, item.conversation)

    def stored(self, item: GoldenItem) -> Turn:
        """A turn done before (a resumed evaluation): its stored run as the next turn's history."""
        row = evals.item_turn(self.db, self.eval_run_id, item.id)
        if row is None:
            return Turn(item.question)
        standalone = row["standalone_question"]
        return Turn(row["question"], row["answer"], standalone if standalone != row["question"] else None)


async def _run_items(
    settings: Settings,
    db: Database,
    eval_run_id: int,
    todo: list[GoldenItem],
    items,
    concurrency: int,
    timeout: float,
    progress: Progress,
    on_progress: Callable[[Progress], None] | None,
    cancel: threading.Event,
    stored: dict[str, str],
    turns: Turns | None = None,
) -> None:
    """At most `concurrency` items at once through the executor's `items.run`; each finished item is saved as it
    arrives (one transaction) and counted. An item the executor drops (None: cancelled while running) is neither
    saved nor counted: it runs again on resume. A conversation's turns run one after another, in order, each with
    the turns before it as history (`turns`: the dataset's conversations)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    lock = threading.Lock()
    with _pool(concurrency) as pool:

        async def one(item: GoldenItem, conversation: InConversation | None = None) -> Turn | None:
            """The item run and saved; the turn it makes for the next one of its conversation (None: not run)."""
            async with gate:
                if cancel.is_set():
                    return None
                start = time.perf_counter()
                try:
                    if conversation is None:
                        outcome = await items.run(item, timeout, pool)
                    else:
                        outcome = await items.run(item, timeout, pool, conversation)
                except asyncio.TimeoutError:
                    outcome = timed_out(timeout)
                except WorkbenchError as exc:
                    outcome = "failed", None, [], str(exc)
                if outcome is None:
                    return None
                status, log, scores, error = outcome
                wall_ms = (time.perf_counter() - start) * 1000
                try:  # a store that stays locked: the item is kept in the journal and saved on the next open
                    await loop.run_in_executor(
                        pool,
                        journal.save_item,
                        db,
                        eval_run_id,
                        item,
                        status,
                        log,
                        scores,
                        error,
                        wall_ms,
                        item.id in stored,
                        settings.store_save_wait_s,
                    )
                except WorkbenchError as exc:  # nowhere to keep it: the item runs again on resume
                    status, error = "failed", f"not saved: {exc}"
                with lock:
                    if status == "done":
                        progress.done += 1
                    else:
                        progress.failed += 1
                        progress.last_error = f"{item.id}: {error}"
                        progress.errors[str(error)] = progress.errors.get(str(error), 0) + 1
                if on_progress:
                    on_progress(progress)
                return turn_of(item, log)

        async def conversation(in_order: list[GoldenItem]) -> None:
            history: list[Turn] = []
            for item in in_order:
                if item.id not in waiting:  # done by an earlier attempt: its stored run is the history
                    history.append(await loop.run_in_executor(pool, turns.stored, item))
                    continue
                turn = await one(item, InConversation(turns.conversation_id(item), tuple(history)))
                if turn is None:  # cancelled: the later turns wait for a resume
                    return
                history.append(turn)

        waiting = {item.id for item in todo}
        tasks, started = [], set()
        for item in todo:  # in the dataset's order: a conversation where its first waiting turn is
            if turns is None or item.conversation is None:
                tasks.append(one(item))
            elif item.conversation not in started:
                started.add(item.conversation)
                tasks.append(conversation(turns.by_conversation[item.conversation]))
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise errors[0]


@dataclass
class EvalReport:
    eval_run: evals.EvalRun
    metrics: list[dict]
    diagnosis: Diagnosis
    slices: list[dict]
    items: list[dict]
    usage: dict
    judge_invalid: int
    judge_total: int
    extraction_errors: tuple[int, int] = (0, 0)  # (claims the extractor got wrong, claims extracted)
    baseline: str | None = None  # the run it is compared with (the one baseline rule)
    cause: regression.Cause | None = None  # what changed since the baseline that explains the metrics that dropped
    below_floor: list = field(default_factory=list)  # the metrics below their floors (setting floors): not regressions
    detectable: list[str] = field(default_factory=list)  # the drops the comparison with the baseline could detect
    # per judge criterion, how far the judge agrees with itself (judge_variance.py); empty when judged once
    judge_variance: list[CriterionVariance] = field(default_factory=list)
    # per turn and per conversation (conversation_report.py); None when the evaluation has no conversation
    conversations: ConversationFigures | None = None
    abstained: tuple[int, int] = (0, 0)  # (items whose answer abstained, items answered)

    @property
    def replayed_share(self) -> float | None:
        """The share of the items' model calls replayed from the response cache: the latencies and costs beside it
        are those first measured, not this run's."""
        return self.usage["cache_hits"] / self.usage["calls"] if self.usage.get("calls") else None

    @property
    def abstained_share(self) -> float | None:
        abstained, answered = self.abstained
        return abstained / answered if answered else None

    @property
    def judge_invalid_rate(self) -> float | None:
        return self.judge_invalid / self.judge_total if self.judge_total else None

    @property
    def extraction_error_rate(self) -> float | None:
        errors, claims = self.extraction_errors
        return errors / claims if claims else None


def what_it_measured(result: EvalReport) -> str:
    """The report's line on what it measured: the share of model calls replayed from the cache (their latencies and
    costs are those first measured) and the share of items whose answer abstained (left out of faithfulness)."""
    calls, share = result.usage.get("calls") or 0, result.replayed_share
    replayed = (
        f"{share:.0%} of {calls:,} LLM calls replayed from the cache (latency and cost as first measured)"
        if share
        else f"{calls:,} LLM calls, none replayed from the cache"
    )
    abstained, answered = result.abstained
    items = f"{abstained} of {answered} items abstained" + (
        f" ({result.abstained_share:.0%}), left out of faithfulness" if abstained else ""
    )
    return f"{replayed}; {items}"


def report(settings: Settings, db: Database, name: str) -> EvalReport:
    eval_run = evals.get_eval_run(db, name)
    if eval_run is None:
        raise InputError(f"there is no evaluation named {name!r}", fix="list them on the Evaluate page")
    summary = registry.in_registry_order(evals.metric_summary(db, eval_run.id))
    means = {row["metric"]: row["mean"] for row in summary}
    invalid, total = evals.judge_invalid_rate(db, eval_run.id)
    measured = eval_run.config.get("metrics") or registry.metric_names()
    items = evals.item_results(db, eval_run.id, registry.metric_names())
    abstained = evals.abstained_items(db, eval_run.id)
    return EvalReport(
        eval_run,
        summary,
        diagnose(
            means,
            settings.diagnosis_low,
            settings.diagnosis_high,
            judge_invalid_rate=invalid / total if total else None,
            why_missing={
                **{m: "not chosen for this evaluation" for m in registry.metric_names() if m not in measured},
                **{row["metric"]: why_missing(row) for row in summary if row["mean"] is None},
            },
            abstained=abstained[0],
            items=abstained[1],
        ),
        evals.slice_summary(db, eval_run.id),
        items,
        evals.usage(db, eval_run.id),
        invalid,
        total,
        evals.extraction_errors(db, eval_run.id),
        *what_changed(settings, db, eval_run, means),
        below_floor=floor_breaches(settings, means),
        detectable=detectable_drops(settings, db, eval_run),
        judge_variance=evaluation_variance(db, eval_run.id),
        conversations=conversation_figures(db, eval_run, settings.faithfulness_threshold),
        abstained=abstained,
    )


def report_key(db: Database, name: str) -> tuple | None:
    """What a finished evaluation's report depends on in the store: the run as it ended (id, status and wall time,
    which a resumed run adds to) and its baseline (a pin, an acknowledged alert change it); None while it runs or
    when there is no such evaluation (then the report is computed each time)."""
    run = evals.get_eval_run(db, name)
    if run is None or run.status == "running":
        return None
    return run.id, run.status, run.wall_s, regression.baseline_of(db, run)


def detectable_drops(settings: Settings, db: Database, run: evals.EvalRun) -> list[str]:
    """The drops the comparison of a run with its baseline could have detected (80% power), in words, the
    primary endpoints first (regression.detectable); none without a baseline or when the runs cannot be compared
    (another judge pin, a setting the check refuses: the regression check reports those)."""
    baseline_id = regression.baseline_of(db, run)
    baseline = evals.get_eval_run_by_id(db, baseline_id) if baseline_id else None
    if baseline is None or not regression.same_pin(run, baseline):
        return []
    try:
        return regression.detectable(regression.compare(db, settings, run, baseline))
    except InputError:
        return []


def floor_breaches(settings: Settings, means: dict[str, float | None]) -> list:
    """The metrics whose means are below their floors under the current floors (none when floors is empty or names
    an unknown metric, which the regression check reports)."""
    try:
        floors = regression.parse_floors(settings.floors)
    except InputError:
        return []
    return regression.check_floors(means, floors)


def what_changed(settings: Settings, db: Database, run: evals.EvalRun, means: dict) -> tuple:
    """(baseline name, cause) of a run: the parts whose configuration changed since its baseline that the metrics
    whose mean dropped by at least min_effect of their scale depend on; (None, None) without a baseline."""
    baseline_id = regression.baseline_of(db, run)
    baseline = evals.get_eval_run_by_id(db, baseline_id) if baseline_id else None
    if baseline is None:
        return None, None
    before = {row["metric"]: row["mean"] for row in evals.metric_summary(db, baseline.id)}
    dropped = [
        m
        for m, now in means.items()
        if now is not None
        and before.get(m) is not None
        and (before[m] - now) * (1 if registry.higher_is_better(m) else -1) >= settings.min_effect * registry.span_of(m)
    ]
    diff = regression.config_diff(regression.described_config(db, baseline), regression.described_config(db, run))
    return baseline.name, regression.likely_cause(diff, dropped, imported=run.pipeline is not None)


def why_missing(row: dict) -> str:
    """Why a metric has no mean: its invalid and not-applicable counts (and of these, the abstained items)."""
    parts = [f"{row[k]} {k.replace('_', ' ')}" for k in ("invalid", "not_applicable") if row.get(k)]
    if row.get("abstained"):
        parts.append(f"{row['abstained']} of them abstained")
    return ", ".join(parts) or "no score"


def weak_slices(report_: EvalReport, margin: float = 0.1) -> list[tuple[str, str, float]]:
    """(tag, metric, mean) where a tag's mean is below the run's mean by more than margin × the width of
    the metric's scale (margin on 0-1, margin × 4 on 1-5)."""
    overall = {row["metric"]: row["mean"] for row in report_.metrics if row["mean"] is not None}
    weak = []
    for row in report_.slices:
        base = overall.get(row["metric"])
        gap = margin * registry.span_of(row["metric"])
        if base is not None and row["mean"] is not None and row["mean"] < base - gap:
            weak.append((row["tag"], row["metric"], row["mean"]))
    return weak


def worst_items(report_: EvalReport, tag: str, metric: str, n: int = 5) -> list[dict]:
    rows = [r for r in report_.items if tag in (r["tags"] or []) and r.get(metric) is not None]
    return sorted(rows, key=lambda r: r[metric])[:n]
