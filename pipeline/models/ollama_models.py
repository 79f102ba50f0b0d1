"""The raw `ollama` client, used only to list pulled models and their digests (cached for a minute)."""

from __future__ import annotations

import threading
import time

import ollama

from pipeline.config import Settings
from pipeline.models.failures import ollama_guard

DIGEST_TTL_S = 60.0

_clients: dict[tuple, ollama.Client] = {}
_digests: dict[tuple, tuple[float, dict[str, str]]] = {}
_guard = threading.Lock()


def normalise_model(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


def ollama_client(settings: Settings) -> ollama.Client:
    """One client (one connection pool) per host and timeout, shared by LlamaIndex's Ollama objects."""
    key = (settings.ollama_host, settings.request_timeout_s)
    with _guard:
        if key not in _clients:
            _clients[key] = ollama.Client(host=settings.ollama_host, timeout=settings.request_timeout_s)
        return _clients[key]


def forget_digests() -> None:
    with _guard:
        _digests.clear()


def cached_models(settings: Settings) -> dict[str, str] | None:
    """The listing of settings.ollama_host read less than DIGEST_TTL_S ago, or None."""
    with _guard:
        cached = _digests.get((settings.ollama_host,))
    if cached and time.monotonic() - cached[0] < DIGEST_TTL_S:
        return cached[1]
    return None


def forget_host_models(host: str) -> None:
    with _guard:
        _digests.pop((host,), None)


def pulled_models(settings: Settings, fresh: bool = False) -> dict[str, str]:
    """name -> digest of every pulled model."""
    key = (settings.ollama_host,)
    cached = None if fresh else cached_models(settings)
    if cached is not None:
        return cached
    listing = ollama_guard(settings, "list models", "-", lambda: ollama_client(settings).list())
    models = {normalise_model(m.model): m.digest for m in listing.models}
    with _guard:
        _digests[key] = (time.monotonic(), models)
    return models
