"""Per-turn and per-conversation figures of an evaluation whose items include turns of conversations.

Per turn: each metric's mean over the turns with that number (1, 2, 3, ...), with how many were scored. Per
conversation: its turns, its mean faithfulness, its worst turn (the lowest faithfulness) and whether every turn is
faithful (answered, and no faithfulness below the accept threshold `faithfulness_threshold`: a turn with no claims,
an abstention, states nothing unfaithful); and the share of conversations whose every turn is faithful. Single
questions are no turn and are left out. A turn counts when its item has a run (a turn that timed out has none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.evaluation import registry
from store import evals
from store.db import Database

FAITHFULNESS = "faithfulness"  # the component metric (claims supported / claims) the per-conversation figures read


@dataclass
class ConversationFigures:
    by_turn: list[dict] = field(default_factory=list)  # {turn, metric, mean, n}, by turn then registry order
    conversations: list[dict] = field(default_factory=list)  # {conversation, turns, mean_faithfulness, worst_turn, ...}
    threshold: float = 0.8

    @property
    def all_faithful_share(self) -> float | None:
        """The share of conversations whose every turn is faithful."""
        if not self.conversations:
            return None
        return sum(c["all_faithful"] for c in self.conversations) / len(self.conversations)

    def as_dict(self) -> dict:
        return {
            "by_turn": self.by_turn,
            "conversations": self.conversations,
            "all_faithful_share": self.all_faithful_share,
            "faithfulness_threshold": self.threshold,
        }


def per_turn_rows(figures: ConversationFigures) -> tuple[list[int], list[dict]]:
    """(the turn numbers, one row per metric {metric, turns: {turn: {mean, n}}}), metrics in registry order: the
    per-turn table of the CLI report and the Evaluate page."""
    numbers = sorted({row["turn"] for row in figures.by_turn})
    rows: dict[str, dict] = {}
    for row in figures.by_turn:
        rows.setdefault(row["metric"], {"metric": row["metric"], "turns": {}})["turns"][row["turn"]] = {
            "mean": row["mean"],
            "n": row["n"],
        }
    return numbers, list(rows.values())


def share_sentence(figures: ConversationFigures) -> str:
    """The share of conversations whose every turn is faithful, in words."""
    faithful = sum(c["all_faithful"] for c in figures.conversations)
    total = len(figures.conversations)
    return (
        f"{faithful} of {total} conversations ({figures.all_faithful_share:.0%}) have every turn faithful "
        f"(no turn's faithfulness below {figures.threshold:g})"
    )


def display_name(conversation_id: str, eval_name: str) -> str:
    """The dataset's id of a conversation (its stored id without the evaluation's `eval:NAME:` prefix)."""
    return conversation_id.removeprefix(f"eval:{eval_name}:")


def conversation_figures(db: Database, eval_run: evals.EvalRun, threshold: float) -> ConversationFigures | None:
    """The figures of an evaluation's turns; None when it has no conversation."""
    rows = evals.turn_scores(db, eval_run.id)
    if not rows:
        return None
    per_turn: dict[tuple[int, str], list[float]] = {}
    scored: dict[tuple[int, str], int] = {}
    turns: dict[str, dict[str, dict]] = {}  # conversation -> item -> {turn, status, faithfulness, f_status}
    for row in rows:
        turn = row["turn_no"]
        item = turns.setdefault(row["conversation_id"], {}).setdefault(
            row["item_id"], {"turn": turn, "status": row["item_status"], "faithfulness": None, "f_status": None}
        )
        if row["metric"] is None:
            continue
        if row["metric"] == FAITHFULNESS:
            item["faithfulness"], item["f_status"] = row["value"], row["status"]
        if turn is not None:
            key = (turn, row["metric"])
            scored.setdefault(key, 0)
            if row["status"] == "ok":
                per_turn.setdefault(key, []).append(row["value"])
                scored[key] += 1
    order = {name: i for i, name in enumerate(registry.metric_names())}
    by_turn = [
        {
            "turn": turn,
            "metric": metric,
            "mean": sum(per_turn[(turn, metric)]) / n if n else None,
            "n": n,
        }
        for (turn, metric), n in sorted(scored.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order))))
    ]
    return ConversationFigures(
        by_turn, [_conversation(c, items, eval_run.name, threshold) for c, items in turns.items()], threshold
    )


def _conversation(conversation_id: str, items: dict[str, dict], eval_name: str, threshold: float) -> dict:
    ordered = sorted(items.values(), key=lambda t: (t["turn"] is None, t["turn"] or 0))
    valued = [t for t in ordered if t["f_status"] == "ok"]
    worst = min(valued, key=lambda t: t["faithfulness"], default=None)
    faithful = [
        t["status"] == "done" and not (t["f_status"] == "ok" and t["faithfulness"] < threshold) for t in ordered
    ]
    return {
        "conversation": display_name(conversation_id, eval_name),
        "conversation_id": conversation_id,
        "turns": len(ordered),
        "mean_faithfulness": sum(t["faithfulness"] for t in valued) / len(valued) if valued else None,
        "worst_turn": worst["turn"] if worst else None,
        "worst_faithfulness": worst["faithfulness"] if worst else None,
        "faithful_turns": sum(faithful),
        "all_faithful": all(faithful),
    }
