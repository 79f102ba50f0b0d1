"""Causes from what changed: which part of the pipeline a change of metrics points at, read from the configuration
diff between a run and its baseline together with the metrics that moved.

Every key of a run's configuration belongs to a part (the generator, the retriever, the verifier, the judge, the
answers given by another pipeline, the dataset); every metric depends on the parts it is computed from (its own
component and the models it declares, e.g. context recall is scored with the verifier model). A part that changed
and that every moved metric depends on is the likely cause; when the configuration did not change, nothing in it
can be blamed, and the report says so instead of guessing from the metrics' levels.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.evaluation.registry import get_metric, label_of

GENERATOR, RETRIEVER, VERIFIER, JUDGE = "generator", "retriever", "verifier", "judge"
ANSWERS, DATASET = "given answers", "dataset"
PARTS = (GENERATOR, RETRIEVER, VERIFIER, JUDGE, ANSWERS, DATASET)

KEYS = {
    GENERATOR: (
        "generator_model temperature max_retries repair faithfulness_threshold abstain_below when_unverified "
        "on_topic_check on_topic_accept on_topic_reject off_topic_final context_window llm_backend model_revision "
        "answer_schedule conversation_history_tokens"
    ),
    RETRIEVER: "embed_model top_k chunk_size chunk_overlap retrieval_floor context_budget_tokens",
    VERIFIER: "verifier_chain precheck_enabled verify_scope claim_model nli_model verifier_model",
    JUDGE: "judge_model judge_corrections_k judge_pin judge_prompt_versions judge_repeats",
    ANSWERS: "pipeline answers_hash",
    DATASET: "dataset_hash dataset_size",
}
PROMPTS = {
    GENERATOR: "standalone_question grade_context rewrite_query generate generate_strict on_topic generate_on_topic",
    VERIFIER: "extract_claims extract_sentence_claims nli_judge llm_verifier",
    JUDGE: "answer_questions chunk_relevance",
}
PART_OF_KEY = {key: part for part, keys in KEYS.items() for key in keys.split()}
PART_OF_PROMPT = {name: part for part, names in PROMPTS.items() for name in names.split()}
PART_OF_COMPONENT = {
    "generator": GENERATOR,
    "generator/prompt": GENERATOR,
    "retriever ranking": RETRIEVER,
    "retriever/chunking": RETRIEVER,
}
# What an answer of this workbench depends on, beside its metric's own scorer: faithfulness is the verifier's
# verdicts on the generator's claims over the retriever's chunks.
UPSTREAM = {"faithfulness": (GENERATOR, RETRIEVER, VERIFIER)}


def part_of(key: str) -> str | None:
    """The part a configuration key belongs to; precheck_* thresholds are the verifier's."""
    if key.startswith("precheck_"):
        return VERIFIER
    return PART_OF_KEY.get(key)


def changed_parts(diff: dict) -> dict[str, list[str]]:
    """part -> the changed keys (prompts by name) of a configuration diff {key: [baseline, run]}."""
    parts: dict[str, list[str]] = {}
    for key, (before, after) in diff.items():
        if key == "prompts":
            before, after = before or {}, after or {}
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    part = JUDGE if name.startswith("judge_") else PART_OF_PROMPT.get(name)
                    if part:
                        parts.setdefault(part, []).append(f"prompt {name}")
            continue
        part = part_of(key)
        if part:
            parts.setdefault(part, []).append(key)
    return parts


def depends_on(metric: str, imported: bool = False) -> set[str]:
    """The parts a metric's scores depend on: its component's part (the judge's criteria read the answer and the
    chunks), the parts of the models it declares, the upstream of faithfulness; for answers another pipeline
    wrote, that pipeline's answers stand for the generator and the retriever."""
    registered = get_metric(metric)
    parts = set(UPSTREAM.get(metric, ()))
    if registered is not None:
        if registered.component == "judge":
            parts |= {GENERATOR, RETRIEVER, JUDGE}
        elif registered.component in PART_OF_COMPONENT:
            parts.add(PART_OF_COMPONENT[registered.component])
        parts |= {p for p in (part_of(o) for o in registered.options) if p}
    if imported:
        parts = (parts - {GENERATOR, RETRIEVER}) | {ANSWERS}
    return parts | {DATASET}


@dataclass(frozen=True)
class Cause:
    parts: tuple[str, ...]  # the likely parts, most likely first; empty: nothing in the configuration changed
    sentence: str

    @property
    def component(self) -> str:
        return " or ".join(self.parts) if self.parts else "unknown (no configuration change)"


def likely_cause(diff: dict, moved: list[str], imported: bool = False) -> Cause:
    """The part(s) that changed and that explain the metrics that moved."""
    changed = changed_parts(diff)
    if not changed:
        return Cause(
            (),
            "Nothing in the configuration changed between the runs (same models, prompts, verifier chain and "
            "retrieval settings): the change comes from elsewhere (the knowledge base, the models' weights under "
            "the same names, or chance).",
        )
    if not moved:
        return Cause(tuple(changed), f"Changed: {_listed(changed)}; no metric moved.")
    explains = {part: sum(part in depends_on(m, imported) for m in moved) for part in changed}
    best = max(explains.values())
    parts = tuple(p for p in PARTS if explains.get(p) == best and best > 0)
    if not parts:
        return Cause((), f"Changed: {_listed(changed)}; none of it is used by {', '.join(map(label_of, moved))}.")
    uses = "; ".join(
        f"{label_of(m)} depends on {', '.join(sorted(depends_on(m, imported) & set(parts)))}" for m in moved
    )
    return Cause(parts, f"Likely cause: {_listed({p: changed[p] for p in parts})} ({uses}).")


def depends_on_text(metric: str, imported: bool = False) -> str:
    """What a metric is computed from, for a reader: the parts and the models it declares."""
    registered = get_metric(metric)
    parts = sorted(depends_on(metric, imported) - {DATASET})
    models = ", ".join(registered.options) if registered and registered.options else ""
    return f"depends on the {', '.join(parts)}" + (f" (scored with {models})" if models else "")


def _listed(changed: dict[str, list[str]]) -> str:
    return "; ".join(f"the {part} changed ({', '.join(keys)})" for part, keys in changed.items())
