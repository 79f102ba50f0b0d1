"""Documents, chunks and their embeddings."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from store.db import Database, fetch_dicts, insert_rows
from store.errors import StoreLocked
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
    flags: list[str] = field(default_factory=list)  # prompt-injection patterns it matched
    excerpt: str = ""


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
            _retire(cur, old[0], "replaced")
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
            ids = dict(cur.execute("SELECT ordinal, id FROM chunks WHERE document_id = ?", [doc_id]).fetchall())
            _insert_flags(cur, doc_id, {ids[c.ordinal]: (c.flags, c.excerpt) for c in chunks if c.flags})
    return doc_id


# Chunks that a stored run points at: a retrieved chunk, or the evidence of a claim.
REFERENCED_CHUNKS = (
    "SELECT chunk_id FROM retrievals UNION SELECT evidence_chunk_id FROM claims WHERE evidence_chunk_id IS NOT NULL"
)


def _retire(cur, doc_id: int, reason: str) -> int:
    """Take a document out of the knowledge base. The chunks that stored runs reference stay, with their text,
    under a retired_documents row with the document's id and path, so an old drilldown still shows its
    evidence; retrieval only sees chunks of live documents. Returns how many chunks were kept."""
    cur.execute("DELETE FROM chunk_flags WHERE document_id = ?", [doc_id])
    cur.execute(f"DELETE FROM chunks WHERE document_id = ? AND id NOT IN ({REFERENCED_CHUNKS})", [doc_id])
    kept = cur.execute("SELECT count(*) FROM chunks WHERE document_id = ?", [doc_id]).fetchone()[0]
    if kept:
        cur.execute(
            "INSERT INTO retired_documents (id, path, title, ingested_at, reason) "
            "SELECT id, path, title, ingested_at, ? FROM documents WHERE id = ?",
            [reason, doc_id],
        )
    cur.execute("DELETE FROM documents WHERE id = ?", [doc_id])
    return kept


def delete_document(db: Database, doc_id: int) -> dict | None:
    """Delete a document from the knowledge base; {path, title, kept_chunks}, or None when there is none."""
    with db.transaction() as cur:
        row = cur.execute("SELECT path, title FROM documents WHERE id = ?", [doc_id]).fetchone()
        if row is None:
            return None
        return {"path": row[0], "title": row[1], "kept_chunks": _retire(cur, doc_id, "deleted")}


def document_with_chunks(db: Database, doc_id: int) -> dict | None:
    """A live document with its chunks in order: ordinal, text, character span, flags and ingest time."""
    with db.cursor() as cur:
        docs = fetch_dicts(cur, "SELECT * FROM documents WHERE id = ?", [doc_id])
        if not docs:
            return None
        docs[0]["chunks"] = fetch_dicts(
            cur,
            "SELECT c.id, c.ordinal, c.text, c.start_char, c.end_char, d.ingested_at, "
            "coalesce(f.flags, []) AS flags FROM chunks c JOIN documents d ON d.id = c.document_id "
            "LEFT JOIN chunk_flags f ON f.chunk_id = c.id WHERE c.document_id = ? ORDER BY c.ordinal",
            [doc_id],
        )
    return docs[0]


def _insert_flags(cur, doc_id: int, flags: dict[int, tuple[list[str], str]]) -> None:
    cur.execute("DELETE FROM chunk_flags WHERE document_id = ?", [doc_id])
    insert_rows(
        cur,
        "chunk_flags",
        ["chunk_id", "document_id", "flags", "excerpt"],
        [[chunk_id, doc_id, names, excerpt] for chunk_id, (names, excerpt) in flags.items()],
    )


def document_chunks(db: Database, path: str) -> tuple[int | None, list[tuple[int, str]]]:
    """(document id, [(chunk id, text)]) of a stored document; (None, []) when it is not stored."""
    with db.cursor() as cur:
        row = cur.execute("SELECT id FROM documents WHERE path = ?", [path]).fetchone()
        if row is None:
            return None, []
        return row[0], cur.execute(
            "SELECT id, text FROM chunks WHERE document_id = ? ORDER BY ordinal", [row[0]]
        ).fetchall()


def set_chunk_flags(db: Database, doc_id: int, flags: dict[int, tuple[list[str], str]]) -> None:
    """Replace the flags of one document's chunks: {chunk id: (pattern names, excerpt)}."""
    with db.transaction() as cur:
        _insert_flags(cur, doc_id, flags)


def document_flags(db: Database, doc_id: int) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(cur, "SELECT chunk_id, flags, excerpt FROM chunk_flags WHERE document_id = ?", [doc_id])


