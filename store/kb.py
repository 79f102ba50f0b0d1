"""Documents, chunks and their embeddings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store.db import Database, fetch_dicts
from store.records import Chunk


@dataclass
class DocumentState:
    content_hash: str
    embed_model: str
    chunk_size: int
    chunk_overlap: int


@dataclass
class NewChunk:
    ordinal: int
    text: str
    start_char: int | None
    end_char: int | None
    embedding: list[float]


def document_state(db: Database, path: str) -> DocumentState | None:
    with db.cursor() as cur:
        row = cur.execute(
            "SELECT content_hash, embed_model, chunk_size, chunk_overlap FROM documents WHERE path = ?", [path]
        ).fetchone()
    return DocumentState(*row) if row else None


def replace_document(
    db: Database,
    path: str,
    title: str,
    content_hash: str,
    embed_model: str,
    chunk_size: int,
    chunk_overlap: int,
    n_chars: int,
    chunks: list[NewChunk],
) -> int:
    """Replace a document and all its chunks atomically; return the document id."""
    with db.transaction() as cur:
        old = cur.execute("SELECT id FROM documents WHERE path = ?", [path]).fetchone()
        if old:
            cur.execute("DELETE FROM chunks WHERE document_id = ?", [old[0]])
            cur.execute("DELETE FROM documents WHERE id = ?", [old[0]])
        doc_id = cur.execute(
            "INSERT INTO documents (path, title, content_hash, embed_model, chunk_size, chunk_overlap, "
            "n_chunks, n_chars) VALUES (?,?,?,?,?,?,?,?) RETURNING id",
            [path, title, content_hash, embed_model, chunk_size, chunk_overlap, len(chunks), n_chars],
        ).fetchone()[0]
        if chunks:
            cur.executemany(
                "INSERT INTO chunks (document_id, ordinal, text, start_char, end_char, embedding) VALUES (?,?,?,?,?,?)",
                [[doc_id, c.ordinal, c.text, c.start_char, c.end_char, c.embedding] for c in chunks],
            )
    return doc_id


def fingerprint(db: Database, embed_model: str) -> tuple:
    """Changes whenever the chunks embedded with this model change.

    A changed document is deleted and inserted again with a new id, so the documents table alone tells.
    """
    with db.cursor() as cur:
        return cur.execute(
            "SELECT count(*), sum(n_chunks), max(id), max(ingested_at) FROM documents WHERE embed_model = ?",
            [embed_model],
        ).fetchone()


def load_embeddings(db: Database, embed_model: str) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids, unit-normalised float32 matrix) of every chunk embedded with this model."""
    with db.cursor() as cur:
        table = cur.sql(
            "SELECT c.id, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.embed_model = ? ORDER BY c.id",
            params=[embed_model],
        ).to_arrow_table()
    ids = table.column("id").to_numpy()
    if len(ids) == 0:
        return ids, np.zeros((0, 0), dtype=np.float32)
    lists = table.column("embedding").combine_chunks()
    flat = lists.values.to_numpy(zero_copy_only=False).astype(np.float32)
    matrix = flat.reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return ids, matrix / np.where(norms == 0, 1, norms)


def get_chunks(db: Database, ids: list[int]) -> dict[int, Chunk]:
    if not ids:
        return {}
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT c.id, c.document_id, c.ordinal, c.text, d.path, d.title FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE c.id IN (SELECT unnest(?))",
            [list(map(int, ids))],
        ).fetchall()
    return {row[0]: Chunk(*row) for row in rows}


def list_documents(db: Database) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur, "SELECT id, path, title, n_chunks, n_chars, embed_model, ingested_at FROM documents ORDER BY path", []
        )


def count_chunks(db: Database, embed_model: str | None = None) -> int:
    with db.cursor() as cur:
        if embed_model is None:
            return cur.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return cur.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.embed_model = ?",
            [embed_model],
        ).fetchone()[0]
