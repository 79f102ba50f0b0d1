"""Human ratings of answers and claims, and the versioned set of few-shot corrections for the judge."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from store.db import Database, fetch_dicts
from store.errors import RecordRefused

# the judge's criteria (pipeline.evaluation.judge.CRITERIA), one ratings column each; grounding and topicality
# came later: their columns take NULL, as in every rating saved before them
CRITERIA = ("correctness", "helpfulness", "faithfulness", "grounding", "topicality")
OPTIONAL = ("grounding", "topicality")
VERDICTS = ("supported", "contradicted", "unsupported")


@dataclass
class Correction:
    id: int
    criterion: str
    run_id: int
    question: str
    answer_excerpt: str
    human_score: int
    judge_score: int | None
    why: str
    item_id: str | None = None  # the golden item of the corrected run, when it came from an evaluation


def save_rating(
    db: Database,
    run_id: int,
    annotator: str,
    scores: dict[str, int],
    comment: str = "",
    claim_verdicts: dict[tuple[int, int], str] | None = None,
) -> None:
    """Save (or update) one annotator's rating of a run and their claim verdicts. The caller validates them for
    its user (pipeline.calibration.annotations); the store refuses what it cannot hold as given (RecordRefused),
    before anything is written: a score that is not a whole number from 1 to 5 (DuckDB would round 4.5 to 5 and
    read "3" as 3), a criterion or claim verdict it does not know."""
    _check_rating(scores, claim_verdicts)
    with db.transaction() as cur:
        cur.execute(
            f"INSERT OR REPLACE INTO ratings (run_id, annotator, {', '.join(CRITERIA)}, comment, rated_at) "
            f"VALUES (?, ?, {', '.join('?' * len(CRITERIA))}, ?, current_timestamp)",
            [
                run_id,
                annotator,
                *(None if scores.get(c) is None else int(scores[c]) for c in CRITERIA),
                comment or None,
            ],
        )
        for (attempt_no, claim_no), verdict in (claim_verdicts or {}).items():
            cur.execute(
                "INSERT OR REPLACE INTO claim_ratings (run_id, attempt_no, claim_no, annotator, verdict, "
                "rated_at) VALUES (?, ?, ?, ?, ?, current_timestamp)",
                [run_id, attempt_no, claim_no, annotator, verdict],
            )


def _check_rating(scores: dict, claim_verdicts: dict | None) -> None:
    unknown = sorted(str(c) for c in set(scores) - set(CRITERIA))
    if unknown:
        raise RecordRefused(f"a rating has an unknown criterion ({', '.join(unknown)})", f"rate {', '.join(CRITERIA)}")
    for criterion in CRITERIA:
        value = scores.get(criterion)
        if value is None and criterion in OPTIONAL:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= 5:
            raise RecordRefused(
                f"a rating's {criterion} must be a whole number from 1 to 5, not {value!r}",
                "choose a score from 1 to 5",
            )
    for verdict in (claim_verdicts or {}).values():
        if verdict not in VERDICTS:
            raise RecordRefused(f"unknown claim verdict {verdict!r}", f"use one of {', '.join(VERDICTS)}")


def ratings_for(db: Database, run_ids: list[int]) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur, "SELECT * FROM ratings WHERE list_contains(?::BIGINT[], run_id) ORDER BY run_id, annotator", [run_ids]
        )


def rated_by(db: Database, annotator: str, run_ids: list[int]) -> set[int]:
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT run_id FROM ratings WHERE annotator = ? AND list_contains(?::BIGINT[], run_id)",
            [annotator, run_ids],
        ).fetchall()
    return {r[0] for r in rows}


def judged_pairs(db: Database, run_ids: list[int], criterion: str, version: int | None = None) -> list[dict]:
    """(run, annotator, judge score, human score, judge reasoning) for rated runs with a valid judge score and
    a human score of the criterion. version: the re-judged scores of that correction set instead of the original
    ones."""
    if criterion not in CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}")
    source = (
        "(SELECT run_id, metric, value, explanation FROM rejudged WHERE correction_version = ? AND status = 'ok')"
        if version is not None
        else "(SELECT run_id, metric, value, explanation FROM scores WHERE status = 'ok')"
    )
    params = ([version] if version is not None else []) + [f"judge_{criterion}", run_ids]
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"""
            SELECT r.run_id, r.annotator, s.value::INTEGER AS judge, r.{criterion} AS human, s.explanation,
                   u.question, u.answer
            FROM ratings r JOIN {source} s ON s.run_id = r.run_id AND s.metric = ?
            JOIN runs u ON u.id = r.run_id
            WHERE list_contains(?::BIGINT[], r.run_id) AND r.{criterion} IS NOT NULL
            ORDER BY r.run_id, r.annotator""",
            params,
        )


def claim_pairs(db: Database, run_ids: list[int]) -> list[dict]:
    """Human claim verdicts next to the verifier's."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT h.run_id, h.attempt_no, h.claim_no, h.annotator, h.verdict AS human, c.verdict AS verifier
            FROM claim_ratings h JOIN claims c USING (run_id, attempt_no, claim_no)
            WHERE list_contains(?::BIGINT[], h.run_id) AND c.verdict <> 'unverified'""",
            [run_ids],
        )


def add_corrections(db: Database, corrections: list[dict], note: str = "") -> int:
    """Add corrections (validated by the caller) and record a new version of the set; return the version."""
    with db.transaction() as cur:
        new_ids = [
            cur.execute(
                "INSERT INTO corrections (criterion, run_id, question, answer_excerpt, human_score, judge_score, why) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                [
                    c["criterion"],
                    c["run_id"],
                    c["question"],
                    c["answer_excerpt"],
                    c["human_score"],
                    c.get("judge_score"),
                    c["why"],
                ],
            ).fetchone()[0]
            for c in corrections
        ]
        current = cur.execute(
            "SELECT version, correction_ids FROM correction_sets ORDER BY version DESC LIMIT 1"
        ).fetchone()
        version = (current[0] if current else 0) + 1
        cur.execute(
            "INSERT INTO correction_sets (version, correction_ids, note) VALUES (?, ?, ?)",
            [version, (list(current[1]) if current else []) + new_ids, note or None],
        )
    return version


def current_corrections(db: Database) -> tuple[int | None, list[Correction]]:
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT version, correction_ids FROM correction_sets ORDER BY version DESC LIMIT 1"
        ).fetchone()
        if not row:
            return None, []
        rows = cur.execute(
            "SELECT c.id, c.criterion, c.run_id, c.question, c.answer_excerpt, c.human_score, c.judge_score, "
            "c.why, (SELECT min(i.item_id) FROM eval_items i WHERE i.run_id = c.run_id) "
            "FROM corrections c WHERE list_contains(?::BIGINT[], c.id) ORDER BY c.id",
            [list(row[1])],
        ).fetchall()
    return row[0], [Correction(*r) for r in rows]


def golden_ids(db: Database, run_ids: list[int]) -> dict[int, str]:
    """run id -> the golden item id it answered, for runs that belong to an evaluation."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT run_id, min(item_id) FROM eval_items WHERE list_contains(?::BIGINT[], run_id) GROUP BY run_id",
            [run_ids],
        ).fetchall()
    return dict(rows)


def save_rejudged(db: Database, version: int, rows: list[dict]) -> None:
    with db.transaction() as cur:
        cur.execute(
            "DELETE FROM rejudged WHERE correction_version = ? AND list_contains(?::BIGINT[], run_id)",
            [version, [r["run_id"] for r in rows]],
        )
        for r in rows:
            cur.execute(
                "INSERT INTO rejudged (correction_version, run_id, metric, value, status, explanation, "
                "corrections_used) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [version, r["run_id"], r["metric"], r["value"], r["status"], r["explanation"], r["corrections_used"]],
            )
