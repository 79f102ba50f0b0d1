"""Checks of Ollama, the configured models and the store, each with the fix for a problem."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.models.llm import LLM, normalise_model
from store import kb
from store.db import Database


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def model_roles(settings: Settings) -> dict[str, list[str]]:
    """model -> the roles it plays."""
    roles: dict[str, list[str]] = {}
    for role in ("generator", "claim", "verifier", "nli", "embed", "judge"):
        roles.setdefault(getattr(settings, f"{role}_model"), []).append(role)
    return roles


def check_ollama(settings: Settings) -> list[Check]:
    llm = LLM(settings, None, origin="health")
    try:
        pulled = llm.pulled_models(fresh=True)
    except WorkbenchError as exc:
        return [Check("ollama", False, exc.message, exc.fix)]
    checks = [Check("ollama", True, f"reachable at {settings.ollama_host} ({len(pulled)} models pulled)")]
    for model, roles in model_roles(settings).items():
        name = f"model {model}"
        if normalise_model(model) in pulled:
            digest = pulled[normalise_model(model)]
            checks.append(Check(name, True, f"pulled ({', '.join(roles)}; digest {digest[:12]})"))
        else:
            checks.append(Check(name, False, f"not pulled ({', '.join(roles)})", f"`ollama pull {model}`"))
    return checks


def check_store(settings: Settings, db: Database) -> list[Check]:
    try:
        chunks = kb.count_chunks(db, settings.embed_model)
        documents = len(kb.list_documents(db))
    except WorkbenchError as exc:
        return [Check("store", False, exc.message, exc.fix)]
    checks = [Check("store", True, f"{settings.store_path} opens and is migrated")]
    if chunks:
        checks.append(Check("knowledge base", True, f"{documents} documents, {chunks} chunks embedded with "
                                                     f"{settings.embed_model}"))
    else:
        detail = (f"{documents} documents, none embedded with {settings.embed_model}" if documents
                  else "no documents ingested")
        checks.append(Check("knowledge base", False, detail, "`python -m pipeline ingest data/kb`"))
    return checks


def check_all(settings: Settings, db: Database) -> list[Check]:
    return check_ollama(settings) + check_store(settings, db)
