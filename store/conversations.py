"""Conversations: the runs that are turns of one (runs.conversation_id, runs.turn_no), read back in order."""

from __future__ import annotations

from store.db import Database, fetch_dicts

TURN_COLUMNS = (
    "id, turn_no, question, standalone_question, answer, status, faithfulness, n_claims, n_supported, started_at"
)


def conversation_runs(db: Database, conversation_id: str) -> list[dict]:
    """The conversation's turns, oldest first (by turn, then by run id when two runs took the same turn)."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"SELECT {TURN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY turn_no NULLS LAST, id",
            [conversation_id],
        )


def earlier_runs(db: Database, conversation_id: str, turn_no: int, run_id: int) -> list[dict]:
    """The turns before this one (by turn number, then by run id), oldest first."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            f"SELECT {TURN_COLUMNS} FROM runs WHERE conversation_id = ? AND id <> ? "
            "AND (turn_no < ? OR (turn_no = ? AND id < ?)) ORDER BY turn_no, id",
            [conversation_id, run_id, turn_no, turn_no, run_id],
        )


def last_turn(db: Database, conversation_id: str) -> int:
    """The highest turn number the conversation has (0: no turn yet)."""
    with db.cursor() as cur:
        found = cur.execute("SELECT max(turn_no) FROM runs WHERE conversation_id = ?", [conversation_id]).fetchone()
    return found[0] or 0


def recent_conversations(db: Database, limit: int = 50) -> list[dict]:
    """The conversations with their number of turns, first and last question, newest first."""
    with db.cursor() as cur:
        return fetch_dicts(
            cur,
            """
            SELECT conversation_id, count(*) AS turns, min(started_at) AS started_at, max(started_at) AS last_at,
                   arg_min(question, turn_no) AS first_question
            FROM runs WHERE conversation_id IS NOT NULL
            GROUP BY conversation_id ORDER BY last_at DESC, conversation_id LIMIT ?""",
            [limit],
        )
