"""`--fresh` on `ask`, `eval` and `sweep`: every model call reaches the model, and its reply refills the cache."""

from __future__ import annotations

import dataclasses

from pipeline.config import Settings

FRESH_HELP = (
    "do not read the response cache: every model call reaches the model (its reply refills the cache), so the "
    "latency figures are this run's own"
)


def add_fresh(parser) -> None:
    parser.add_argument("--fresh", action="store_true", help=FRESH_HELP)


def fresh(settings: Settings, args) -> Settings:
    """The settings of the command: with --fresh, the cache is not read (setting cache_read)."""
    return dataclasses.replace(settings, cache_read=False) if getattr(args, "fresh", False) else settings
