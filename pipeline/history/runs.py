"""Stored question runs, read back: one run with everything its drilldown shows, the filtered and paged
list of runs, and exports. The run itself is the engine's AnswerResult again (AnswerResult.from_stored)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pipeline.answering.events import AnswerResult
from store.db import Database
from store.evals import recent_chat_run_ids, scores_for_run
from store.history import (
    GROUPS,
    RunColumn,
    RunFilter,
    RunPage,
    export_runs,
    filter_choices,
    find_runs,
    group_runs,
    listed_columns,
    query_runs,
)
from store.llm_log import calls_for_run
from store.records import SpanRecord
from store.runs import get_run
from store.spans import spans_for_run

__all__ = [
    "GROUPS",
    "RunColumn",
    "RunFilter",
    "RunPage",
    "StoredRun",
    "export_runs",
    "filter_choices",
    "find_runs",
    "group_runs",
    "list_runs",
    "listed_columns",
    "load_result",
    "load_run",
    "recent_chat_run_ids",
    "scores_for_run",
]


@dataclass
class StoredRun:
    """One stored run and everything recorded about it."""

    result: AnswerResult  # the run: outcome, attempts with their claims, the final round's passages
    retrievals: list[dict]  # every round's retrieved chunks with text, source, score and whether cited
    grades: list[dict]  # the context grade of each retrieval round
    calls: list[dict]  # every LLM call of the run, oldest first
    scores: list[dict]  # evaluation scores, when the run answered an evaluation item
    spans: list[SpanRecord] = field(default_factory=list)  # the run's trace


# The drilldown's reads run side by side: each table's rows of an old run are a cold read (decompressing the
# row group's columns), CPU work that DuckDB does outside the GIL, so several cores share it.
_readers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="drilldown")


def load_run(db: Database, run_id: int) -> StoredRun | None:
    """The run with its retrievals, grades, LLM calls, scores and trace; None when there is no such run."""
    parts = [_readers.submit(read, db, run_id) for read in (get_run, calls_for_run, scores_for_run, spans_for_run)]
    run, calls, scores, spans = (part.result() for part in parts)
    if run is None:
        return None
    return StoredRun(AnswerResult.from_stored(run), run["retrievals"], run["grades"], calls, scores, spans)


def load_result(db: Database, run_id: int) -> AnswerResult | None:
    """Only the run itself, for reading many runs (re-judging) without their calls and scores."""
    run = get_run(db, run_id)
    return AnswerResult.from_stored(run) if run is not None else None


def list_runs(
    db: Database, run_filter: RunFilter, limit: int = 20, sort: str = "id", descending: bool = True
) -> list[dict]:
    """The newest runs matching the filter (or the first by a listed column), without counting them all."""
    return query_runs(db, run_filter, 1, limit, sort=sort, descending=descending)
