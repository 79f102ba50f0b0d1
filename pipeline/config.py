"""Settings: defaults, overridden by an optional workbench.toml, overridden by environment variables.

Environment variables are WORKBENCH_<FIELD> (upper case), except the Ollama host, which is read
from OLLAMA_HOST like Ollama's own tools do, and the store path, WORKBENCH_DB. Several Ollama hosts
(WORKBENCH_OLLAMA_HOSTS, comma-separated) replace the one OLLAMA_HOST when set.

Each setting is declared once, below, with `setting(default, group, doc, ...)`: its type (its default's), its
group, a one-line doc, whether it is essential, and its valid values. The validation, the Settings page and
docs/reference/settings.md (`python -m pipeline.settings_reference`) are derived from these declarations.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit

from pipeline.errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# key: title, in the order the Settings page and the reference show them.
GROUPS = {
    "models": "Models and hosts",
    "answering": "Answering",
    "verification": "Verification",
    "evaluation": "Evaluation",
    "store": "Store",
    "collect": "Traces in",
    "advanced": "Advanced thresholds",
}


@dataclass(frozen=True)
class _Spec:
    group: str
    doc: str
    essential: bool
    choices: tuple | None
    minimum: float | None
    maximum: float | None
    above: float | None
    check: Callable[[object], bool] | None
    rule: str | None
    empty: str | None = None
    restart: bool = False


def setting(
    default,
    group: str,
    doc: str,
    *,
    essential: bool = False,
    choices: tuple | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    check: Callable[[object], bool] | None = None,
    rule: str | None = None,
    empty: str | None = None,
    restart: bool = False,
):
    """A field of Settings: `default` (its type is the setting's), the group it is shown in (a key of GROUPS), a
    one-line doc, and its valid values: `choices`, or `minimum`/`maximum` (inclusive) and `above` (exclusive), or
    a `check` with the `rule` it enforces. `rule` replaces the wording derived from the bounds. `empty`, for a text
    setting whose default is not empty: what an empty value means; its environment variable set empty then sets it
    empty (without `empty`, an empty environment variable leaves a setting at its default). `restart`: the setting
    is read once, when the app (or `collect`) starts, so a change written to the settings file waits for a restart;
    every other setting is read again for each run and page, and a change applies at once."""
    if group not in GROUPS:
        raise ValueError(f"setting group {group!r} is not one of {', '.join(GROUPS)}")
    if not doc.strip():
        raise ValueError("every setting needs a one-line doc")
    if check is not None and not rule:
        raise ValueError("a setting's check needs the rule it enforces, in words")
    if empty is not None and not isinstance(default, str):
        raise ValueError("only a text setting can be set empty")
    spec = _Spec(group, doc, essential, choices, minimum, maximum, above, check, rule, empty, restart)
    return dataclasses.field(default=default, metadata={"setting": spec})


def _names_something(text: str) -> bool:
    return any(name.strip() for name in text.split(","))


# The registered verifiers' names, supplied by pipeline/verification/registry.py when it is imported (the registry
# reads the settings' declarations, so the settings cannot import it: layers point down, lazy imports included).
registered_verifiers: Callable[[], Collection[str]] | None = None


def _names_registered_verifiers(text: str) -> bool:
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = registered_verifiers() if registered_verifiers is not None else None
    return bool(names) and (known is None or all(name in known for name in names))


def _is_floor_list(text: str) -> bool:
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sign, value = part.partition("=")
        try:
            float(value)
        except ValueError:
            return False
        if not (sign and name.strip()):
            return False
    return True


def _slot_pairs(text: str) -> list[tuple[str, str]]:
    """ollama_host_slots as (host, count) text pairs; a part without "=" has an empty host."""
    parts = (part.rpartition("=") for part in text.split(",") if part.strip())
    return [(host.strip(), value.strip()) for host, _, value in parts]


def _is_slot_list(text: str) -> bool:
    return all(host and value.isdigit() and int(value) >= 1 for host, value in _slot_pairs(text))


@dataclass(frozen=True)
class Settings:
    # Models and hosts
    ollama_host: str = setting(
        "http://127.0.0.1:11434",
        "models",
        "where Ollama listens (read like Ollama's own tools read it)",
        essential=True,
        rule="host, host:port or http://host:port, as OLLAMA_HOST takes it",
    )
    generator_model: str = setting(
        "llama3.2", "models", "writes answers, grades context, rewrites queries", essential=True
    )
    verifier_model: str = setting(
        "bespoke-minicheck",
        "models",
        "the minicheck_* verifiers: checks a claim against a chunk or the whole context (Yes/No)",
        essential=True,
    )
    embed_model: str = setting(
        "nomic-embed-text", "models", "embeddings (changing it re-embeds on the next ingest)", essential=True
    )
    judge_model: str = setting("llama3.2", "models", "the evaluation judge", essential=True)
    claim_model: str = setting("llama3.2", "models", "extracts claims from an answer")
    nli_model: str = setting(
        "llama3.2", "models", "decides contradicted vs unsupported for rejected claims; the llm verifier asks it Yes/No"
    )
    ollama_hosts: str = setting(
        "",
        "models",
        "several Ollama hosts, comma-separated (or a TOML list); a call goes to the host with the most free slots "
        "serving the model at its pinned digest, and fails over; empty: ollama_host alone",
        rule="comma-separated hosts (a TOML list in workbench.toml), or empty",
    )
    ollama_slots_per_host: int = setting(
        0,
        "models",
        "parallel requests each host serves per model (its OLLAMA_NUM_PARALLEL); 0: what Ollama chooses by default, "
        "read from the host: 4 where the generator runs on a GPU, 1 where it runs on the CPU or is not loaded yet",
        minimum=0,
    )
    ollama_host_slots: str = setting(
        "",
        "models",
        "where hosts differ: host=slots pairs, comma-separated (gpu1:11434=4, laptop:11434=1); a host not named "
        "has ollama_slots_per_host",
        check=_is_slot_list,
        rule="host=N pairs, comma-separated, each N 1 or more",
    )
    ollama_host_backoff_s: float = setting(
        5.0, "models", "how long a failed host is skipped, doubled for each failure in a row (at most 300 s)", above=0
    )
    embed_query_prefix: str = setting("search_query:", "models", "the embedding model's task prefix for questions")
    embed_document_prefix: str = setting("search_document:", "models", "the embedding model's task prefix for chunks")
    llm_backend: str = setting(
        "ollama",
        "models",
        "where chat and structured calls go: Ollama, or an OpenAI-compatible server (embeddings stay on Ollama)",
        choices=("ollama", "openai"),
    )
    openai_base_url: str = setting(
        "http://127.0.0.1:8000/v1", "models", "the OpenAI-compatible server, with llm_backend = openai"
    )
    openai_api_key: str = setting("none", "models", "the OpenAI-compatible server's API key (never shown)")
    model_revision: str = setting(
        "", "models", "with llm_backend = openai: the served models' revision; model@revision stands in for the digest"
    )
    temperature: float = setting(0.0, "models", "sampling temperature sent with every model call", minimum=0)
    seed: int = setting(42, "models", "sampling seed sent with every model call")
    request_timeout_s: float = setting(120.0, "models", "seconds one model call may take", above=0)
    context_window: int = setting(
        8192, "models", "tokens of context sent as num_ctx with every Ollama call", minimum=256
    )
    llm_retries: int = setting(
        2, "models", "retries with exponential backoff on transient model-server errors", minimum=0
    )
    llm_backoff_s: float = setting(
        0.5, "models", "the first retry's wait in seconds, doubled for each further retry", minimum=0
    )
    otlp_endpoint: str = setting(
        "",
        "models",
        "send every run's trace to an OpenTelemetry collector at this base URL; empty: off",
        restart=True,
    )
    # Answering
    top_k: int = setting(5, "answering", "chunks retrieved per question", minimum=1)
    chunk_size: int = setting(512, "answering", "tokens per chunk for the sentence splitter", minimum=32)
    chunk_overlap: int = setting(64, "answering", "tokens two neighbouring chunks share", minimum=0)
    answer_schedule: str = setting(
        "auto",
        "answering",
        "how a question's calls are ordered: overlapped (the context grade runs alongside the first answer, which "
        "reads every retrieved chunk), sequential (grade first from the short view, then generate from the chunks "
        "it kept), or auto: sequential where the generator's host has one slot",
        choices=("auto", "overlapped", "sequential"),
    )
    context_budget_tokens: int = setting(
        600,
        "answering",
        "tokens of passage text the generator reads: the chunks graded relevant, each cut to the window around "
        "its sentences closest to the question; 0: whole chunks",
        minimum=0,
    )
    max_retries: int = setting(
        2,
        "answering",
        "regenerations with the stricter prompt when an attempt is not accepted; 0: no repair at all (see repair)",
        minimum=0,
    )
    repair: str = setting(
        "auto",
        "answering",
        "how an answer below the faithfulness threshold is repaired: regenerate (with the stricter prompt that names "
        "its failed claims), drop (without a model call: remove the sentences whose every claim failed, when every "
        "failed claim lies in such a sentence and a supported claim is left; else regenerate), or auto: drop on the "
        "sequential schedule, regenerate on the overlapped one; nothing is repaired when max_retries is 0",
        choices=("auto", "regenerate", "drop"),
    )
    when_unverified: str = setting(
        "abstain",
        "answering",
        "what a run shows when its best attempt is below abstain_below: an abstention, or the best attempt flagged",
        choices=("abstain", "show_best"),
    )
    abstain_below: float = setting(
        0.5,
        "answering",
        "with when_unverified = abstain: abstain when the best attempt's faithfulness is below this",
        minimum=0,
        maximum=1,
    )
    on_topic_check: bool = setting(
        True, "answering", "check that each attempt addresses the question; an off-target one is regenerated"
    )
    off_topic_final: str = setting(
        "mark",
        "answering",
        "when no attempt addresses the question: show the best one marked (status off_topic), or abstain",
        choices=("mark", "abstain"),
    )
    conversation_history_tokens: int = setting(
        1000,
        "answering",
        "tokens of earlier turns (questions and answers) a follow-up is read with, to rewrite it into a standalone "
        "question and to resolve what it refers to; the oldest turns are dropped first; 0: no history",
        minimum=0,
    )
    max_question_chars: int = setting(2000, "answering", "longer questions are refused with a message", minimum=10)
    ingest_file_timeout_s: float = setting(
        60.0, "answering", "the longest splitting one file into chunks may take before the file is skipped", above=0
    )
    # Verification
    faithfulness_threshold: float = setting(
        0.8,
        "verification",
        "accept an attempt at or above this share of supported claims",
        essential=True,
        minimum=0,
        maximum=1,
    )
    verifier_chain: str = setting(
        "precheck,minicheck_chunk",
        "verification",
        "the verifiers each claim goes through in order; the first that decides wins "
        "(registered: precheck, minicheck_chunk, minicheck_context, llm)",
        check=_names_registered_verifiers,
        rule="naming registered verifiers, e.g. precheck,minicheck_chunk",
    )
    verify_scope: str = setting(
        "chunk",
        "verification",
        "chunk: check a claim against each chunk, so the supporting chunk is the evidence; context: one call with "
        "all chunks (swaps minicheck_chunk for minicheck_context in the chain)",
        choices=("chunk", "context"),
    )
    claim_granularity: str = setting(
        "auto",
        "verification",
        "what is verified: auto (each answer sentence as one claim, and only a sentence that fails split into atomic "
        "claims that are verified again), sentence (each sentence as one claim, never split) or atomic (every "
        "sentence split into atomic claims); faithfulness is the share of the claims checked, so runs at different "
        "granularities are never compared as baselines",
        choices=("auto", "sentence", "atomic"),
    )
    precheck_enabled: bool = setting(
        True,
        "verification",
        "the deterministic grounding pre-check before any model call (false drops precheck from the chain)",
    )
    verify_concurrency: int = setting(4, "verification", "claims verified at once", minimum=1)
    # Evaluation
    eval_concurrency: int = setting(4, "evaluation", "items evaluated at once", minimum=1)
    judge_corrections_k: int = setting(
        3, "evaluation", "corrections the judge's prompt carries per criterion (0: none)", minimum=0
    )
    judge_repeats: int = setting(
        1,
        "evaluation",
        "times an evaluation's judge scores each item per criterion; the score is the mean of the valid repeats, "
        "and repeats after the first bypass the response cache, each with its own seed (seed + repeat - 1)",
        minimum=1,
        maximum=20,
    )
    judge_repeat_temperature: float = setting(
        0.7,
        "evaluation",
        "sampling temperature of a judge's repeats after the first (judge_repeats > 1; the first is asked as a "
        "single judging is): at the models' temperature (0 by default) a server answers the same prompt alike, so "
        "repeats would measure its determinism, not the judge's spread; judge alignment uses repeats when set",
        minimum=0,
        maximum=2,
    )
    floors: str = setting(
        "faithfulness=0.70,context_recall=0.75",
        "evaluation",
        "per-metric floors: a run's mean below one is shown as below floor (apart from regressions; gate exits 3)",
        check=_is_floor_list,
        rule="of comma-separated metric=number pairs, e.g. faithfulness=0.70",
        empty="no floors",
    )
    min_effect: float = setting(
        0.05,
        "evaluation",
        "the smallest estimated drop worth a regression alert (0-1 metrics; x4 for judge scores)",
        minimum=0,
    )
    primary_metrics: str = setting(
        "faithfulness",
        "evaluation",
        "the regression check's primary endpoints: metrics whose whole-run drop is tested first, with 80% of alpha",
        check=lambda text: not text.strip() or all(name.strip() for name in text.split(",")),
        rule="of comma-separated registered metric names, e.g. faithfulness,judge_correctness",
        empty="no primary endpoints (every test shares 90% of alpha, 80% of that to the whole-run tests)",
    )
    price_per_1k_prompt_tokens: float = setting(
        0.0,
        "evaluation",
        "cost estimate per 1000 prompt tokens sent to the model (cache hits are free); 0: no estimate",
        minimum=0,
    )
    price_per_1k_completion_tokens: float = setting(
        0.0, "evaluation", "cost estimate per 1000 completion tokens; 0 (both prices): no estimate", minimum=0
    )
    # Store
    store_path: str = setting(
        str(PROJECT_ROOT / "data" / "workbench.duckdb"),
        "store",
        "the DuckDB store: runs, evaluations, chunks, cache",
        essential=True,
        restart=True,
    )
    kb_path: str = setting(str(PROJECT_ROOT / "data" / "kb"), "store", "the knowledge base folder ingested by default")
    store_read_only: bool = setting(
        False,
        "store",
        "open the store read-only (browse a snapshot or a Parquet export's browse.duckdb); nothing is written",
        restart=True,
    )
    cache_enabled: bool = setting(
        True, "store", "response cache keyed on model digest + prompt + options, kept in the store"
    )
    cache_read: bool = setting(
        True,
        "store",
        "read the response cache; false (`--fresh`, the Fresh run checkbox): every call reaches the model, and its "
        "reply refills the cache",
    )
    log_call_text: bool = setting(
        True, "store", "keep every model call's prompt and completion text; false keeps only hashes, tokens and timings"
    )
    store_lock_timeout_s: float = setting(
        15.0, "store", "how long to wait for another process holding the store", minimum=0, restart=True
    )
    store_idle_release_s: float = setting(
        10.0,
        "store",
        "the store file is released after this much idle time (at once when another of the workbench's processes "
        "waits)",
        minimum=0,
        restart=True,
    )
    store_save_wait_s: float = setting(
        3.0,
        "store",
        "how long a final save waits for a locked store before keeping the result in the journal",
        minimum=0,
    )
    # Traces in (collect)
    collect_host: str = setting(
        "127.0.0.1",
        "collect",
        "the address `collect` listens on for OTLP traces (127.0.0.1: this machine only)",
        restart=True,
    )
    collect_port: int = setting(
        4318, "collect", "the port `collect` listens on (OTLP over HTTP)", minimum=1, maximum=65535, restart=True
    )
    collect_max_body_mb: float = setting(
        16.0, "collect", "the largest trace request `collect` accepts, in MB (larger: 413)", above=0, restart=True
    )
    collect_sample_rate: float = setting(
        1.0,
        "collect",
        "the share of received question-and-answer traces the online worker verifies (chosen by trace id, so a "
        "restart chooses the same); 1: all",
        minimum=0,
        maximum=1,
        restart=True,
    )
    collect_metrics: str = setting(
        "",
        "collect",
        "metrics the online worker also scores on each verified trace, comma-separated registry names such as "
        "judge_faithfulness,judge_topicality; empty: claims and verdicts only",
        restart=True,
    )
    collect_mapping: str = setting(
        "",
        "collect",
        "a TOML file naming, per service, the span attributes (or JSON paths in them) of the question, the answer "
        "and the documents, for an in-house instrumentation (docs/traces-in.md); checked when collect starts; "
        "empty: none",
        restart=True,
    )
    # Advanced thresholds
    precheck_novel_share: float = setting(
        0.75,
        "advanced",
        "the pre-check marks a claim unsupported when this share of its content words occur in no source",
        above=0,
        maximum=1,
    )
    precheck_novel_words: int = setting(
        8,
        "advanced",
        "the pre-check's fewest content words found in no source for that (with precheck_novel_share)",
        minimum=1,
    )
    on_topic_accept: float = setting(
        0.25,
        "advanced",
        "question-to-answer similarity, on the embedding model's calibrated scale (0: a typical unrelated pair, "
        "1: identical), at or above which an answer is on target with no model call",
        minimum=-1,
        maximum=1,
    )
    on_topic_reject: float = setting(
        0.14,
        "advanced",
        "the calibrated similarity below which an answer is off target; in between, one short model call decides",
        minimum=-1,
        maximum=1,
    )
    retrieval_floor: float = setting(
        0.95,
        "advanced",
        "abstain before generating when the top chunk's similarity is no higher than this quantile of the "
        "embedding model's unrelated pairs (the knowledge base does not cover the question); 0: no floor",
        minimum=0,
        maximum=1,
    )
    diagnosis_low: float = setting(
        0.6, "advanced", "what the diagnostic grid calls a low metric mean", minimum=0, maximum=1
    )
    diagnosis_high: float = setting(
        0.75, "advanced", "what the diagnostic grid calls a high metric mean", minimum=0, maximum=1
    )
    synth_duplicate_similarity: float = setting(
        0.85,
        "advanced",
        "synth drops a question whose similarity to a kept one, on the embedding model's own scale for questions "
        "(0: a typical unrelated pair, 1: identical), is at or above this: a near-duplicate",
        minimum=0,
        maximum=1,
    )

    def host_slots_entry(self, host: str) -> int | None:
        """The host's entry in ollama_host_slots, or None."""
        wanted = normalise_host(host)
        return next((int(n) for name, n in _slot_pairs(self.ollama_host_slots) if normalise_host(name) == wanted), None)

    def slots_set_for(self, host: str) -> int:
        """The slots set for one host: its ollama_host_slots entry, else ollama_slots_per_host (0: read it)."""
        entry = self.host_slots_entry(host)
        return self.ollama_slots_per_host if entry is None else entry

    def model_hosts(self) -> list[str]:
        """The Ollama hosts calls are spread over: ollama_hosts, or else ollama_host alone."""
        return [h.strip() for h in self.ollama_hosts.split(",") if h.strip()] or [self.ollama_host]

    def public_items(self) -> list[tuple[str, str, str]]:
        """(name, value, where it is set) for display."""
        return [(f.name, _shown(f.name, getattr(self, f.name)), env_name(f.name)) for f in fields(self)]

    def group(self, group: str) -> SettingsGroup:
        """The settings of one group (a key of GROUPS, e.g. "store", or its title), read-only: for code that
        needs only those, e.g. `settings.group("store").store_lock_timeout_s`."""
        key = group_key(group)
        return SettingsGroup(key, {d.name: getattr(self, d.name) for d in declarations(key)})


class SettingsGroup(Mapping):
    """One group's settings and values: read as attributes or as a mapping; a setting of another group is an
    AttributeError (KeyError) naming the group."""

    def __init__(self, key: str, values: dict):
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_values", dict(values))

    @property
    def title(self) -> str:
        return GROUPS[self._key]

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{name!r} is not a setting of the group {self.title!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("settings are read-only")

    def __getitem__(self, name: str):
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SettingsGroup({self._key!r}, {self._values!r})"


@dataclass(frozen=True)
class Declaration:
    """One setting as declared in Settings: what the validation, the Settings page and the reference read."""

    name: str
    default: object
    kind: type
    spec: _Spec

    @property
    def group(self) -> str:
        return self.spec.group

    @property
    def group_title(self) -> str:
        return GROUPS[self.spec.group]

    @property
    def doc(self) -> str:
        return self.spec.doc

    @property
    def essential(self) -> bool:
        return self.spec.essential

    @property
    def env(self) -> str:
        return env_name(self.name)

    @property
    def needs_restart(self) -> bool:
        """Read once at start: a change written to the settings file waits for the app (or `collect`) to restart."""
        return self.spec.restart

    @property
    def applies(self) -> str:
        """When a change written to the settings file takes effect, in words."""
        return "after a restart" if self.spec.restart else "at once"

    def rule(self) -> str:
        """The valid values in words, as the fix of an out-of-range value says them ("set X to a value ...")."""
        spec = self.spec
        if spec.rule:
            return spec.rule
        if spec.choices:
            quoted = [repr(c) for c in spec.choices]
            return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        low = f"above {_number(spec.above)}" if spec.above is not None else None
        if spec.minimum is not None:
            low = f"at least {_number(spec.minimum)}" if spec.minimum else "0 or more"
        if low and spec.maximum is not None:
            if spec.minimum is not None:
                return f"between {_number(spec.minimum)} and {_number(spec.maximum)}"
            return f"{low} and at most {_number(spec.maximum)}"
        if spec.maximum is not None:
            return f"at most {_number(spec.maximum)}"
        return low or ""

    def valid_values(self) -> str:
        """The rule with the cross-field checks on this setting, or what any value of its type means."""
        parts = [self.rule()] + [rule for name, _ok, rule in CROSS_CHECKS if name == self.name]
        parts = [p for p in parts if p]
        if parts and self.spec.empty:
            return " and ".join(parts) + f', or empty: {self.spec.empty} ({self.env}="" too)'
        if parts:
            return " and ".join(parts)
        return {bool: "true or false", int: "any integer", float: "any number"}.get(self.kind, "any text")

    def allows(self, value) -> bool:
        spec = self.spec
        return (
            (spec.choices is None or value in spec.choices)
            and (spec.minimum is None or value >= spec.minimum)
            and (spec.maximum is None or value <= spec.maximum)
            and (spec.above is None or value > spec.above)
            and (spec.check is None or bool(spec.check(value)))
        )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _declared(f: dataclasses.Field) -> Declaration:
    if "setting" not in f.metadata:
        raise TypeError(f"Settings.{f.name} is not declared with setting(default, group, doc, ...)")
    return Declaration(f.name, f.default, type(f.default), f.metadata["setting"])


DECLARATIONS: dict[str, Declaration] = {f.name: _declared(f) for f in fields(Settings)}


def group_key(group: str) -> str:
    """A group's key from its key or its title."""
    if group in GROUPS:
        return group
    by_title = {title.lower(): key for key, title in GROUPS.items()}
    if group.lower() in by_title:
        return by_title[group.lower()]
    raise KeyError(f"no settings group {group!r}; the groups are {', '.join(GROUPS)}")


def declarations(group: str | None = None) -> list[Declaration]:
    """Every setting's declaration (or one group's), essentials first, then in declaration order."""
    chosen = [d for d in DECLARATIONS.values() if group is None or d.group == group_key(group)]
    return sorted(chosen, key=lambda d: not d.essential)


def essential_settings() -> list[str]:
    return [d.name for d in declarations() if d.essential]


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


class SettingValueError(ConfigError):
    """A setting's value that the loader refuses, naming the setting (a form shows the message next to its field)."""

    def __init__(self, setting: str, message: str, fix: str):
        super().__init__(message, fix=fix)
        self.setting = setting


def parse_value(name: str, raw):
    """A setting's value from text (or TOML's type), read as its environment variable is, with the same message."""
    return _coerce(name, raw, DECLARATIONS[name].kind)


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
        raise SettingValueError(
            name,
            f"setting {name} = {raw!r} is not a valid {kind.__name__}",
            fix=f"set {env_name(name)} (or {name} in workbench.toml) to a {kind.__name__}",
        ) from None


def _read_toml(path: Path, text: str | None = None) -> dict:
    """The settings in the TOML file (or in `text`, as if the file held it)."""
    if text is None and not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8") if text is None else text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", fix=f"correct or remove {path}") from None
    unknown = set(data) - set(DECLARATIONS)
    if unknown:
        raise ConfigError(
            f"{path} has unknown settings: {', '.join(sorted(unknown))}",
            fix="remove them; docs/reference/settings.md lists every setting",
        )
    return data


# Checks across two settings: (the setting the fix names, whether the settings pass, the rule in words). Each
# setting's own valid values are declared with it, in Settings.
CROSS_CHECKS: list[tuple[str, Callable[[Settings], bool], str]] = [
    ("chunk_overlap", lambda s: s.chunk_overlap < s.chunk_size, "below chunk_size"),
    ("on_topic_reject", lambda s: s.on_topic_reject <= s.on_topic_accept, "at most on_topic_accept"),
    ("diagnosis_low", lambda s: s.diagnosis_low <= s.diagnosis_high, "at most diagnosis_high"),
]


def _out_of_range(s: Settings, name: str, rule: str, source: str = "") -> ConfigError:
    if source and not source.startswith("environment"):  # from the TOML file: the file is named, and its key
        return SettingValueError(
            name,
            f"setting {name} = {getattr(s, name)!r} (from {source}) is out of range",
            fix=f"set {name} in {source} to a value {rule}",
        )
    return SettingValueError(
        name, f"setting {name} = {getattr(s, name)!r} is out of range", fix=f"set {env_name(name)} to a value {rule}"
    )


def _validate(s: Settings, sources: Mapping[str, str] | None = None) -> Settings:
    sources = sources or {}
    for d in DECLARATIONS.values():
        if not d.allows(getattr(s, d.name)):
            raise _out_of_range(s, d.name, d.valid_values(), sources.get(d.name, ""))
    for name, ok, _rule in CROSS_CHECKS:
        if not ok(s):
            raise _out_of_range(s, name, DECLARATIONS[name].valid_values(), sources.get(name, ""))
    return s


def _check_host(name: str, raw: str, url: str) -> None:
    """An Ollama host that is no http(s) address is named at load time, not met as a traceback on the first call."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port is not None
    except ValueError:
        ok = False
    if not ok:
        raise SettingValueError(
            name,
            f"{env_name(name)} = {raw!r} is not an http(s) address of a model server",
            fix=f"set {env_name(name)} to host:port or http://host:port, e.g. 127.0.0.1:11434",
        )


def config_path(env: Mapping[str, str], toml_path: Path | None = None) -> Path | None:
    """The TOML file to read: toml_path, else the file WORKBENCH_CONFIG names (empty: none), else workbench.toml
    in the working directory if there is one. A file WORKBENCH_CONFIG names must exist."""
    if toml_path:
        return toml_path
    named = env.get("WORKBENCH_CONFIG")
    if named is None:
        return Path("workbench.toml")
    if not named.strip():
        return None
    if not Path(named).is_file():
        why = "is a folder" if Path(named).is_dir() else "does not exist"
        raise ConfigError(
            f"the settings file {named} named by WORKBENCH_CONFIG {why}",
            fix="point WORKBENCH_CONFIG at a TOML file, or unset it (or set it empty) to use none",
        )
    return Path(named)


def _raw_values(
    env: Mapping[str, str], toml_path: Path | None, toml_text: str | None = None
) -> dict[str, tuple[object, str]]:
    """{name: (raw value, source)} of every setting that is not left at its default; an environment variable
    wins over the file (read from `toml_text` instead, when given)."""
    from_file = _read_toml(toml_path, toml_text) if toml_path else {}
    raw: dict[str, tuple[object, str]] = {}
    for f in fields(Settings):
        set_empty = DECLARATIONS[f.name].spec.empty is not None  # an empty variable sets it empty, not default
        if env.get(env_name(f.name)) not in ((None,) if set_empty else (None, "")):
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


def load_settings(
    environ: Mapping[str, str] | None = None, toml_path: Path | None = None, toml_text: str | None = None
) -> Settings:
    """The settings, checked. `toml_text`: as they would load with the settings file holding this text (the
    settings page checks a change this way, with the very checks of a start, before it writes the file)."""
    env = os.environ if environ is None else environ
    raw = _raw_values(env, config_path(env, toml_path), toml_text)
    values = {name: _coerce(name, value, DECLARATIONS[name].kind) for name, (value, _source) in raw.items()}
    settings = dataclasses.replace(Settings(), **values)
    _check_host("ollama_host", settings.ollama_host, normalise_host(settings.ollama_host))
    for host in filter(str.strip, settings.ollama_hosts.split(",")):
        _check_host("ollama_hosts", host, normalise_host(host))
    hosts = ",".join(dict.fromkeys(normalise_host(h) for h in settings.ollama_hosts.split(",") if h.strip()))
    return _validate(
        dataclasses.replace(settings, ollama_host=normalise_host(settings.ollama_host), ollama_hosts=hosts),
        {name: source for name, (_value, source) in raw.items()},
    )
