"""Top-5 retrieval among 1,000 and 100,000 chunks of 768-dimensional embeddings kept in DuckDB.

Measured: the retriever's own work for one query whose embedding is known (knowledge-base change
check, matrix product, top-k, fetching the chunk texts). The embedding call is Ollama's time.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from bench.common import Figure, bench_environment, median_ms
from pipeline.answering.retriever import top_k, vector_index
from pipeline.config import load_settings
from store import kb
from store.db import get_database

DIM = 768


def fill(db, n_chunks: int, embed_model: str, rng: np.random.Generator) -> None:
    """n_chunks random unit vectors with ~500-character texts, in documents of 100 chunks."""
    per_doc = 100
    with db.transaction() as cur:
        for d in range(n_chunks // per_doc):
            cur.execute(
                "INSERT INTO documents (id, path, title, content_hash, embed_model, chunk_size, "
                "chunk_overlap, n_chunks, n_chars) VALUES (?, ?, ?, 'h', ?, 512, 64, ?, 50000)",
                [d + 1, f"doc-{d}.md", f"Doc {d}", embed_model, per_doc],
            )
        vectors = rng.standard_normal((n_chunks, DIM), dtype=np.float32)
        table = pa.table(
            {
                "id": np.arange(1, n_chunks + 1, dtype=np.int64),
                "document_id": (np.arange(n_chunks) // per_doc + 1).astype(np.int64),
                "ordinal": (np.arange(n_chunks) % per_doc).astype(np.int32),
                "text": [f"chunk {i} " + "lorem ipsum dolor sit amet " * 18 for i in range(n_chunks)],
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM).cast(
                    pa.list_(pa.float32())
                ),
            }
        )
        cur.register("new_chunks", table)
        cur.execute(
            "INSERT INTO chunks (id, document_id, ordinal, text, embedding) "
            "SELECT id, document_id, ordinal, text, embedding FROM new_chunks"
        )
        cur.unregister("new_chunks")


def measure(n_chunks: int, queries: int = 40) -> tuple[float, float]:
    with bench_environment():
        settings = load_settings()
        db = get_database(settings)
        rng = np.random.default_rng(3)
        fill(db, n_chunks, settings.embed_model, rng)
        start = time.perf_counter()
        vector_index(db, settings.embed_model)
        load_s = time.perf_counter() - start
        samples = []
        for _ in range(queries):
            query = rng.standard_normal(DIM).astype(np.float32).tolist()
            start = time.perf_counter()
            hits = top_k(vector_index(db, settings.embed_model), query, 5)
            kb.get_chunks(db, [chunk_id for chunk_id, _ in hits])
            samples.append(time.perf_counter() - start)
        db.close()
    return median_ms(samples), load_s


def run() -> list[Figure]:
    figures = []
    for n, target in ((1_000, 50), (100_000, 50)):
        median, load_s = measure(n)
        figures.append(
            Figure(
                f"retrieval top-5 of {n:,} chunks (median)",
                median,
                "ms",
                target,
                note=f"index load once per process: {load_s:.2f} s",
            )
        )
    return figures


if __name__ == "__main__":
    from bench.common import print_table

    print_table(run())
