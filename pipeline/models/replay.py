"""Replays: what the response cache answered, and what it cost when it was first computed.

A run's latency is a measurement only when its calls reached the model. A run answered wholly from the cache
reports the latency that the run which first made those calls reported (kept as a cache entry of its own, under
the run's call keys); any other run reports its measured time plus the original latency of each call it replayed
from earlier work (an estimate when it replayed any: replayed calls are counted as if they ran one after another).
Every such figure is shown with the share of replayed calls beside it (`replay_note`, `replayed_share`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone

from store.records import LLMCallRecord

RUN_KEY_PREFIX = "run latency\n"


@dataclass(frozen=True)
class RunCosts:
    latency_ms: float
    n_calls: int
    n_replayed: int
    replayed_from: datetime | None  # when the earliest replayed reply was first computed


def run_key(call_keys: list[str]) -> str:
    """The cache key of a run's own latency: its calls' keys, in any order (its verification is concurrent)."""
    blob = RUN_KEY_PREFIX + "\n".join(sorted(call_keys))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def run_costs(llm, calls: list[LLMCallRecord], call_keys: list[str], wall_ms: float, started: datetime, keep: bool):
    """The run's latency from original costs (see the module's doc), its call counts, and when its replayed replies
    were first computed. Unless it read its latency from the cache, a run that did not fail (`keep`) leaves the
    latency it reports there under run_key, for a later run that replays all of its calls."""
    replayed = [c for c in calls if c.cache_hit]
    first = min((c.first_computed_at for c in replayed if c.first_computed_at), default=None)
    key = run_key(call_keys) if call_keys else None
    entry = llm.cached_entry(key) if key and replayed and len(replayed) == len(calls) else None
    if entry is not None:
        return RunCosts(entry["latency_ms"], len(calls), len(replayed), first_computed(entry) or first)
    # a reply first computed during this run (a call it repeated) took its time inside wall_ms already
    earlier = [c for c in replayed if c.first_computed_at is None or c.first_computed_at < started]
    latency = wall_ms + sum(c.latency_ms or 0.0 for c in earlier)
    if keep and key:
        llm.remember(key, {"run": True, "estimated": bool(replayed)}, latency, started)
    return RunCosts(latency, len(calls), len(replayed), first)


def first_computed(entry: dict) -> datetime | None:
    """When a cache entry's reply was computed (entries keep it as ISO text, in UTC)."""
    stamp = entry.get("computed_at")
    if not stamp:
        return None
    when = datetime.fromisoformat(stamp)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def replayed_share(n_calls: int | None, n_replayed: int | None) -> float | None:
    """The share of calls replayed from the cache; None without calls."""
    return None if not n_calls else (n_replayed or 0) / n_calls


def replay_note(n_calls: int | None, n_replayed: int | None, first_computed_at: datetime | None) -> str | None:
    """What a run's figures say about the cache: None when no call was replayed."""
    if not n_calls or not n_replayed:
        return None
    when = f" (first computed at {first_computed_at:%Y-%m-%d %H:%M:%S} UTC)" if first_computed_at else ""
    if n_replayed >= n_calls:
        return f"replayed from the cache{when}"
    return f"{n_replayed} of {n_calls} model calls replayed from the cache{when}"


def share_text(share: float | None) -> str:
    """'40% replayed' beside a figure; '' when nothing was replayed or nothing counted."""
    return "" if not share else f"{share:.0%} replayed"
