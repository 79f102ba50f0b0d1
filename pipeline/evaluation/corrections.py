"""The people's corrections a judge prompt carries as examples: which ones an item may see (leave-one-out by
question) and the judge pin that names the correction set (pipeline/calibration/agreement.py re-scores with them)."""

from __future__ import annotations

from pipeline.evaluation.judge import JudgePin
from pipeline.evaluation.judge_prompts import JUDGE_PROMPT_VERSION
from pipeline.text import content_words, question_key
from store.annotations import Correction


def same_question_key(question: str) -> str:
    """A question's text normalised for leave-one-out (pipeline.text.question_key)."""
    return question_key(question)


def relevant_corrections(
    corrections: list[Correction],
    criterion: str,
    question: str,
    k: int,
    exclude_run: int | None = None,
    item_id: str | None = None,
) -> list[Correction]:
    """The k corrections of this criterion whose questions share the most words with this one. Leave-one-out
    by question: a correction of this run, of the same golden item (item_id) or of the same question (its
    normalised text) in any other run is never among them, so a score is never steered by a person's verdict
    on the very question it scores."""
    words, key = content_words(question), same_question_key(question)
    pool = [
        c
        for c in corrections
        if c.criterion == criterion
        and c.run_id != exclude_run
        and not (item_id is not None and c.item_id == item_id)
        and same_question_key(c.question) != key
    ]
    return sorted(pool, key=lambda c: (-len(words & content_words(c.question)), c.id))[:k]


def corrections_pin(base: JudgePin, version: int | None) -> JudgePin:
    if version is None:
        return base
    return JudgePin(base.model, base.digest, f"{JUDGE_PROMPT_VERSION}+corrections-v{version}")
