"""Checks of Ollama, the configured models and the store, each with the fix for a problem."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.models.backends import OpenAIChat
from pipeline.models.ollama_models import normalise_model, pulled_models
from store import journal, kb
from store.db import Database


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


ALL_ROLES = ("generator", "claim", "verifier", "nli", "embed", "judge")
CHAT_ROLES = tuple(role for role in ALL_ROLES if role != "embed")


def model_roles(settings: Settings, roles: tuple[str, ...] = ALL_ROLES) -> dict[str, list[str]]:
    """model -> the roles it plays."""
    by_model: dict[str, list[str]] = {}
    for role in roles:
        by_model.setdefault(getattr(settings, f"{role}_model"), []).append(role)
    return by_model


def check_ollama(settings: Settings) -> list[Check]:
    """The model servers: Ollama for every model, or, with llm_backend = openai, the OpenAI-compatible
    server for the chat models and Ollama for the embedding model."""
    if settings.llm_backend == "openai":
        return check_openai(settings, model_roles(settings, CHAT_ROLES)) + _ollama_checks(
            settings, model_roles(settings, ("embed",))
        )
    return _ollama_checks(settings, model_roles(settings))


def _ollama_checks(settings: Settings, roles: dict[str, list[str]]) -> list[Check]:
    try:
        pulled = pulled_models(settings, fresh=True)
    except WorkbenchError as exc:
        return [Check("ollama", False, exc.message, exc.fix)]
    checks = [Check("ollama", True, f"reachable at {settings.ollama_host} ({len(pulled)} models pulled)")]
    for model, played in roles.items():
        name = f"model {model}"
        if normalise_model(model) in pulled:
            digest = pulled[normalise_model(model)]
            checks.append(Check(name, True, f"pulled ({', '.join(played)}; digest {digest[:12]})"))
        else:
            checks.append(Check(name, False, f"not pulled ({', '.join(played)})", f"`ollama pull {model}`"))
    return checks


def check_openai(settings: Settings, roles: dict[str, list[str]]) -> list[Check]:
    try:
        served = OpenAIChat(settings).served_models()
    except WorkbenchError as exc:
        return [Check("openai server", False, exc.message, exc.fix)]
    checks = [Check("openai server", True, f"reachable at {settings.openai_base_url} ({len(served)} models served)")]
    names = set(served) | {normalise_model(m) for m in served}
    revision = settings.model_revision or "not pinned: set WORKBENCH_MODEL_REVISION"
    for model, played in roles.items():
        name = f"model {model}"
        if model in names or normalise_model(model) in names:
            checks.append(Check(name, True, f"served ({', '.join(played)}; revision {revision})"))
        else:
            checks.append(
                Check(
                    name,
                    False,
                    f"not served at {settings.openai_base_url} ({', '.join(played)})",
                    "load it in the server, or set the model setting to one of: "
                    + (", ".join(sorted(served)) or "(none listed)"),
                )
            )
    return checks


def check_store(settings: Settings, db: Database) -> list[Check]:
    try:
        chunks = kb.count_chunks(db, settings.embed_model)
        documents = len(kb.list_documents(db))
    except WorkbenchError as exc:
        return [Check("store", False, exc.message, exc.fix)]
    if db.read_only:
        checks = [
            Check(
                "store",
                False,
                f"{settings.store_path} opens read-only ({db.read_only_reason}): runs can be browsed, "
                "new results wait in the journal",
                "make the file and its folder writable, or point WORKBENCH_DB at a writable file",
            )
        ]
    else:
        checks = [Check("store", True, f"{settings.store_path} opens, is migrated and is writable")]
    pending = len(journal.pending(settings.store_path))
    if pending:
        checks.append(
            Check(
                "journal",
                False,
                f"{pending} result(s) wait in the journal to be saved into the store",
                "they are saved the next time the store opens writable; fix the store check above",
            )
        )
    if chunks:
        checks.append(
            Check(
                "knowledge base", True, f"{documents} documents, {chunks} chunks embedded with {settings.embed_model}"
            )
        )
    else:
        detail = (
            f"{documents} documents, none embedded with {settings.embed_model}"
            if documents
            else "no documents ingested"
        )
        checks.append(Check("knowledge base", False, detail, "`python -m pipeline ingest data/kb`"))
    return checks


def check_all(settings: Settings, db: Database) -> list[Check]:
    return check_ollama(settings) + check_store(settings, db)
