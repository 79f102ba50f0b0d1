"""Checks of Ollama (each of its hosts), the configured models and the store, each with the fix for a problem."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.config import Settings
from pipeline.errors import WorkbenchError
from pipeline.models.backends import OpenAIChat
from pipeline.models.hosts import HostStatus, host_statuses, pinned_digests, why
from pipeline.models.ollama_models import normalise_model
from pipeline.text import plural
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


def ollama_roles(settings: Settings) -> dict[str, list[str]]:
    """The models Ollama serves: every one, or with llm_backend = openai the embedding model alone."""
    return model_roles(settings, ("embed",) if settings.llm_backend == "openai" else ALL_ROLES)


def check_ollama(settings: Settings, statuses: list[HostStatus] | None = None) -> list[Check]:
    """The model servers: Ollama for every model, or, with llm_backend = openai, the OpenAI-compatible
    server for the chat models and Ollama for the embedding model. `statuses`: the hosts as just listed
    by host_statuses (listed here when not given)."""
    ollama = _ollama_checks(settings, ollama_roles(settings), statuses)
    if settings.llm_backend == "openai":
        return check_openai(settings, model_roles(settings, CHAT_ROLES)) + ollama
    return ollama


# How long a page's health probe waits for a model server: a page is not held up by a host that does not answer
# (the settings' request timeout, minutes for a slow model call, is for the calls themselves).
PROBE_TIMEOUT_S = 2.0


def probing(settings: Settings) -> Settings:
    """The settings a page's probe of the model servers uses: each request waits at most PROBE_TIMEOUT_S."""
    return dataclasses.replace(settings, request_timeout_s=min(settings.request_timeout_s, PROBE_TIMEOUT_S))


def probe_model_servers(settings: Settings) -> list[Check]:
    """check_ollama, each request waiting at most PROBE_TIMEOUT_S: the health a page's sidebar shows."""
    return check_ollama(probing(settings))


def _ollama_checks(settings: Settings, roles: dict[str, list[str]], statuses: list[HostStatus] | None) -> list[Check]:
    statuses = statuses or host_statuses(settings, list(roles))
    if len(statuses) > 1:
        return _pool_checks(roles, statuses)
    status = statuses[0]
    if status.listing is None:
        exc = status.error
        if isinstance(exc, WorkbenchError):
            return [Check("ollama", False, exc.message, exc.fix)]
        return [Check("ollama", False, f"Ollama at {status.host} failed: {why(exc)}", "see `ollama serve` logs")]
    pulled = status.listing
    checks = [Check("ollama", True, f"reachable at {status.host} ({len(pulled)} models pulled)")]
    for model, played in roles.items():
        name = f"model {model}"
        if normalise_model(model) in pulled:
            digest = pulled[normalise_model(model)]
            checks.append(Check(name, True, f"pulled ({', '.join(played)}; digest {digest[:12]})"))
        else:
            checks.append(Check(name, False, f"not pulled ({', '.join(played)})", f"`ollama pull {model}`"))
    return checks


def _pool_checks(roles: dict[str, list[str]], statuses: list[HostStatus]) -> list[Check]:
    """Several hosts: Ollama is usable while one answers; a model while one reachable host serves its pin."""
    up = [s for s in statuses if s.listing is not None]
    if not up:
        return [
            Check(
                "ollama",
                False,
                f"Ollama is not reachable at any of its {len(statuses)} hosts: "
                + "; ".join(f"{s.host} ({s.detail})" for s in statuses),
                "start `ollama serve` on them, or set WORKBENCH_OLLAMA_HOSTS to hosts that run",
            )
        ]
    down = [s.host for s in statuses if s.listing is None]
    detail = f"reachable at {len(up)} of {len(statuses)} hosts ({', '.join(s.host for s in up)})"
    checks = [Check("ollama", True, detail + (f"; not reachable: {', '.join(down)}" if down else ""))]
    pins = pinned_digests({s.host: s.listing for s in up}, list(roles))
    for model, played in roles.items():
        pin = pins.get(normalise_model(model))
        if pin is None:
            checks.append(
                Check(
                    f"model {model}",
                    False,
                    f"not pulled on any reachable host ({', '.join(played)})",
                    f"`ollama pull {model}` on each host",
                )
            )
            continue
        serving = sum(s.listing.get(normalise_model(model)) == pin for s in up)
        checks.append(
            Check(
                f"model {model}",
                True,
                f"pulled ({', '.join(played)}; digest {pin[:12]}; served at it by {serving} of {len(statuses)} hosts)",
            )
        )
    return checks


def check_hosts(statuses: list[HostStatus]) -> list[Check]:
    """With several hosts, one check per host: reachable, and serving every model at its pinned digest."""
    if len(statuses) < 2:
        return []
    checks = []
    for s in statuses:
        name = f"host {s.host}"
        later = f"; backed off until {s.backed_off_until}" if s.backed_off_until else ""
        if s.listing is None:
            fix = "start `ollama serve` there, or remove it from WORKBENCH_OLLAMA_HOSTS"
            checks.append(Check(name, False, f"not reachable: {s.detail}{later}", fix))
        elif s.unusable:
            unused = "; ".join(f"{model}: {reason}" for model, reason in sorted(s.unusable.items()))
            fix = "pull the same version of each model on every host (`ollama pull MODEL` on each) so the digests agree"
            checks.append(Check(name, False, f"reachable, not used for {unused}{later}", fix))
        else:
            checks.append(Check(name, True, f"reachable, serves every model at its pinned digest{later}"))
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


UNREADABLE_FIX = "a newer workbench may read them; delete them once nothing in them is needed"


def unreadable_entries(store_path: str) -> str:
    """What the journal set aside as unreadable (*.bad) and where, or "" when nothing was."""
    bad = journal.unreadable(store_path)
    if not bad:
        return ""
    folders = ", ".join(dict.fromkeys(str(p.parent) for p in bad))
    entries = "1 journal entry" if len(bad) == 1 else f"{len(bad)} journal entries"
    return f"{entries} could not be read and were set aside as *.bad in {folders}"


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
                f"{plural(pending, 'result')} wait in the journal to be saved into the store",
                "they are saved the next time the store opens writable; fix the store check above",
            )
        )
    bad = unreadable_entries(settings.store_path)
    if bad:
        checks.append(Check("journal entries", False, bad, "open them to see what they hold; " + UNREADABLE_FIX))
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
