"""Conversations read back: a conversation's turns in order (the Runs page's conversation view), the turns before
a run (Annotate, `ask --conversation`), a run's previous and next turns (the drilldown), and new conversation ids."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from pipeline.answering.conversation import Turn, conversation_name
from store.conversations import conversation_runs, earlier_runs, last_turn, recent_conversations
from store.db import Database

__all__ = [
    "Neighbours",
    "conversation_runs",
    "earlier_turns",
    "history_of",
    "neighbours",
    "new_conversation_id",
    "next_turn",
    "recent_conversations",
]


def new_conversation_id(origin: str = "chat") -> str:
    """A fresh conversation's name: where it started, when, and a random part (two browser sessions never share)."""
    return f"{origin}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def _turn(row: dict) -> Turn:
    standalone = row["standalone_question"]
    return Turn(row["question"], row["answer"], standalone if standalone != row["question"] else None, row["id"])


def history_of(db: Database, conversation_id: str) -> list[Turn]:
    """Every stored turn of the conversation, oldest first, as the engine takes its history."""
    return [_turn(row) for row in conversation_runs(db, conversation_name(conversation_id))]


def next_turn(db: Database, conversation_id: str) -> int:
    """The number the conversation's next turn takes."""
    return last_turn(db, conversation_name(conversation_id)) + 1


def earlier_turns(db: Database, result) -> list[Turn]:
    """The turns of the run's conversation before it, oldest first; none for a run that is no turn."""
    if not result.conversation_id or result.turn_no is None or result.run_id is None:
        return []
    return [_turn(row) for row in earlier_runs(db, result.conversation_id, result.turn_no, result.run_id)]


@dataclass(frozen=True)
class Neighbours:
    previous: int | None  # the run of the turn before, if any
    next: int | None  # the run of the turn after, if any
    position: int  # this run's place among the conversation's stored turns, from 1
    total: int


def neighbours(db: Database, result) -> Neighbours | None:
    """The run's place in its conversation and the runs of the turns either side; None for a run that is no turn."""
    if not result.conversation_id:
        return None
    ids = [row["id"] for row in conversation_runs(db, result.conversation_id)]
    if result.run_id not in ids:
        return None
    at = ids.index(result.run_id)
    return Neighbours(ids[at - 1] if at > 0 else None, ids[at + 1] if at + 1 < len(ids) else None, at + 1, len(ids))
