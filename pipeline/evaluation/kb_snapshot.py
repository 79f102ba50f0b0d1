"""The knowledge base in memory, for evaluation workers that cannot open the store (Ray tasks on other
processes or machines: only the driver opens DuckDB).

The driver reads the chunks and embeddings of the embedding model once; a worker searches them with the same
matrix product as the store's retriever, so an item retrieves exactly what it would from the store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.answering.retriever import top_k
from pipeline.knowledge.similarity_scale import SimilarityScale, unmeasured
from pipeline.models.llm import LLM
from store import kb
from store.db import Database
from store.records import Chunk


@dataclass
class KnowledgeSnapshot:
    """Every chunk embedded with `embed_model`: ids, their unit-normalised vectors (one row each) and texts, and
    the embedding model's similarity scale over them (the retrieval floor and the on-topic check read it)."""

    embed_model: str
    ids: np.ndarray
    matrix: np.ndarray
    chunks: dict[int, Chunk]
    scale: SimilarityScale | None = None

    def retriever(self, llm: LLM, k: int) -> SnapshotRetriever:
        return SnapshotRetriever(llm, self, k)


def take_snapshot(db: Database, embed_model: str, scale: SimilarityScale | None = None) -> KnowledgeSnapshot:
    """The knowledge base as it is now, with the scale measured on it (without one the workers read
    similarities raw and have no retrieval floor: there is no store there to measure in)."""
    ids, matrix = kb.load_embeddings(db, embed_model)
    scale = scale or unmeasured(embed_model, "the knowledge-base snapshot was taken without a scale")
    return KnowledgeSnapshot(embed_model, ids, matrix, kb.get_chunks(db, [int(i) for i in ids]), scale)


def chunk_node(chunk: Chunk, score: float) -> NodeWithScore:
    """A retrieved chunk as the store's retriever returns it."""
    node = TextNode(
        id_=str(chunk.id),
        text=chunk.text,
        metadata={"chunk_id": chunk.id, "source": chunk.source, "title": chunk.title},
    )
    return NodeWithScore(node=node, score=score)


class SnapshotRetriever(BaseRetriever):
    """The store's retriever (DuckDBRetriever) over a snapshot instead of the store."""

    def __init__(self, llm: LLM, snapshot: KnowledgeSnapshot, k: int):
        super().__init__()
        self._llm, self._snapshot, self._k = llm, snapshot, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = self._llm.embed_query(query_bundle.query_str)
        hits = top_k(self._snapshot, vector, self._k)
        return [chunk_node(self._snapshot.chunks[chunk_id], score) for chunk_id, score in hits]
