"""Judge prompt versions fitted on people's ratings, which one each criterion uses, and the finished steps of an
alignment (so a killed one resumes)."""

from __future__ import annotations

import json

from store.db import Database, fetch_dicts


def add_version(db: Database, criterion: str, fitted: dict) -> int:
    """Record a new version of a criterion's judge prompt and make it the one in use; return its number."""
    with db.transaction() as cur:
        latest = cur.execute(
            "SELECT max(version) FROM judge_prompt_versions WHERE criterion = ?", [criterion]
        ).fetchone()[0]
        version = (latest or 0) + 1
        cur.execute(
            "INSERT INTO judge_prompt_versions (criterion, version, recipe, clarification, examples, held_out_kappa,"
            " kappa_low, kappa_high, gain, gain_low, gain_high, fitted_on) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                criterion,
                version,
                fitted["recipe"],
                fitted.get("clarification") or None,
                json.dumps(fitted.get("examples", [])),
                fitted.get("kappa"),
                fitted.get("kappa_low"),
                fitted.get("kappa_high"),
                fitted.get("gain"),
                fitted.get("gain_low"),
                fitted.get("gain_high"),
                json.dumps(fitted.get("fitted_on", [])),
            ],
        )
        _activate(cur, criterion, version)
    return version


def use_version(db: Database, criterion: str, version: int) -> None:
    """Make `version` (0: the built-in rubric) the one the criterion's judge uses."""
    with db.transaction() as cur:
        _activate(cur, criterion, version)


def _activate(cur, criterion: str, version: int) -> None:
    cur.execute("DELETE FROM judge_prompt_active WHERE criterion = ?", [criterion])
    if version:
        cur.execute("INSERT INTO judge_prompt_active VALUES (?, ?)", [criterion, version])


def versions(db: Database, criterion: str) -> list[dict]:
    """Every fitted version of a criterion, newest first, with whether it is in use."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            "SELECT v.*, a.version IS NOT NULL AS active FROM judge_prompt_versions v LEFT JOIN judge_prompt_active a"
            " ON a.criterion = v.criterion AND a.version = v.version WHERE v.criterion = ? ORDER BY v.version DESC",
            [criterion],
        )
    return [_decoded(r) for r in rows]


def active(db: Database) -> dict[str, dict]:
    """The version in use of each criterion that has one, by criterion."""
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur,
            "SELECT v.* FROM judge_prompt_versions v JOIN judge_prompt_active a"
            " ON a.criterion = v.criterion AND a.version = v.version ORDER BY v.criterion",
            [],
        )
    return {r["criterion"]: _decoded(r) for r in rows}


def _decoded(row: dict) -> dict:
    for key in ("examples", "fitted_on"):
        row[key] = json.loads(row[key]) if isinstance(row[key], str) else (row[key] or [])
    return row


def step(db: Database, job: str, name: str):
    """A finished step's value (JSON-decoded); None when it has not finished."""
    with db.cursor() as cur:
        row = cur.execute("SELECT value FROM alignment_steps WHERE job = ? AND step = ?", [job, name]).fetchone()
    return None if row is None else json.loads(row[0])


def save_step(db: Database, job: str, name: str, value) -> None:
    with db.transaction() as cur:
        cur.execute(
            "INSERT INTO alignment_steps (job, step, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [job, name, json.dumps(value)],
        )


def steps_done(db: Database, job: str) -> int:
    with db.cursor() as cur:
        return cur.execute("SELECT count(*) FROM alignment_steps WHERE job = ?", [job]).fetchone()[0]
