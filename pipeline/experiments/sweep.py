"""A sweep: one evaluation per combination of a grid, over the same items, resumable as a whole.

Each combination runs as an ordinary evaluation named `NAME/label` through the evaluation runner (its settings
replaced by the combination's values), so it is resumable item by item, its runs land in the main store, and calls
equal to an earlier combination's are answered from the shared response cache. The sweep records itself
(store/sweeps.py): run again under the same name, it skips the combinations already finished and resumes the others;
a different grid, dataset or choice of items under the same name is refused. A combination that chunks or embeds
differently from the knowledge base retrieves from an index of its own (indexes.py). Combinations are not compared
with a baseline and raise no alerts: comparing them is the leaderboard's job (leaderboard.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.datasets import identity_text
from pipeline.evaluation.runner import EvalOutcome, chosen_metrics, run_evaluation
from pipeline.experiments.grid import (
    INDEX_SETTINGS,
    Axis,
    Combination,
    combinations,
    grid_json,
    grid_text,
    items_hash,
    parse_grid,
)
from pipeline.experiments.indexes import (
    SweepIndex,
    fingerprint,
    knowledge_base_specs,
    needs_own_index,
    open_index,
    source_documents,
)
from store import evals, sweeps
from store.db import Database

FINISHED = "finished"
CANCELLED = "cancelled"
FAILED = "failed"  # stopped by an error (the message says why); the same command continues it


@dataclass
class SweepProgress:
    """Items finished across every combination (one progress view for the whole sweep)."""

    combinations: int
    items_per_combination: int
    finished_items: dict[int, int] = field(default_factory=dict)  # combination position -> items finished
    failed: int = 0
    current: str = ""  # the label of the combination running now, or what is being prepared
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return self.combinations * self.items_per_combination

    @property
    def finished(self) -> int:
        return sum(self.finished_items.values())


@dataclass
class SweepOutcome:
    name: str
    status: str  # finished | finished with N failures | cancelled
    progress: SweepProgress
    ran: dict[str, EvalOutcome] = field(default_factory=dict)  # label -> outcome of the combinations run now
    skipped: list[str] = field(default_factory=list)  # labels of the combinations finished before this run
    indexes: dict[str, SweepIndex] = field(default_factory=dict)  # fingerprint -> the index used


def resolve_reference(combos: Sequence, reference: str | None, sweep: str) -> str:
    """The label of the reference combination: `reference` as a label or an evaluation name; default the first."""
    labels = [c.label for c in combos]
    if reference is None or not reference.strip():
        return labels[0]
    wanted = reference.strip().removeprefix(f"{sweep}/")
    if wanted in labels:
        return wanted
    raise InputError(
        f"--reference {reference!r} is no combination of this grid",
        fix=f"name one of {', '.join(labels)}",
    )


def _same(a, b) -> bool:
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def _check_rerun(existing: sweeps.SweepRow, axes: list[Axis], dataset: Dataset, chosen, metrics) -> None:
    """Refuse to continue a sweep with another grid, dataset, choice of items or metrics."""
    name = existing.name
    if not _same(existing.grid, grid_json(axes)):
        raise InputError(
            f"sweep {name!r} was started with another grid ({grid_text(existing.grid)})",
            fix=f"give this grid a new --name, or continue {name!r} with {grid_text(existing.grid)}",
        )
    if existing.dataset_hash != dataset.content_hash:
        raise InputError(
            f"sweep {name!r} was started over another dataset ({identity_text(existing.dataset_hash)}, this one "
            f"{identity_text(dataset.content_hash)})",
            fix=f"give this sweep a new --name, or continue {name!r} over the dataset it was started with",
        )
    if existing.items_hash != chosen:
        raise InputError(
            f"sweep {name!r} was started over another choice of {existing.n_items} items",
            fix="continue it with the --limit and --tags it was started with, or give this sweep a new --name",
        )
    if metrics is not None and existing.metrics != metrics:
        stored = ", ".join(existing.metrics) if existing.metrics else "every metric"
        raise InputError(
            f"sweep {name!r} measures {stored}",
            fix="continue it without --metrics (it keeps its own), or give this sweep a new --name",
        )


def open_sweep(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    grid: list[str],
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
) -> tuple[sweeps.SweepRow, list[Combination]]:
    """The sweep of that name, new or continued, checked, with its combinations (InputError saying the fix for a bad
    grid, a reference that is no combination, or a rerun that does not match what the sweep was started with)."""
    name = " ".join(str(name).split())
    if not name:
        raise InputError("the sweep needs a name", fix="give one with --name, e.g. --name chunking")
    if dataset.given_answers:
        raise InputError(
            f"{dataset.name} carries its answers: a sweep answers each question under each combination",
            fix="sweep over a golden set (id, question, reference, tags) without answers",
        )
    if not dataset.items:
        raise InputError("the sweep has no items to run", fix="check --limit and --tags")
    axes = parse_grid(grid)
    combos = combinations(axes, settings)
    label = resolve_reference(combos, reference, name)
    chosen_ids = items_hash([i.id for i in dataset.items])
    picked = chosen_metrics(metrics)
    existing = sweeps.get_sweep(db, name)
    if existing is not None:
        _check_rerun(existing, axes, dataset, chosen_ids, picked)
        if reference is not None and label != existing.reference:
            sweeps.set_reference(db, existing.id, label)
        return sweeps.get_sweep(db, name), combos
    rows = [sweeps.CombinationRow(c.position, c.label, c.settings, c.eval_name(name)) for c in combos]
    created = sweeps.create_sweep(
        db,
        name,
        dataset.name,
        dataset.version,
        dataset.content_hash,
        chosen_ids,
        len(dataset.items),
        grid_json(axes),
        picked,
        label,
        rows,
    )
    return created, combos


def sweep_status(statuses: list[str]) -> str:
    """finished when every combination finished; finished with N failed combinations when each ended and N did not
    finish cleanly (failed items); failed when one stopped on an error before the others ran, cancelled when one was
    cancelled or not started."""
    if any(s in (sweeps.PENDING, sweeps.RUNNING, CANCELLED, FAILED) for s in statuses):
        return FAILED if FAILED in statuses else CANCELLED
    failed = sum(s != FINISHED for s in statuses)
    return FINISHED if not failed else f"finished with {failed} failed combination{'s' if failed != 1 else ''}"


def run_sweep(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    grid: list[str],
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
    concurrency: int = 4,
    on_progress: Callable[[SweepProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> SweepOutcome:
    """Run (or continue) the sweep `name`: one evaluation per combination of `grid` (texts such as "top_k=3,5,8")
    over `dataset`'s items; the combinations finished before are skipped, the others resumed item by item."""
    cancel = cancel or threading.Event()
    row, combos = open_sweep(settings, db, dataset, name, grid, reference, metrics)
    name = row.name
    n_items = len(dataset.items)
    progress = SweepProgress(len(combos), n_items)
    outcome = SweepOutcome(name, CANCELLED, progress)
    stored = {c.position: c for c in row.combinations}
    for combo in combos:
        if stored[combo.position].status == FINISHED:
            progress.finished_items[combo.position] = n_items
            outcome.skipped.append(combo.label)
    if on_progress:
        on_progress(progress)
    own_index = any(axis[0] in INDEX_SETTINGS for axis in row.grid)
    kb_specs = knowledge_base_specs(db) if own_index else set()
    documents = None
    sweeps.set_sweep_status(db, row.id, sweeps.RUNNING)
    statuses = {c.position: c.status for c in row.combinations}
    try:
        for combo in combos:
            if statuses[combo.position] == FINISHED:
                continue
            if cancel.is_set():
                break
            combo_settings = combo.apply(settings)
            knowledge = None
            if own_index and needs_own_index(combo_settings, kb_specs):
                progress.current = f"{combo.label}: preparing its index"
                if on_progress:
                    on_progress(progress)
                documents = documents if documents is not None else source_documents(db)
                fp = fingerprint(combo_settings, documents)
                if fp not in outcome.indexes:
                    outcome.indexes[fp] = open_index(combo_settings, db, documents)
                knowledge = outcome.indexes[fp]
            progress.current = combo.label
            if on_progress:
                on_progress(progress)
            sweeps.start_combination(db, row.id, combo.position, knowledge.fingerprint if knowledge else None)
            statuses[combo.position] = sweeps.RUNNING
            started = time.monotonic()

            def relay(p, position=combo.position):
                progress.finished_items[position] = p.finished
                if on_progress:
                    on_progress(progress)

            status = FAILED
            try:
                result = run_evaluation(
                    combo_settings,
                    db,
                    dataset,
                    combo.eval_name(name),
                    concurrency,
                    on_progress=relay,
                    cancel=cancel,
                    metrics=row.metrics,
                    knowledge=knowledge,
                    compare=False,
                )
                status = result.status
            except KeyboardInterrupt:
                status = CANCELLED
                raise
            finally:
                run = evals.get_eval_run(db, combo.eval_name(name))
                sweeps.end_combination(
                    db, row.id, combo.position, status, run.id if run else None, time.monotonic() - started
                )
                statuses[combo.position] = status
            outcome.ran[combo.label] = result
            progress.failed += result.progress.failed
    finally:
        outcome.status = sweep_status([statuses[c.position] for c in combos])
        sweeps.set_sweep_status(db, row.id, outcome.status)
    return outcome


def get_sweep(db: Database, name: str) -> sweeps.SweepRow:
    """A stored sweep with its combinations; InputError when there is none of that name."""
    row = sweeps.get_sweep(db, name)
    if row is None:
        raise InputError(f"there is no sweep named {name!r}", fix="list them with `python -m pipeline sweep --list`")
    return row


def list_sweeps(db: Database) -> list[dict]:
    """Every sweep, newest first (for a page's picker): name, dataset, status, combinations, finished."""
    return sweeps.list_sweeps(db)
