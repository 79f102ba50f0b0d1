"""The indexes of a sweep's combinations that chunk or embed differently from the knowledge base.

The user's knowledge base (the store's documents and chunks) is never changed by a sweep. A combination whose
chunk_size, chunk_overlap or embed_model differs from the knowledge base's retrieves from an index of its own: a
separate store file, `<store folder>/sweep-indexes/<fingerprint>.duckdb`, ingested from the same source files as
the knowledge base (the documents' paths), with the combination's settings. Its fingerprint is of those settings and
of every document's path and content hash, so a later sweep with the same settings over the same knowledge base
reuses it (ingesting finds every file unchanged), and an index killed half-way is completed the next time. A source
file that changed on disk since it was ingested is refused: the index would not hold the knowledge base's text.

Runs of such a combination are written to the main store like any other (Runs, Compare and Trends see them), but
their chunks are not the knowledge base's: the retriever numbers them -rank, as given contexts are (migration m020),
and the engine keeps a negative-id chunk's text and source with the retrieval, so the drilldown shows the text the
answer was written from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llama_index.core.schema import NodeWithScore, QueryBundle

from pipeline.answering.retriever import top_k
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.kb_snapshot import KnowledgeSnapshot, SnapshotRetriever, chunk_node, take_snapshot
from pipeline.experiments.grid import INDEX_SETTINGS
from pipeline.knowledge.ingest import ingest, read_text
from pipeline.knowledge.similarity_scale import scale_for
from pipeline.models.llm import LLM
from pipeline.text import plural
from store import kb
from store.db import Database, get_database
from store.llm_log import save_calls

FOLDER = "sweep-indexes"


def index_spec(settings: Settings) -> tuple:
    """The settings an index is built with: (chunk_size, chunk_overlap, embed_model)."""
    return tuple(getattr(settings, name) for name in INDEX_SETTINGS)


def knowledge_base_specs(db: Database) -> set[tuple]:
    """The index settings the knowledge base's documents were ingested with (one, unless it mixes several)."""
    return {(d["chunk_size"], d["chunk_overlap"], d["embed_model"]) for d in kb.document_states(db)}


def needs_own_index(settings: Settings, kb_specs: set[tuple]) -> bool:
    """Whether a combination retrieves from an index of its own: its index settings are not those of every
    document of the knowledge base."""
    return kb_specs != {index_spec(settings)}


def fingerprint(settings: Settings, documents: list[dict]) -> str:
    """Of the index settings and every source document's path and content hash."""
    body = {
        "settings": dict(zip(INDEX_SETTINGS, index_spec(settings), strict=True)),
        "documents": [[d["path"], d["content_hash"]] for d in documents],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def index_path(settings: Settings, fingerprint_: str) -> Path:
    return Path(settings.store_path).resolve().parent / FOLDER / f"{fingerprint_}.duckdb"


@dataclass
class SweepIndex(KnowledgeSnapshot):
    """A combination's own index in memory: its chunks are retrieved with ids -rank, their text kept with the
    retrieval (see the module's docstring)."""

    fingerprint: str = ""
    path: str = ""
    built: int = 0  # documents ingested this time (0: reused as it was)
    documents: int = 0

    def retriever(self, llm: LLM, k: int) -> IndexRetriever:
        return IndexRetriever(llm, self, k)


class IndexRetriever(SnapshotRetriever):
    """The store's retriever over a sweep's index; the n-th chunk retrieved has the id -n (no chunk of the
    knowledge base has a negative id)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = self._llm.embed_query(query_bundle.query_str)
        hits = top_k(self._snapshot, vector, self._k)
        return [
            chunk_node(dataclasses.replace(self._snapshot.chunks[chunk_id], id=-rank), score)
            for rank, (chunk_id, score) in enumerate(hits, start=1)
        ]


def source_documents(db: Database) -> list[dict]:
    """The knowledge base's documents, each checked against its file: InputError naming those whose file is gone
    or changed since it was ingested (an index built from them would not hold the knowledge base's text)."""
    documents = kb.document_states(db)
    if not documents:
        raise InputError(
            "the knowledge base is empty: a sweep over chunking or the embedding model builds its indexes from the "
            "knowledge base's documents",
            fix="ingest documents first (`python -m pipeline ingest data/kb`)",
        )
    changed = []
    for d in documents:
        try:
            text = read_text(Path(d["path"]))
        except ValueError as exc:
            changed.append(f"{d['path']} ({exc})")
            continue
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != d["content_hash"]:
            changed.append(f"{d['path']} (changed since it was ingested)")
    if changed:
        shown = "; ".join(changed[:3]) + (f"; and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise InputError(
            f"{plural(len(changed), 'document')} of the knowledge base no longer match their files: {shown}",
            fix="ingest them again (`python -m pipeline ingest PATH`) or remove them from the knowledge base, then "
            "run the sweep again",
        )
    return documents


def open_index(
    settings: Settings, db: Database, documents: list[dict], on_step: Callable[[str], None] | None = None
) -> SweepIndex:
    """The index of `settings` (a combination's) over `documents` (source_documents): reused when it is complete,
    built (or completed) otherwise, its embedding calls cached and logged in the main store."""
    fp = fingerprint(settings, documents)
    path = index_path(settings, fp)
    index_db = get_database(dataclasses.replace(settings, store_path=str(path), store_read_only=False))
    llm = LLM(settings, db, origin="ingest")
    spec = ", ".join(f"{n}={v}" for n, v in zip(INDEX_SETTINGS, index_spec(settings), strict=True))
    if on_step:
        on_step(f"index {fp} ({spec}): {plural(len(documents), 'document')}")
    try:
        results = ingest([d["path"] for d in documents], settings, index_db, llm)
        skipped = [r for r in results if r.status == "skipped"]
        if skipped:
            raise InputError(
                f"the index {spec} could not take {skipped[0].path}: {skipped[0].reason}",
                fix="fix or remove that document in the knowledge base, then run the sweep again",
            )
        scale = scale_for(index_db, llm)
        snapshot = take_snapshot(index_db, settings.embed_model, scale)
    finally:
        save_calls(db, llm.take_calls(), llm.take_cache_entries())
        index_db.close()
    built = sum(r.status in ("added", "replaced") for r in results)
    return SweepIndex(
        snapshot.embed_model,
        snapshot.ids,
        snapshot.matrix,
        snapshot.chunks,
        snapshot.scale,
        fingerprint=fp,
        path=str(path),
        built=built,
        documents=len(documents),
    )
