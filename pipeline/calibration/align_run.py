"""Aligning one criterion's judge on the store's ratings: the rated answers, the plan (model calls and prompt tokens
before anything runs), the run (each finished step saved as it completes, so a killed run resumes), and the
outcome: a new judge prompt version when the held-out gain's interval lies above zero, else the current prompt
kept. Used by `python -m pipeline align` and the Calibration page."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pipeline.calibration.align_judge import ModelJudge, PlanningJudge, shot_examples
from pipeline.calibration.alignment import Alignment, MemoryMemo, Procedure, RatedItem
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.judge import CRITERIA, judge_pin
from pipeline.history.runs import load_result
from pipeline.models.llm import LLM
from pipeline.text import question_key
from pipeline.verification.faithfulness import context_block
from store import annotations, judge_versions
from store.db import Database
from store.evals import reference_of
from store.llm_log import save_calls


@dataclass
class Plan:
    criterion: str
    items: int
    questions: int
    calls: int  # model calls still to make (steps already finished are not counted)
    tokens: int
    done_steps: int
    job: str


class StoreMemo:
    """Finished steps of one alignment job, in the store: each saved as soon as it completes."""

    def __init__(self, db: Database, job: str):
        self.db, self.job = db, job

    def get(self, key: str):
        return judge_versions.step(self.db, self.job, key)

    def put(self, key: str, value) -> None:
        judge_versions.save_step(self.db, self.job, key, value)


class ReadOnlyMemo(MemoryMemo):
    """The store's finished steps, read; what a plan computes is kept in memory only."""

    def __init__(self, below: StoreMemo):
        super().__init__()
        self.below = below

    def get(self, key: str):
        return super().get(key) if key in self else self.below.get(key)


def rated_items(db: Database, criterion: str) -> list[RatedItem]:
    """Every rated answer of the criterion: people's score (the median of its annotators', rounded down), grouped
    by its question's text."""
    if criterion not in CRITERIA:
        raise InputError(f"unknown criterion {criterion!r}", fix=f"choose one of {', '.join(CRITERIA)}")
    with db.cursor() as cur:
        run_ids = [r[0] for r in cur.execute("SELECT DISTINCT run_id FROM ratings ORDER BY run_id").fetchall()]
    by_run: dict[int, list[int]] = {}
    for row in annotations.ratings_for(db, run_ids):
        if row[criterion] is not None:
            by_run.setdefault(row["run_id"], []).append(row[criterion])
    items = []
    for run_id, scores in sorted(by_run.items()):
        result = load_result(db, run_id)
        if result is None:
            continue
        human = sorted(scores)[(len(scores) - 1) // 2]
        items.append(
            RatedItem(
                str(run_id),
                question_key(result.question),
                human,
                result.question,
                result.answer or "",
                context_block(result.passages),
                reference_of(db, run_id),
            )
        )
    return items


def job_key(settings: Settings, pin, criterion: str, items: list[RatedItem], current: dict | None, seed: int) -> str:
    """The alignment's identity: the same ratings, judge, prompt in use, repeats and seed resume the same job."""
    text = json.dumps(
        [
            criterion,
            pin.model,
            pin.digest,
            (current or {}).get("version"),
            settings.judge_repeats,
            getattr(settings, "judge_repeat_temperature", None),
            seed,
            [(it.id, it.human) for it in items],
        ]
    )
    return f"{criterion}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


class Aligner:
    def __init__(self, settings: Settings, db: Database, criterion: str, seed: int = 0):
        self.settings, self.db, self.criterion, self.seed = settings, db, criterion, seed
        self.items = rated_items(db, criterion)
        self.llm = LLM(settings, db, origin="align")
        self.pin = judge_pin(self.llm, settings)
        self.current = judge_versions.active(db).get(criterion)
        self.job = job_key(settings, self.pin, criterion, self.items, self.current, seed)

    def plan(self) -> Plan:
        planner = PlanningJudge(self.llm, self.settings, self.criterion, self.pin, self.items, self.current)
        Procedure(planner, ReadOnlyMemo(StoreMemo(self.db, self.job))).run(self.items, seed=self.seed)
        return Plan(
            self.criterion,
            len(self.items),
            len({it.group for it in self.items}),
            planner.calls,
            planner.tokens,
            judge_versions.steps_done(self.db, self.job),
            self.job,
        )

    def run(self, on_step=None, on_item=None) -> tuple[Alignment, int | None]:
        """Run (or resume) the alignment; return its outcome and the new version's number (None: refused)."""
        judge = ModelJudge(self.llm, self.settings, self.criterion, self.pin, self.items, self.current)
        judge.on_item = on_item or (lambda: None)

        def saved(step: str) -> None:
            save_calls(self.db, self.llm.take_calls(), self.llm.take_cache_entries())
            if on_step:
                on_step(step)

        result = Procedure(judge, StoreMemo(self.db, self.job), saved).run(self.items, seed=self.seed)
        if not result.accepted:
            return result, None
        fitted = {
            "recipe": result.final.recipe,
            "clarification": result.final.clarification,
            "examples": shot_examples(result.final, judge.by_id),
            "kappa": result.kappa,
            "kappa_low": result.kappa_low,
            "kappa_high": result.kappa_high,
            "gain": result.gain,
            "gain_low": result.gain_low,
            "gain_high": result.gain_high,
            "fitted_on": [int(it.id) for it in self.items],
        }
        return result, judge_versions.add_version(self.db, self.criterion, fitted)


def versions(db: Database, criterion: str) -> list[dict]:
    if criterion not in CRITERIA:
        raise InputError(f"unknown criterion {criterion!r}", fix=f"choose one of {', '.join(CRITERIA)}")
    return judge_versions.versions(db, criterion)


def use_version(db: Database, criterion: str, version: int) -> None:
    """Go back (or forward) to a fitted version; 0 is the built-in rubric."""
    known = {v["version"] for v in versions(db, criterion)}
    if version and version not in known:
        raise InputError(
            f"{criterion} has no judge prompt version {version}",
            fix=f"choose one of {', '.join(map(str, sorted(known))) or 'none yet'}, or 0 for the built-in rubric",
        )
    judge_versions.use_version(db, criterion, version)
