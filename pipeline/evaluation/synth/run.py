"""A synthesis job from start to saved dataset: plan, write each candidate through the gates, keep the survivors as
the next version of the dataset.

A job is stored before its first model call, with its plan (which chunks each candidate is written from); each
candidate is stored as soon as it is judged, with its calls. A job killed at any point (kill -9 included) is
resumed by the next `synth` of the same name from the first candidate it had not stored; one that finished is not,
and the next `synth` of its name starts a new job, saved as the dataset's next version. Candidates are written
`eval_concurrency` at a time, and judged for near-duplicates in their order, so the result does not depend on
which finishes first.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pipeline.evaluation.synth.candidate as candidate
import pipeline.evaluation.synth.gates as gates
import pipeline.evaluation.synth.report as report
import pipeline.evaluation.synth.sampling as sampling
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation import datasets
from pipeline.evaluation.dataset import GoldenItem, question_id
from pipeline.evaluation.synth.prompts import PROMPTS
from pipeline.evaluation.synth.report import SynthProgress, SynthReport
from pipeline.knowledge import similarity_scale
from pipeline.models.llm import LLM
from pipeline.text import plural
from store import datasets as stored_datasets
from store import kb
from store import synth as stored
from store.db import Database
from store.llm_log import save_calls
from store.synth import KEPT, RUNNING, CandidateRow, SynthJob

ORIGIN = "synthesised"


@dataclass
class Started:
    job: SynthJob
    notes: list[str]
    resumed: int  # candidates it had written before (0: a new job)


def _job_config(settings: Settings) -> dict:
    return {
        "generator_model": settings.generator_model,
        "embed_model": settings.embed_model,
        "claim_model": settings.claim_model,
        "verifier_chain": settings.verifier_chain,
        "synth_duplicate_similarity": settings.synth_duplicate_similarity,
        "retrieval_floor": settings.retrieval_floor,
        "top_k": settings.top_k,
        "prompts": {p.name: p.version for p in PROMPTS},
    }


def start(settings: Settings, db: Database, name: str, n: int, shares: dict[str, float], seed: int) -> Started:
    """The job to run: the unfinished one of this name (resumed, with the settings it was started with), else a new
    one, planned over the knowledge base. InputError, before any model call, for an empty knowledge base."""
    job = stored.latest_job(db, name)
    if job is not None and job.status == RUNNING:
        resumed = len(stored.candidates(db, job.id))
        notes = [
            f"resuming job {job.id} of {name!r}: {resumed} of {plural(len(job.plan), 'candidate')} already written"
        ]
        asked = (n, {k: round(v, 6) for k, v in shares.items()}, seed)
        if asked != (job.n, {k: round(v, 6) for k, v in job.shares.items()}, job.seed):
            notes.append(
                f"it keeps the size, shares and seed it was started with (n={job.n}, seed {job.seed}); to synthesise "
                "with others, use another name once it has finished"
            )
        return Started(job, notes, resumed)
    if n < 1:
        raise InputError(f"--n {n}: a job needs at least one candidate", fix="give --n 1 or more, e.g. --n 50")
    chunks = stored.live_chunks(db, settings.embed_model)
    if not chunks:
        raise InputError(
            f"the knowledge base has no chunks embedded with {settings.embed_model}: there is nothing to write "
            "questions from",
            fix="ingest documents first: `python -m pipeline ingest data/kb`",
        )
    slots, notes = sampling.plan(chunks, n, shares, seed)
    if not slots:
        raise InputError(
            "no chunk of the knowledge base can serve the kinds asked for: " + "; ".join(notes),
            fix="ask for other kinds, e.g. --kinds fact=1",
        )
    job = stored.create_job(db, name, n, shares, seed, [s.as_dict() for s in slots], _job_config(settings))
    documents = len({c.document_id for c in chunks})
    used = len({c.document_id for c in chunks if any(c.id in s.chunk_ids for s in slots)})
    notes.insert(0, f"job {job.id}: {plural(len(slots), 'candidate')} from {used} of {plural(documents, 'document')}")
    return Started(job, notes, 0)


def item_of(row: CandidateRow, job: SynthJob) -> GoldenItem:
    provenance = {
        "kind": row.kind,
        "chunk_ids": row.chunk_ids,
        "sources": row.details.get("sources", []),
        "model": row.model,
        "model_digest": row.model_digest,
        "prompt": row.prompt_name,
        "prompt_version": row.prompt_version,
        "synth_job": job.id,
        "review": "pending",
    }
    for key in ("shared", "false_premise", "missing"):
        if row.details.get(key):
            provenance[key] = row.details[key]
    if row.note:
        provenance["note"] = row.note
    return GoldenItem(
        id=question_id(row.question),
        question=row.question,
        reference=row.reference,
        tags=["synth", row.kind],
        origin=ORIGIN,
        provenance=provenance,
    )


def _note(job: SynthJob) -> str:
    return f"synth job {job.id}"


def _save(db: Database, job: SynthJob, rows: list[CandidateRow]) -> int | None:
    """Keep the job's kept questions as the next version of its dataset (once: a job stopped between the save and
    marking itself finished finds its version) and mark it finished; None when nothing was kept."""
    mine = [v for v in stored_datasets.versions(db, job.name) if (v.note or "").startswith(_note(job) + ":")]
    kept = [r for r in rows if r.status == KEPT]
    version = mine[0].version if mine else None
    if version is None and kept:
        items, seen = [], set()
        for row in kept:
            item = item_of(row, job)
            if item.id in seen:
                item = item.model_copy(update={"id": f"{item.id}-{row.position}"})
            seen.add(item.id)
            items.append(item)
        note = f"{_note(job)}: {len(kept)} of {plural(len(rows), 'candidate')} kept"
        version = datasets.save(db, job.name, items, ORIGIN, note).version
    stored.finish_job(db, job.id, version)
    return version


def run_synth(
    settings: Settings,
    db: Database,
    name: str,
    n: int,
    shares: dict[str, float],
    seed: int = 0,
    progress: Callable[[SynthProgress], None] | None = None,
) -> SynthReport:
    """Write `n` candidate questions from the knowledge base in the kinds and `shares` asked for (kinds.py), keep
    those that pass every gate (gates.py) and save them as the next version of dataset `name`. `progress` is called
    once the job starts (its notes then say whether it resumes) and after each candidate is stored."""
    name = datasets.check_name(name)
    previous = stored_datasets.version_info(db, name)
    started = start(settings, db, name, n, shares, seed)
    job = started.job
    slots = [sampling.Slot.from_dict(i, d) for i, d in enumerate(job.plan)]
    rows = stored.candidates(db, job.id)
    done = {r.position for r in rows}
    remaining = [s for s in slots if s.position not in done]
    state = SynthProgress(len(slots), already=len(rows), notes=started.notes)
    for row in rows:
        state.add(row)

    scale_llm = LLM(settings, db, origin="synth")
    kept: list[gates.Kept] = []
    scale = None
    if remaining:
        scale = gates.question_scale(scale_llm)
        for row in rows:  # the questions kept before a resume, embedded again (from the response cache)
            if row.status == KEPT:
                kept.append(gates.Kept(row.position, row.question, gates.unit(scale_llm.embed_query(row.question))))
    calls = scale_llm.take_calls()
    if calls:
        save_calls(db, calls, scale_llm.take_cache_entries())
    retrieval = None
    if any(s.kind == "negative" for s in remaining):
        retrieval = similarity_scale.current(settings, db, "synth")
    context = candidate.Context(settings, db, retrieval)
    chunks = kb.get_chunks(db, sorted({cid for s in remaining for cid in s.chunk_ids}))
    if progress:
        progress(state)

    pool = ThreadPoolExecutor(max_workers=settings.eval_concurrency, thread_name_prefix="synth")
    try:
        futures = [pool.submit(candidate.write, context, slot, chunks) for slot in remaining]
        for future in futures:
            written = future.result()
            row = written.row
            if row.status == KEPT:
                verdict = gates.duplicate_gate(written.vector, kept, scale, settings.synth_duplicate_similarity)
                if verdict.dropped:
                    written.drop("duplicate", verdict.reason)
                    row.details.update(verdict.details or {})
                else:
                    kept.append(gates.Kept(row.position, row.question, written.vector))
            stored.add_candidate(db, job.id, row, written.calls, written.cache_entries)
            state.add(row)
            if progress:
                progress(state)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

    rows = stored.candidates(db, job.id)
    version = _save(db, job, rows)
    notes = list(started.notes)
    if version is None:
        notes.append("no question was kept: nothing was saved")
    elif previous is not None and previous.version != version:
        notes.append(f"dataset {name!r} existed (latest version {previous.version}): saved as version {version}")
    planned = [s.kind for s in slots]
    return report.build(
        name, job.id, rows, planned, version, previous.version if previous else None, started.resumed, notes
    )
