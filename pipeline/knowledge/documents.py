"""What the knowledge base holds: its documents and how many chunks are embedded."""

from __future__ import annotations

from store.kb import count_chunks, flagged_chunks, list_documents

__all__ = ["count_chunks", "flagged_chunks", "list_documents"]
