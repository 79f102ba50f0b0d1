"""The diagnostic grid: from component metric means to the part of the pipeline to fix.

The grid's rules read four metrics by name; when no rule applies, a component metric at least `gap`
below the next-lowest names the weakest component; otherwise every registered component metric (all but
the judge's) takes part in the "weakest metric" sentence. The diagnosis knows what it does not know: it
never reports health while a component metric could not be measured or more than `max_invalid` of the
judge's replies were invalid, and it says which and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.evaluation.registry import UNIT, get_metric, label_of, ordered_metrics


@dataclass
class Diagnosis:
    # generator | retrieval | reranking | prompt | none | unknown | abstention | a registered component
    component: str
    sentence: str
    unmeasured: list[str] = field(default_factory=list)  # what could not be measured, and why


def diagnose(
    means: dict[str, float | None],
    low: float = 0.6,
    high: float = 0.75,
    judge_invalid_rate: float | None = None,
    why_missing: dict[str, str] | None = None,
    max_invalid: float = 0.2,
    gap: float = 0.2,
    abstained: int = 0,
    items: int = 0,
) -> Diagnosis:
    """`why_missing` says, per metric without a mean, why (e.g. "8 invalid, 2 not applicable"). `abstained`: the
    items whose answer abstained, of `items`; they make no claims, so faithfulness (and with it a sentence about the
    claims the generator adds) leaves them out, and the sentence says how many. When every item abstained there is
    no answer to blame the generator for: the diagnosis is the abstentions themselves."""
    if items and abstained >= items:
        return _all_abstained(items)
    unmeasured = _unmeasured(means, judge_invalid_rate, why_missing or {}, max_invalid)
    found = _grid(means, low, high, gap, _left_out(abstained))
    if unmeasured:
        caveat = " Not measured: " + "; ".join(unmeasured) + "."
        if found.component == "none":
            found = Diagnosis(
                "unknown",
                f"Every measured component metric is at or above {high:.2f}, but health cannot be claimed.",
            )
        found = Diagnosis(found.component, found.sentence + caveat, unmeasured)
    return found


def _component_metrics():
    return [m for m in ordered_metrics() if m.component != "judge" and m.scale == UNIT]


def _unmeasured(means, judge_invalid_rate, why_missing, max_invalid) -> list[str]:
    out = []
    for m in _component_metrics():
        if means.get(m.name) is None:
            why = why_missing.get(m.name) or "no valid score"
            out.append(f"{label_of(m.name)} ({why})")
    if judge_invalid_rate is not None and judge_invalid_rate > max_invalid:
        out.append(
            f"the judge's scores ({judge_invalid_rate:.0%} of its replies were invalid, more than {max_invalid:.0%})"
        )
    return out


def _all_abstained(items: int) -> Diagnosis:
    every = "The only item" if items == 1 else f"All {items} items"
    return Diagnosis(
        "abstention",
        f"{every} abstained: no answer was given, so no claim of the generator could be checked and faithfulness "
        "says nothing. Look at why they abstained (each item's reason in Results): retrieval that finds no "
        "passage that answers, a knowledge base that does not cover the questions, or a faithfulness threshold "
        "that withholds every answer.",
    )


def _left_out(abstained: int) -> str:
    """What a sentence about faithfulness says of the abstained items it leaves out."""
    if not abstained:
        return ""
    return f" ({abstained} abstained item{'s' if abstained != 1 else ''} left out: an abstention makes no claims)"


def _grid(means: dict[str, float | None], low: float, high: float, gap: float, left_out: str = "") -> Diagnosis:
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
            f"the generator adds claims the retrieved context does not support{left_out}. Fix the generator "
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
            f"Both context recall ({r:.2f}) and faithfulness ({f:.2f}) are low{left_out}. Fix "
            "retrieval first: a starved generator fills the gaps with unsupported claims.",
        )
    known = {m.name: means[m.name] for m in _component_metrics() if means.get(m.name) is not None}
    ranked = sorted(known, key=known.get)
    if len(ranked) >= 2 and known[ranked[1]] - known[ranked[0]] >= gap:
        weakest, runner_up = ranked[0], ranked[1]
        component = get_metric(weakest).component
        return Diagnosis(
            component,
            f"{label_of(weakest)} ({known[weakest]:.2f}) is at least {gap:.1f} below the next-lowest metric "
            f"({label_of(runner_up)}, {known[runner_up]:.2f}): the {component} is the weakest component. "
            "Look at its worst items.",
        )
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
