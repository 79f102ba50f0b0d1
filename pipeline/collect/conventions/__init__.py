"""Tracing conventions as plugins: each file says how one convention marks its spans and where a span keeps the
question, the answer, the retrieved documents and the model call (base.Convention). Assembly reads every span
through the first registered convention that speaks it, so a trace mixing conventions is read span by span; a
service's mapping (the setting collect_mapping) comes first for that service's spans.

Registering another: subclass base.Convention in a file of its own and `register(TheConvention())` it; it is
tried after the built-in ones, which are tried most specific first (openinference, openllmetry, otel_genai)."""

from __future__ import annotations

from pipeline.collect.conventions.base import Convention
from store.records import ReceivedSpan

REGISTRY: dict[str, Convention] = {}


def register(convention: Convention) -> Convention:
    REGISTRY[convention.name] = convention
    return convention


def convention_of(span: ReceivedSpan, first: tuple[Convention, ...] = ()) -> Convention | None:
    """The convention that reads this span: a mapping given in `first`, else the first registered one that
    speaks it (None: no convention marks it)."""
    return next((c for c in (*first, *REGISTRY.values()) if c.speaks(span)), None)


def _register_built_ins() -> None:
    from pipeline.collect.conventions.openinference import OpenInference
    from pipeline.collect.conventions.openllmetry import OpenLLMetry
    from pipeline.collect.conventions.otel_genai import OtelGenAI

    for convention in (OpenInference(), OpenLLMetry(), OtelGenAI()):  # the most specific marks first
        register(convention)


_register_built_ins()
