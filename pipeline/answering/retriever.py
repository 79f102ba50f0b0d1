"""A LlamaIndex retriever over the chunk embeddings kept in DuckDB.

The embeddings are loaded once into a normalised matrix per process and reloaded when the
knowledge base changes (checked by a cheap fingerprint query), so a search is one matrix product.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.models.llm import LLM
from store import kb
from store.db import Database


@dataclass
class _Index:
    fingerprint: tuple
    ids: np.ndarray
    matrix: np.ndarray


_indexes: dict[tuple[str, str], _Index] = {}
_guard = threading.Lock()


def vector_index(db: Database, embed_model: str) -> _Index:
    key = (db.path, embed_model)
    current = kb.fingerprint(db, embed_model)
    with _guard:
        index = _indexes.get(key)
        if index is None or index.fingerprint != current:
            ids, matrix = kb.load_embeddings(db, embed_model)
            index = _indexes[key] = _Index(current, ids, matrix)
        return index


def top_k(index: _Index, vector: list[float], k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the k nearest chunks, best first."""
    if len(index.ids) == 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    if query.shape[0] != index.matrix.shape[1]:
        raise ValueError(f"query vector has {query.shape[0]} dimensions, the index {index.matrix.shape[1]}")
    norm = np.linalg.norm(query)
    scores = index.matrix @ (query / norm if norm else query)
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.argsort(-scores[best])]
    return [(int(index.ids[i]), float(scores[i])) for i in best]


class DuckDBRetriever(BaseRetriever):
    def __init__(self, llm: LLM, db: Database, k: int):
        super().__init__()
        self._llm, self._db, self._k = llm, db, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vector = self._llm.embed_query(query_bundle.query_str)
        hits = top_k(vector_index(self._db, self._llm.settings.embed_model), vector, self._k)
        chunks = kb.get_chunks(self._db, [chunk_id for chunk_id, _ in hits])
        nodes = []
        for chunk_id, score in hits:
            chunk = chunks[chunk_id]
            node = TextNode(
                id_=str(chunk_id),
                text=chunk.text,
                metadata={"chunk_id": chunk_id, "source": chunk.source, "title": chunk.title},
            )
            nodes.append(NodeWithScore(node=node, score=score))
        return nodes
