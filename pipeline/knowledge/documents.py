"""What the knowledge base holds: its documents, their chunks, and taking a document out."""

from __future__ import annotations

from pipeline.errors import InputError
from store import kb
from store.db import Database
from store.kb import count_chunks, flagged_chunks, list_documents

__all__ = [
    "count_chunks",
    "document_with_chunks",
    "flagged_chunks",
    "list_documents",
    "preview",
    "remove_document",
]


def document_with_chunks(db: Database, doc_id: int) -> dict:
    """The document with its chunks; InputError when there is no such document (deleted meanwhile)."""
    document = kb.document_with_chunks(db, doc_id)
    if document is None:
        raise InputError(f"there is no document with id {doc_id}", fix="pick a document from the list")
    return document


def preview(chunks: list[dict], limit: int = 4000) -> str:
    """The document's text rebuilt from its chunks (the overlap between neighbours is left out where the chunks'
    character offsets are known), cut at `limit` characters."""
    text, end = "", None
    for chunk in chunks:
        start = chunk["start_char"]
        if text and start is not None and end is not None and start <= end:
            piece = chunk["text"][end - start :]
        else:
            piece = ("\n…\n" if text else "") + chunk["text"]
        text += piece
        end = chunk["end_char"]
        if len(text) >= limit:
            return text[:limit] + " …"
    return text


def remove_document(db: Database, doc_id: int) -> dict:
    """Delete a document from the knowledge base; chunks that stored runs reference are kept for them (see
    store.kb._retire). Returns {path, title, kept_chunks}."""
    removed = kb.delete_document(db, doc_id)
    if removed is None:
        raise InputError(f"there is no document with id {doc_id}", fix="pick a document from the list")
    return removed
