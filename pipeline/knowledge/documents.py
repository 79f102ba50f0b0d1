"""What the knowledge base holds: its documents, their chunks, and taking a document out."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.errors import InputError
from pipeline.evaluation.dataset import load_dataset
from store import kb
from store.db import Database
from store.kb import count_chunks, flagged_chunks, list_documents

__all__ = [
    "count_chunks",
    "document_with_chunks",
    "example_questions",
    "flagged_chunks",
    "list_documents",
    "preview",
    "remove_document",
]
SAMPLE_GOLDEN_SET = PROJECT_ROOT / "data" / "eval" / "golden.jsonl"
# kinds of golden question whose answer is in the document (false premises and conflations make poor first tries)
ANSWERABLE = ("factual", "numeric", "definition")


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


def example_questions(db: Database, n: int = 4, golden_set: Path = SAMPLE_GOLDEN_SET) -> list[str]:
    """Questions to start an empty chat with, about documents the knowledge base holds: for the shipped sample,
    golden-set questions the documents answer (an item's first tag is its document's file name: rag ->
    rag.md), one per document; for any other document, what it covers."""
    documents = {Path(d["path"]).stem: d["title"] for d in list_documents(db)}
    picked: dict[str, str] = {}
    if golden_set.is_file():
        for item in load_dataset(golden_set).items:
            topic = item.tags[0] if item.tags else ""
            if topic in documents and topic not in picked and set(item.tags) & set(ANSWERABLE):
                picked[topic] = item.question
    for stem, title in documents.items():
        picked.setdefault(stem, f"What does {title} cover?")
    return list(picked.values())[:n]
