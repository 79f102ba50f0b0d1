"""How many requests at once an Ollama host serves for a model (its OLLAMA_NUM_PARALLEL), and so the schedule a
question's calls follow (issue 30): overlapped where there are slots to spare, sequential where there is one."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import ollama

from pipeline.config import Settings
from pipeline.models.ollama_models import normalise_model

GPU_SLOTS, CPU_SLOTS = 4, 1  # what Ollama chooses when OLLAMA_NUM_PARALLEL is not set
KEPT_S = 60.0  # how long a host's answer is trusted: a model loads, unloads or moves between GPU and CPU
PS_TIMEOUT_S = 2.0

_lock = threading.Lock()
_seen: dict[tuple[str, str], tuple[float, Slots]] = {}


@dataclass(frozen=True)
class Slots:
    count: int
    why: str  # where the count comes from, in the user's words


def host_slots(settings: Settings, host: str, model: str) -> Slots:
    """The slots `host` serves `model` with: the host's ollama_host_slots entry, else ollama_slots_per_host when it
    is set, else what Ollama does by default on that host's machine, read from its loaded models (kept KEPT_S)."""
    entry = settings.host_slots_entry(host)
    if entry is not None:
        return Slots(entry, "set by ollama_host_slots")
    if settings.ollama_slots_per_host > 0:
        return Slots(settings.ollama_slots_per_host, "set by ollama_slots_per_host")
    key = (host, normalise_model(model))
    now = time.monotonic()
    with _lock:
        kept = _seen.get(key)
    if kept and now - kept[0] < KEPT_S:
        return kept[1]
    slots = _detected(host, key[1])
    with _lock:
        _seen[key] = (now, slots)
    return slots


def _detected(host: str, model: str) -> Slots:
    try:
        loaded = ollama.Client(host=host, timeout=PS_TIMEOUT_S).ps().models
    except Exception as exc:  # noqa: BLE001 - an unreachable host is reported by the health checks
        return Slots(CPU_SLOTS, f"assumed: the host's loaded models could not be read ({type(exc).__name__})")
    entry = next((m for m in loaded if normalise_model(m.model or m.name or "") == model), None)
    if entry is not None:
        if (entry.size_vram or 0) > 0:
            return Slots(GPU_SLOTS, f"Ollama's default: {model} runs on a GPU")
        return Slots(CPU_SLOTS, f"Ollama's default: {model} runs on the CPU")
    if any((m.size_vram or 0) > 0 for m in loaded):
        return Slots(GPU_SLOTS, f"Ollama's default on a host with a GPU ({model} not loaded yet)")
    return Slots(CPU_SLOTS, f"assumed until {model} is loaded: no model on a GPU")


def forget() -> None:
    """Read every host again at the next question (tests; a changed setting)."""
    with _lock:
        _seen.clear()


def schedule(settings: Settings) -> tuple[str, str]:
    """(the schedule, why): answer_schedule, or with auto sequential where the generator's first host has one
    slot, else overlapped."""
    if settings.answer_schedule != "auto":
        return settings.answer_schedule, "set by answer_schedule"
    if settings.llm_backend != "ollama":
        return "overlapped", "an OpenAI-compatible server serves requests in parallel"
    slots = host_slots(settings, settings.model_hosts()[0], settings.generator_model)
    kind = "sequential" if slots.count <= 1 else "overlapped"
    return kind, f"{slots.count} slot{'s' if slots.count != 1 else ''} for {settings.generator_model} ({slots.why})"
