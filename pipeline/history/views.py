"""Saved views of the Runs page: a filter and a grouping under a name, kept in the store."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings
from pipeline.errors import InputError
from store import views
from store.db import Database
from store.history import GROUPS, RunFilter


@dataclass(frozen=True)
class SavedView:
    name: str
    run_filter: RunFilter
    group_by: str | None  # one of GROUPS, or None: not grouped


def prices(settings: Settings) -> tuple[float, float]:
    """The prices per 1000 prompt and completion tokens a run's cost is estimated with; (0, 0): no estimate."""
    return (settings.price_per_1k_prompt_tokens, settings.price_per_1k_completion_tokens)


def priced(settings: Settings) -> bool:
    """Whether a cost is estimated: a price per 1000 prompt or completion tokens is set."""
    return any(prices(settings))


def save_view(db: Database, name: str, run_filter: RunFilter, group_by: str | None = None) -> str:
    """Save the view under its name (stripped; replacing a view of that name); the name."""
    name = name.strip()
    if not name:
        raise InputError("a saved view needs a name", fix="type a name for the view, e.g. 'slow answers'")
    if group_by is not None and group_by not in GROUPS:
        raise InputError(f"cannot group runs by {group_by!r}", fix=f"group by one of {', '.join(GROUPS)}")
    views.save_view(db, name, run_filter.to_dict(), group_by)
    return name


def saved_views(settings: Settings, db: Database) -> list[SavedView]:
    """Every saved view by name, its filter priced with today's settings."""
    return [
        SavedView(v["name"], RunFilter.from_dict(v["filter"], prices(settings)), v["group_by"])
        for v in views.list_views(db)
    ]


def delete_view(db: Database, name: str) -> bool:
    return views.delete_view(db, name)
