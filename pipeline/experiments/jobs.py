"""Sweeps started from the app run in the background (pipeline.jobs): leaving the page does not stop them."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.config import Settings
from pipeline.evaluation import datasets
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.jobs import ready
from pipeline.experiments.grid import combinations, parse_grid
from pipeline.experiments.sweep import SweepProgress, open_sweep, run_sweep
from pipeline.jobs import Job, Jobs
from store.db import Database

SweepJob = Job  # progress: a SweepProgress; outcome: a SweepOutcome
SWEEPS = Jobs("sweep")


def start_sweep_job(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    grid: list[str],
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
    concurrency: int = 4,
    limit: int | None = None,
    tags: list[str] | None = None,
) -> SweepJob:
    """Check the grid, refuse while a model is missing, keep a dataset read from a file as a version (as the CLI
    does), check the sweep over its first `limit` items with any of `tags` and store it (open_sweep: InputError with
    the fix for a bad reference or rerun), then run it in the background. Nothing is stored for a refused grid or a
    missing model."""
    combinations(parse_grid(grid), settings)
    ready(settings, " ".join(str(name).split()), "sweep")
    if dataset.version is None:
        dataset = datasets.kept(db, dataset, dataset.name)[0]
    dataset = dataset.select(limit, tags)
    row, combos = open_sweep(settings, db, dataset, name, grid, reference, metrics)

    def work(job: SweepJob):
        def update(progress: SweepProgress) -> None:
            job.progress = progress

        return run_sweep(
            settings,
            db,
            dataset,
            row.name,
            grid,
            reference=reference,
            metrics=metrics,
            concurrency=concurrency,
            on_progress=update,
            cancel=job.cancel,
        )

    return SWEEPS.launch(row.name, len(combos) * len(dataset.items), work)


def sweep_jobs() -> list[SweepJob]:
    return SWEEPS.all()
