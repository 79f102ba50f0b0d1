"""The diagnostic grid: from component metric means to the part of the pipeline to fix.

The grid's rules read four metrics by name; when no rule applies, every registered component metric
(all but the judge's) takes part in the "weakest metric" sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.evaluation.registry import UNIT, label_of, ordered_metrics


@dataclass
class Diagnosis:
    component: str  # generator | retrieval | reranking | prompt | none | unknown
    sentence: str


def diagnose(means: dict[str, float | None], low: float = 0.6, high: float = 0.75) -> Diagnosis:
    f, r = means.get("faithfulness"), means.get("context_recall")
    p, a = means.get("context_precision"), means.get("answer_relevancy")

    def is_low(x):
        return x is not None and x < low

    def is_high(x):
        return x is not None and x >= high

    if is_low(f) and is_high(r):
        return Diagnosis(
            "generator",
            f"Faithfulness is low ({f:.2f}) although context recall is high ({r:.2f}): "
            "the generator adds claims the retrieved context does not support. Fix the generator "
            "(model, prompt, temperature).",
        )
    if is_low(r) and is_high(f):
        return Diagnosis(
            "retrieval",
            f"Context recall is low ({r:.2f}) while faithfulness is high ({f:.2f}): "
            "retrieval is starving the generator. Fix retrieval (chunk size and overlap, top-k, "
            "embedding model).",
        )
    if is_low(p) and is_high(r):
        return Diagnosis(
            "reranking",
            f"Context precision is low ({p:.2f}) while recall is high ({r:.2f}): the "
            "right chunks are found but ranked below irrelevant ones. Add or fix reranking.",
        )
    if is_low(a) and is_high(f):
        return Diagnosis(
            "prompt",
            f"Answer relevancy is low ({a:.2f}) while faithfulness is high ({f:.2f}): the "
            "answers are true to the sources but off-target. Fix the generation prompt.",
        )
    if is_low(r) and is_low(f):
        return Diagnosis(
            "retrieval",
            f"Both context recall ({r:.2f}) and faithfulness ({f:.2f}) are low. Fix "
            "retrieval first: a starved generator fills the gaps with unsupported claims.",
        )
    known = {
        m.name: means[m.name]
        for m in ordered_metrics()
        if m.component != "judge" and m.scale == UNIT and means.get(m.name) is not None
    }
    if not known:
        return Diagnosis("unknown", "No component metric could be computed for this run.")
    if all(v >= high for v in known.values()):
        return Diagnosis(
            "none", f"Every component metric is at or above {high:.2f}: no component stands out as failing."
        )
    weakest = min(known, key=known.get)
    return Diagnosis(
        "unknown",
        f"No clear pattern; the weakest metric is {label_of(weakest)} ({known[weakest]:.2f}). Look at its worst items.",
    )
