"""Settings: defaults, overridden by an optional workbench.toml, overridden by environment variables.

Environment variables are WORKBENCH_<FIELD> (upper case), except the Ollama host, which is read
from OLLAMA_HOST like Ollama's own tools do, and the store path, WORKBENCH_DB. Several Ollama hosts
(WORKBENCH_OLLAMA_HOSTS, comma-separated) replace the one OLLAMA_HOST when set.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from pipeline.errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_hosts: str = ""  # comma-separated; empty: ollama_host alone
    ollama_slots_per_host: int = 4
    ollama_host_backoff_s: float = 5.0
    generator_model: str = "llama3.2"
    claim_model: str = "llama3.2"
    verifier_model: str = "bespoke-minicheck"
    nli_model: str = "llama3.2"
    embed_model: str = "nomic-embed-text"
    judge_model: str = "llama3.2"
    embed_query_prefix: str = "search_query:"
    embed_document_prefix: str = "search_document:"
    top_k: int = 5
    chunk_size: int = 512
    chunk_overlap: int = 64
    faithfulness_threshold: float = 0.8
    max_retries: int = 2
    abstain_below: float = 0.5
    when_unverified: str = "abstain"
    verify_concurrency: int = 4
    precheck_enabled: bool = True
    precheck_novel_share: float = 0.75
    precheck_novel_words: int = 8
    verify_scope: str = "chunk"
    verifier_chain: str = "precheck,minicheck_chunk"
    max_question_chars: int = 2000
    temperature: float = 0.0
    seed: int = 42
    request_timeout_s: float = 120.0
    context_window: int = 8192
    llm_backend: str = "ollama"
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    openai_api_key: str = "none"
    model_revision: str = ""
    log_call_text: bool = True
    otlp_endpoint: str = ""
    llm_retries: int = 2
    llm_backoff_s: float = 0.5
    eval_concurrency: int = 4
    diagnosis_low: float = 0.6
    diagnosis_high: float = 0.75
    judge_corrections_k: int = 3
    floors: str = "faithfulness=0.70,context_recall=0.75"
    min_effect: float = 0.05
    cache_enabled: bool = True
    price_per_1k_prompt_tokens: float = 0.0  # 0 (both): no cost estimate
    price_per_1k_completion_tokens: float = 0.0
    store_path: str = str(PROJECT_ROOT / "data" / "workbench.duckdb")
    store_lock_timeout_s: float = 15.0
    store_idle_release_s: float = 0.5
    store_save_wait_s: float = 3.0
    store_read_only: bool = False  # browse a snapshot or a Parquet export's browse.duckdb; nothing is written
    ingest_file_timeout_s: float = 60.0
    on_topic_check: bool = True
    on_topic_accept: float = 0.25  # measured by python -m bench on_topic on the fake's embeddings
    on_topic_reject: float = 0.14
    off_topic_final: str = "mark"
    kb_path: str = str(PROJECT_ROOT / "data" / "kb")

    def model_hosts(self) -> list[str]:
        """The Ollama hosts calls are spread over: ollama_hosts, or else ollama_host alone."""
        return [h.strip() for h in self.ollama_hosts.split(",") if h.strip()] or [self.ollama_host]

    def public_items(self) -> list[tuple[str, str, str]]:
        """(name, value, where it is set) for display."""
        return [(f.name, _shown(f.name, getattr(self, f.name)), env_name(f.name)) for f in fields(self)]


SECRET_SETTINGS = frozenset({"openai_api_key"})
SECRET_SUFFIXES = ("_key", "_token", "_secret", "_password")


def is_secret(name: str) -> bool:
    return name in SECRET_SETTINGS or name.endswith(SECRET_SUFFIXES)


def _shown(name: str, value) -> str:
    if is_secret(name):
        return "(not set)" if value in ("", "none") else "•••••••• (set, hidden)"
    return str(value)


ENV_OVERRIDES = {"ollama_host": "OLLAMA_HOST", "store_path": "WORKBENCH_DB"}


def env_name(name: str) -> str:
    return ENV_OVERRIDES.get(name, f"WORKBENCH_{name.upper()}")


def normalise_host(host: str) -> str:
    """Accept what OLLAMA_HOST accepts: '0.0.0.0', 'host:port', 'http://host:port'."""
    host = host.strip().rstrip("/")
    if "://" not in host:
        host = "http://" + host
    scheme, rest = host.split("://", 1)
    if ":" not in rest.split("/")[0]:
        rest = rest + ":11434"
    if rest.startswith("0.0.0.0"):
        rest = "127.0.0.1" + rest[len("0.0.0.0") :]
    return f"{scheme}://{rest}"


def _coerce(name: str, raw, kind):
    if kind is str and isinstance(raw, list):  # ollama_hosts = ["a:11434", "b:11434"] in workbench.toml
        return ",".join(str(item) for item in raw)
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        return kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"setting {name} = {raw!r} is not a valid {kind.__name__}",
            fix=f"set {env_name(name)} (or {name} in workbench.toml) to a {kind.__name__}",
        ) from None


def _read_toml(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", fix=f"correct or remove {path}") from None
    unknown = set(data) - {f.name for f in fields(Settings)}
    if unknown:
        raise ConfigError(
            f"{path} has unknown settings: {', '.join(sorted(unknown))}", fix="remove them; README lists every setting"
        )
    return data


def _validate(s: Settings) -> Settings:
    checks = [
        (s.top_k >= 1, "top_k", "at least 1"),
        (s.chunk_size >= 32, "chunk_size", "at least 32"),
        (0 <= s.chunk_overlap < s.chunk_size, "chunk_overlap", "between 0 and chunk_size - 1"),
        (0.0 <= s.faithfulness_threshold <= 1.0, "faithfulness_threshold", "between 0 and 1"),
        (0.0 <= s.abstain_below <= 1.0, "abstain_below", "between 0 and 1"),
        (s.when_unverified in ("abstain", "show_best"), "when_unverified", "abstain or show_best"),
        (0.0 < s.precheck_novel_share <= 1.0, "precheck_novel_share", "above 0 and at most 1"),
        (s.precheck_novel_words >= 1, "precheck_novel_words", "at least 1"),
        (s.max_retries >= 0, "max_retries", "0 or more"),
        (s.verify_concurrency >= 1, "verify_concurrency", "at least 1"),
        (s.request_timeout_s > 0, "request_timeout_s", "above 0"),
        (s.max_question_chars >= 10, "max_question_chars", "at least 10"),
        (s.verify_scope in ("chunk", "context"), "verify_scope", "'chunk' or 'context'"),
        (
            any(n.strip() for n in s.verifier_chain.split(",")),
            "verifier_chain",
            "naming registered verifiers, e.g. precheck,minicheck_chunk",
        ),
        (s.context_window >= 256, "context_window", "of at least 256 tokens"),
        (s.llm_backend in ("ollama", "openai"), "llm_backend", "'ollama' or 'openai'"),
        (s.ollama_slots_per_host >= 1, "ollama_slots_per_host", "of at least 1"),
        (s.ollama_host_backoff_s > 0, "ollama_host_backoff_s", "above 0"),
        (s.price_per_1k_prompt_tokens >= 0, "price_per_1k_prompt_tokens", "of 0 or more"),
        (s.price_per_1k_completion_tokens >= 0, "price_per_1k_completion_tokens", "of 0 or more"),
        (-1.0 <= s.on_topic_reject <= s.on_topic_accept, "on_topic_reject", "between -1 and on_topic_accept"),
        (s.on_topic_accept <= 1.0, "on_topic_accept", "at most 1 (and at least on_topic_reject)"),
        (s.off_topic_final in ("mark", "abstain"), "off_topic_final", "'mark' or 'abstain'"),
    ]
    for ok, name, rule in checks:
        if not ok:
            raise ConfigError(
                f"setting {name} = {getattr(s, name)!r} is out of range", fix=f"set {env_name(name)} to a value {rule}"
            )
    return s


def config_path(env: Mapping[str, str], toml_path: Path | None = None) -> Path:
    return toml_path or Path(env.get("WORKBENCH_CONFIG", "workbench.toml"))


def _raw_values(env: Mapping[str, str], toml_path: Path) -> dict[str, tuple[object, str]]:
    """{name: (raw value, source)} of every setting that is not left at its default; an environment variable
    wins over the file."""
    from_file = _read_toml(toml_path)
    raw: dict[str, tuple[object, str]] = {}
    for f in fields(Settings):
        if env.get(env_name(f.name)) not in (None, ""):
            raw[f.name] = (env[env_name(f.name)], f"environment ({env_name(f.name)})")
        elif f.name in from_file:
            raw[f.name] = (from_file[f.name], str(toml_path))
    return raw


def setting_sources(
    settings: Settings, environ: Mapping[str, str] | None = None, toml_path: Path | None = None
) -> list[dict]:
    """Every setting: its value (secrets masked), where it came from (default, the TOML file, or the
    environment variable) and the environment variable that sets it."""
    env = os.environ if environ is None else environ
    raw = _raw_values(env, config_path(env, toml_path))
    return [
        {
            "setting": f.name,
            "value": _shown(f.name, getattr(settings, f.name)),
            "source": raw[f.name][1] if f.name in raw else "default",
            "environment variable": env_name(f.name),
        }
        for f in fields(settings)
    ]


def load_settings(environ: dict | None = None, toml_path: Path | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values = {
        name: _coerce(name, value, type(Settings.__dataclass_fields__[name].default))
        for name, (value, _source) in _raw_values(env, config_path(env, toml_path)).items()
    }
    settings = dataclasses.replace(Settings(), **values)
    hosts = ",".join(dict.fromkeys(normalise_host(h) for h in settings.ollama_hosts.split(",") if h.strip()))
    return _validate(
        dataclasses.replace(settings, ollama_host=normalise_host(settings.ollama_host), ollama_hosts=hosts)
    )