def flagged_chunks(db: Database) -> list[dict]:
    """Every flagged chunk with its document, in path and chunk order."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT d.path, d.title, c.ordinal, f.flags, f.excerpt FROM chunk_flags f "
            "JOIN chunks c ON c.id = f.chunk_id JOIN documents d ON d.id = f.document_id ORDER BY d.path, c.ordinal",
            [],
        )


# What this process read last, per (store, embedding model): for reads that may fall back on it (or_last_read)
_last_fingerprints: dict[tuple[str, str], tuple] = {}
_last_embeddings: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}


def fingerprint(db: Database, embed_model: str, or_last_read: bool = False) -> tuple:
    """Changes whenever the chunks embedded with this model change.

    A changed document is deleted and inserted again with a new id, so the documents table alone tells.
    or_last_read: for a reader that can do with what this process read a moment ago (the similarity scale's key,
    read after a question's retrieval has read it): once this process has read it, a read that finds the store
    held by another process waits only briefly (Database.optional_cursor), then gives the fingerprint read last.
    """
    key = (db.path, embed_model)
    fresh, found = _read_or_last(db, _last_fingerprints, key, or_last_read, lambda cur: _fingerprint(cur, embed_model))
    if fresh:
        _last_fingerprints[key] = found
    return found


def _read_or_last(db: Database, last: dict, key, or_last_read: bool, read):
    """(True, read(cursor)); with or_last_read, once this process has read `key` (it is in `last`), a store held by
    another process is waited on only briefly (Database.optional_cursor) and gives (False, what was read last)."""
    if or_last_read and key in last:
        try:
            with db.optional_cursor() as cur:
                return True, read(cur)
        except StoreLocked:
            return False, last[key]
    with db.cursor() as cur:
        return True, read(cur)


def _fingerprint(cur, embed_model: str) -> tuple:
    return cur.execute(
        "SELECT count(*), sum(n_chunks), max(id), max(ingested_at) FROM documents WHERE embed_model = ?",
        [embed_model],
    ).fetchone()


def load_embeddings(db: Database, embed_model: str, or_last_read: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids, unit-normalised float32 matrix) of every chunk embedded with this model. or_last_read: as for
    fingerprint, the matrix this process loaded last (the retriever's) while another process holds the store."""
    key = (db.path, embed_model)
    fresh, table = _read_or_last(
        db, _last_embeddings, key, or_last_read, lambda cur: _embeddings_table(cur, embed_model)
    )
    if not fresh:
        return table
    ids = table.column("id").to_numpy()
    if len(ids) == 0:
        return ids, np.zeros((0, 0), dtype=np.float32)
    lists = table.column("embedding").combine_chunks()
    flat = lists.values.to_numpy(zero_copy_only=False).astype(np.float32)
    matrix = flat.reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    _last_embeddings[key] = loaded = (ids, matrix / np.where(norms == 0, 1, norms))
    return loaded


def _embeddings_table(cur, embed_model: str):
    return cur.sql(
        "SELECT c.id, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id "
        "WHERE d.embed_model = ? ORDER BY c.id",
        params=[embed_model],
    ).to_arrow_table()


def get_chunks(db: Database, ids: list[int]) -> dict[int, Chunk]:
    if not ids:
        return {}
    with db.cursor() as cur:
        rows = cur.execute(
            "SELECT c.id, c.document_id, c.ordinal, c.text, coalesce(d.path, r.path), coalesce(d.title, r.title) "
            "FROM chunks c LEFT JOIN documents d ON d.id = c.document_id "
            "LEFT JOIN retired_documents r ON r.id = c.document_id WHERE c.id IN (SELECT unnest(?))",
            [list(map(int, ids))],
        ).fetchall()
    return {row[0]: Chunk(*row) for row in rows}


def list_documents(db: Database) -> list[dict]:
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT d.id, d.path, d.title, d.n_chunks, d.n_chars, d.embed_model, d.ingested_at, "
            "(SELECT count(*) FROM chunk_flags f WHERE f.document_id = d.id) AS flagged_chunks "
            "FROM documents d ORDER BY d.path",
            [],
        )


def document_states(db: Database) -> list[dict]:
    """Every live document: path, content_hash, embed_model, chunk_size, chunk_overlap, n_chunks (by path)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            "SELECT path, content_hash, embed_model, chunk_size, chunk_overlap, n_chunks FROM documents ORDER BY path",
            [],
        )


def count_chunks(db: Database, embed_model: str | None = None) -> int:
    with db.cursor() as cur:
        if embed_model is None:  # chunks of deleted documents that runs still reference are not counted
            return cur.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id").fetchone()[0]
        return cur.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.embed_model = ?",
            [embed_model],
        ).fetchone()[0]
