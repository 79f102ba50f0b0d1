"""Evaluations started from the app run in the background (pipeline.jobs): leaving the page does not stop them."""

from __future__ import annotations

from pipeline.config import Settings
from pipeline.errors import InputError, WorkbenchError
from pipeline.evaluation import datasets
from pipeline.evaluation.dataset import Dataset
from pipeline.evaluation.runner import Progress, chosen_metrics, pipeline_of, run_evaluation
from pipeline.jobs import Job, Jobs
from pipeline.models.health import check_ollama
from store.db import Database

EvalJob = Job  # progress: the runner's Progress; outcome: its EvalOutcome
EVALUATIONS = Jobs("evaluation")


def start_job(
    settings: Settings,
    db: Database,
    dataset: Dataset,
    name: str,
    concurrency: int,
    metrics: list[str] | None = None,
    pipeline: str | None = None,
    limit: int | None = None,
    tags: list[str] | None = None,
) -> tuple[EvalJob, str]:
    """Start an evaluation of `dataset` (its first `limit` items with any of `tags`) in the background, and say which
    dataset version it pinned: a dataset read from a file is kept as a version (datasets.for_evaluation), once the
    checks have passed, so that a refused start stores nothing. `metrics`: the metrics to measure (None:
    run_evaluation's default); `pipeline`: who wrote the answers of a dataset that carries them (None: its default)."""
    chosen_metrics(metrics)  # a bad choice is refused here, where the form can show it
    pipeline_of(dataset, pipeline)  # so is a pipeline name given with a golden set
    name = name.strip()
    if not name:
        raise InputError("the evaluation needs a name", fix="type a run name, e.g. baseline")
    ready(settings, name)
    pinned, line = datasets.for_evaluation(db, dataset, name, dataset.name)
    dataset = pinned.select(limit, tags)

    def work(job: EvalJob):
        def update(progress: Progress) -> None:
            job.progress = progress

        outcome = run_evaluation(
            settings,
            db,
            dataset,
            name,
            concurrency,
            on_progress=update,
            cancel=job.cancel,
            metrics=metrics,
            pipeline=pipeline,
        )
        job.progress = outcome.progress
        return outcome

    return EVALUATIONS.launch(name, len(dataset.items), work), line


def ready(settings: Settings, name: str, what: str = "evaluation") -> None:
    """Refuse to start while a model server or model is missing, before a run is stored: with the model list
    cached the run would otherwise start and fail every item."""
    failed = next((c for c in check_ollama(settings) if not c.ok), None)
    if failed is not None:
        raise WorkbenchError(f"{what} {name!r} cannot start: {failed.detail}", fix=failed.fix)


def jobs() -> list[EvalJob]:
    return EVALUATIONS.all()
