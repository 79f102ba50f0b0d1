"""Synthesis jobs (`synth`): a job per run of a name, and every candidate question it wrote, kept or dropped.

A candidate is written once, with the model calls it cost, in one transaction: a job killed at any point resumes
from its last written candidate, and the primary key (job, position) refuses a candidate written twice.
pipeline/evaluation/synth/ is the domain layer over this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from store.db import Database, fetch_dicts
from store.llm_log import insert_calls
from store.records import CacheEntry, LLMCallRecord

RUNNING, FINISHED = "running", "finished"
KEPT, DROPPED = "kept", "dropped"


@dataclass
class SynthJob:
    id: int
    name: str
    n: int
    shares: dict[str, float]
    seed: int
    plan: list[dict]  # per position: {"kind", "chunk_ids"}
    config: dict  # the models, prompt versions and thresholds it was started under
    status: str
    dataset_version: int | None = None


@dataclass
class CandidateRow:
    position: int
    kind: str
    chunk_ids: list[int]
    question: str | None
    reference: str | None
    status: str  # kept | dropped
    gate: str | None  # the gate that dropped it (or rewrote it, with a note)
    reason: str | None
    model: str
    prompt_name: str
    prompt_version: str
    model_digest: str | None = None
    note: str | None = None
    details: dict = field(default_factory=dict)
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


COLUMNS = [
    "job_id",
    "position",
    "kind",
    "chunk_ids",
    "question",
    "reference",
    "status",
    "gate",
    "reason",
    "note",
    "details",
    "model",
    "model_digest",
    "prompt_name",
    "prompt_version",
    "calls",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
]


def _job(row: dict) -> SynthJob:
    return SynthJob(
        row["id"],
        row["name"],
        row["n"],
        json.loads(row["shares"]),
        row["seed"],
        json.loads(row["plan"]),
        json.loads(row["config"]),
        row["status"],
        row["dataset_version"],
    )


def create_job(db: Database, name: str, n: int, shares: dict, seed: int, plan: list[dict], config: dict) -> SynthJob:
    with db.transaction() as cur:
        job_id = cur.execute(
            "INSERT INTO synth_jobs (name, n, shares, seed, plan, config, status) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            [name, n, json.dumps(shares), seed, json.dumps(plan), json.dumps(config), RUNNING],
        ).fetchone()[0]
    return SynthJob(job_id, name, n, dict(shares), seed, plan, config, RUNNING)


def latest_job(db: Database, name: str) -> SynthJob | None:
    """The newest job of `name`, finished or not; None when there is none."""
    with db.cursor() as cur:
        rows = fetch_dicts(cur, "SELECT * FROM synth_jobs WHERE name = ? ORDER BY id DESC LIMIT 1", [name])
    return _job(rows[0]) if rows else None


def get_job(db: Database, job_id: int) -> SynthJob | None:
    with db.cursor() as cur:
        rows = fetch_dicts(cur, "SELECT * FROM synth_jobs WHERE id = ?", [job_id])
    return _job(rows[0]) if rows else None


def add_candidate(
    db: Database,
    job_id: int,
    candidate: CandidateRow,
    calls: list[LLMCallRecord] = (),
    cache_entries: list[CacheEntry] = (),
) -> None:
    """The candidate, the calls it cost and their response-cache entries, together."""
    c = candidate
    row = [
        job_id,
        c.position,
        c.kind,
        list(map(int, c.chunk_ids)),
        c.question,
        c.reference,
        c.status,
        c.gate,
        c.reason,
        c.note,
        json.dumps(c.details),
        c.model,
        c.model_digest,
        c.prompt_name,
        c.prompt_version,
        c.calls,
        c.cache_hits,
        c.prompt_tokens,
        c.completion_tokens,
    ]
    with db.transaction() as cur:
        cur.execute(f"INSERT INTO synth_candidates ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(row))})", row)
        if calls or cache_entries:
            insert_calls(cur, None, list(calls), list(cache_entries))


def candidates(db: Database, job_id: int) -> list[CandidateRow]:
    """The candidates a job has written, in their order."""
    names = COLUMNS[1:]
    with db.cursor() as cur:
        rows = fetch_dicts(
            cur, f"SELECT {', '.join(names)} FROM synth_candidates WHERE job_id = ? ORDER BY position", [job_id]
        )
    out = []
    for row in rows:
        row["details"] = json.loads(row["details"]) if row["details"] else {}
        row["chunk_ids"] = list(row["chunk_ids"])
        out.append(CandidateRow(**row))
    return out


def finish_job(db: Database, job_id: int, dataset_version: int | None) -> None:
    with db.transaction() as cur:
        cur.execute(
            "UPDATE synth_jobs SET status = ?, dataset_version = ?, finished_at = current_timestamp WHERE id = ?",
            [FINISHED, dataset_version, job_id],
        )


@dataclass
class ChunkRow:
    id: int
    document_id: int
    path: str
    title: str
    ordinal: int
    text: str


def live_chunks(db: Database, embed_model: str) -> list[ChunkRow]:
    """Every chunk of the live documents embedded with `embed_model`, by document path and ordinal."""
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT c.id, c.document_id, d.path, coalesce(d.title, ''), c.ordinal, c.text FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE d.embed_model = ? ORDER BY d.path, c.ordinal",
            [embed_model],
        ).fetchall()
    return [ChunkRow(*row) for row in rows]
