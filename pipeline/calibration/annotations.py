"""People's ratings and the judge's corrections: input is checked here, then handed to the store."""

from __future__ import annotations

from pipeline.errors import InputError
from pipeline.evaluation.judge import rubric
from store import annotations as store
from store.annotations import (
    CRITERIA,
    OPTIONAL,
    VERDICTS,
    Correction,
    current_corrections,
    judged_pairs,
    ratings_for,
)
from store.db import Database

__all__ = [
    "CRITERIA",
    "VERDICTS",
    "Correction",
    "add_corrections",
    "criterion_rubric",
    "current_corrections",
    "judged_pairs",
    "rated_by",
    "ratings_for",
    "save_rating",
]


def save_rating(
    db: Database,
    run_id: int,
    annotator: str,
    scores: dict[str, int],
    comment: str = "",
    claim_verdicts: dict[tuple[int, int], str] | None = None,
) -> None:
    """Save (or update) one annotator's rating of a run; refuses scores outside 1-5 and unknown verdicts.
    Grounding and topicality may be left out (None), as in ratings saved before they existed; the Annotate
    form asks for every criterion."""
    annotator = annotator.strip()
    if not annotator:
        raise InputError("the rating needs the annotator's name", fix="enter your name first")
    unknown = sorted(set(scores) - set(CRITERIA))
    if unknown:
        raise InputError(f"unknown criterion {', '.join(unknown)}", fix=f"rate {', '.join(CRITERIA)}")
    for criterion in CRITERIA:
        value = scores.get(criterion)
        if value is None and criterion in OPTIONAL:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise InputError(
                f"{criterion} must be a whole number from 1 to 5, not {value!r}", fix="choose a score from 1 to 5"
            )
    for verdict in (claim_verdicts or {}).values():
        if verdict not in VERDICTS:
            raise InputError(f"unknown claim verdict {verdict!r}", fix=f"use one of {', '.join(VERDICTS)}")
    store.save_rating(db, run_id, annotator, scores, comment.strip(), claim_verdicts)


def criterion_rubric(criterion: str) -> tuple[str, dict[int, str]]:
    """(what the criterion asks, the anchor text of each score from 5 down to 1): the judge's own rubric, for
    showing people the scale they rate on."""
    return rubric(criterion)


def add_corrections(db: Database, corrections: list[dict], note: str = "") -> int:
    """Add corrections as a new version of the set; each needs a reason. Returns the version."""
    for c in corrections:
        if not c.get("why", "").strip():
            raise InputError("every correction needs a reason", fix="say why the human score is right")
    return store.add_corrections(db, [{**c, "why": c["why"].strip()} for c in corrections], note)


def rated_by(db: Database, annotator: str, run_ids: list[int]) -> set[int]:
    """The runs among run_ids this annotator has rated."""
    return store.rated_by(db, annotator.strip(), run_ids)
