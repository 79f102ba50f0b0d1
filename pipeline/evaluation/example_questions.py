"""Questions to start an empty chat with, about the documents the knowledge base holds (the Chat page): golden-set
questions for the shipped sample, and what any other document covers."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.evaluation.dataset import load_dataset
from store.db import Database
from store.kb import list_documents

SAMPLE_GOLDEN_SET = PROJECT_ROOT / "data" / "eval" / "golden.jsonl"
# kinds of golden question whose answer is in the document (false premises and conflations make poor first tries)
ANSWERABLE = ("factual", "numeric", "definition")


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
