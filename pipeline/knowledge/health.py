"""The workbench's health: the model layer's checks (Ollama, each of its hosts, the configured models and the
store: pipeline/models/health.py) and the embedding model's similarity scale over the knowledge base, each with
the fix for a problem."""

from __future__ import annotations

from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.knowledge import similarity_scale
from pipeline.models.health import Check, check_hosts, check_ollama, check_store, ollama_roles, probing
from pipeline.models.hosts import HostStatus, host_statuses
from store import kb
from store.db import Database


def check_similarity_scale(settings: Settings, db: Database) -> list[Check]:
    """The embedding model's similarity scale over the knowledge base (measured now when it is not stored yet:
    one embedding call); nothing to check without chunks (the knowledge-base check says so)."""
    try:
        chunks = kb.count_chunks(db, settings.embed_model)
    except WorkbenchError:
        return []
    if not chunks:
        return []
    scale = similarity_scale.current(settings, db, origin="health")
    name = "similarity scale"
    if scale.measured:
        return [Check(name, True, scale.describe() + "; " + similarity_scale.floor_text(settings, scale))]
    if chunks * len(similarity_scale.PROBES) < similarity_scale.MIN_PAIRS:  # nothing to fix but ingesting more
        return [Check(name, True, scale.describe())]
    return [Check(name, False, scale.describe(), "check the embedding model above, then check again")]


def health(settings: Settings, db: Database, probe: bool = False) -> tuple[list[Check], list[HostStatus]]:
    """Every check, and each Ollama host's status (reachability, models, load, latency, backoff). probe: the model
    servers are asked with a page's short timeout (a page is not held up for a model call's timeout by a host
    that does not answer); the similarity scale's one embedding call, if it is made, keeps the settings' own."""
    servers = probing(settings) if probe else settings
    statuses = host_statuses(servers, list(ollama_roles(settings)))
    checks = check_ollama(servers, statuses) + check_hosts(statuses) + check_store(settings, db)
    return checks + check_similarity_scale(settings, db), statuses


def check_all(settings: Settings, db: Database) -> list[Check]:
    return health(settings, db)[0]
