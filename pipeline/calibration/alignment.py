"""Aligning a criterion's judge prompt on people's ratings, chosen and measured without leakage.

Candidates are the current prompt, a rubric clarification the model writes from the judge's disagreements with
people, a few-shot set drawn from the rated answers, and the two combined. A candidate is always fitted on some
items (the clarification written from their disagreements, the shots drawn from them) and judged on others.

Nested cross-validation by question: the outer folds hold out whole questions; on each outer training set, inner
folds (again by question) fit every recipe on part of it and score it on the rest, and the recipe whose pooled
inner predictions agree best with people is chosen; it is then refitted on the whole outer training set and
scored on the outer fold. The reported agreement pools those outer predictions only, so no item the choice was
made on is in it (each fold's `OuterFold` records the items it fitted, chose and reported on). The gain over the
current prompt is paired (the same items, judged both ways) with a bootstrap over questions (scipy); a new prompt
is accepted only when the gain's whole interval lies above zero. The prompt kept is the recipe the same inner
procedure chooses on all the items, fitted on all of them.

Model calls go through an `AlignmentJudge` (the real judge in align_judge.py, a scripted one in
`python -m bench align`); each finished step is kept in a `Memo` under a key that names it, so a killed run that
is started again redoes nothing that finished.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy.stats import bootstrap

from pipeline.evaluation.kappa import table_kappa_se

RECIPES = ("current", "clarification", "fewshot", "combined")
SHOTS = 4  # rated answers in a few-shot set
OUTER_FOLDS = 5
INNER_FOLDS = 4
DISAGREE_AT = 1  # |judge - people| from which a pair is a disagreement the clarification is written from
LEVEL = 0.95
RESAMPLES = 2000
# scipy.stats.bootstrap's interval: BCa (on 200 noise-judge data sets it accepted 4.0%, the percentile interval
# 5.0%; python -m bench align); percentile where BCa is undefined (every resample alike, e.g. a gain of exactly 0)
METHOD = "BCa"


@dataclass(frozen=True)
class RatedItem:
    """One rated answer: `group` is its question (the unit of the folds and of the bootstrap)."""

    id: str
    group: str
    human: int
    question: str = ""
    answer: str = ""
    context: str = ""
    reference: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A judge prompt to try: the current one with a clarification of the rubric and/or few-shot examples."""

    recipe: str
    clarification: str = ""
    shots: tuple[str, ...] = ()  # ids of rated items shown as worked examples

    def key(self) -> str:
        text = json.dumps([self.recipe, self.clarification, list(self.shots)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


CURRENT = Candidate("current")


class AlignmentJudge(Protocol):
    def score(self, candidate: Candidate, items: Sequence[RatedItem]) -> list[float | None]:
        """The judge's score of each item under the candidate prompt (None: no valid reply)."""

    def clarify(self, disagreements: Sequence[tuple[RatedItem, float]]) -> str:
        """A clarification of the rubric written from (item, judge score) pairs where the judge and people differ."""


class Memo(Protocol):
    def get(self, key: str): ...

    def put(self, key: str, value) -> None: ...


class MemoryMemo(dict):
    def put(self, key: str, value) -> None:
        self[key] = value


@dataclass
class OuterFold:
    """What one outer fold used: the items its recipe was chosen and fitted on, and the items it reports on."""

    index: int
    fitted_on: list[str]  # the outer training items: inner fits, inner choice and the refit
    chosen_on: list[str]  # the inner validation items the recipe was chosen by (all of fitted_on)
    reported_on: list[str]
    recipe: str
    inner_kappa: dict[str, float | None]
    candidate: Candidate
    shot_ids: list[str] = field(default_factory=list)
    written_from: list[str] = field(default_factory=list)  # items whose disagreements the clarification read


@dataclass
class Alignment:
    n: int
    questions: int
    current_kappa: float | None
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    gain: float | None
    gain_low: float | None
    gain_high: float | None
    accepted: bool
    reason: str
    final: Candidate
    final_inner_kappa: dict[str, float | None]
    folds: list[OuterFold]
    invalid: int = 0


def rounded(scores) -> np.ndarray:
    """Scores (a mean of repeats may be fractional) on the 1-5 scale; NaN stays NaN."""
    values = np.asarray([np.nan if s is None else s for s in scores], dtype=float)
    return np.clip(np.rint(values), 1, 5)


def kappa(judge_scores, human) -> float | None:
    """Quadratic-weighted kappa of the valid pairs; None where undefined."""
    a, b = rounded(judge_scores), np.asarray(human, dtype=float)
    ok = ~np.isnan(a)
    if ok.sum() < 2:
        return None
    counts = np.zeros((5, 5))
    np.add.at(counts, (a[ok].astype(int) - 1, b[ok].astype(int) - 1), 1)
    value = float(table_kappa_se(counts)[0])
    return None if np.isnan(value) else value


def folds_by_question(items: Sequence[RatedItem], k: int, seed: str) -> list[list[int]]:
    """k folds of item indices, whole questions in each, assigned in an order fixed by the seed and the questions
    (so a rerun gets the same folds); fewer folds when there are fewer questions."""
    groups = sorted({it.group for it in items}, key=lambda g: hashlib.sha256(f"{seed}/{g}".encode()).hexdigest())
    k = min(k, len(groups))
    fold_of = {g: i % k for i, g in enumerate(groups)}
    return [[i for i, it in enumerate(items) if fold_of[it.group] == f] for f in range(k)]


class Procedure:
    """The alignment of one criterion: each model step memoised under its name."""

    def __init__(self, judge: AlignmentJudge, memo: Memo, on_step: Callable[[str], None] | None = None):
        self.judge, self.memo, self.on_step = judge, memo, on_step or (lambda step: None)

    def _memo(self, key: str, compute):
        value = self.memo.get(key)
        if value is None:
            value = compute()
            self.memo.put(key, value)
        self.on_step(key)
        return value

    def baseline(self, items: Sequence[RatedItem]) -> dict[str, float | None]:
        scores = self._memo("baseline", lambda: self.judge.score(CURRENT, items))
        return dict(zip([it.id for it in items], scores, strict=True))

    def fit(self, recipe: str, train: Sequence[RatedItem], base: dict, path: str) -> Candidate:
        """The recipe's candidate fitted on `train` alone."""
        if recipe == "current":
            return CURRENT
        clarification = ""
        if recipe in ("clarification", "combined"):
            pairs = disagreements(train, base)
            clarification = self._memo(f"{path}/clarify", lambda: self.judge.clarify(pairs)) if pairs else ""
        shots = few_shot(train, base, path) if recipe in ("fewshot", "combined") else ()
        return Candidate(recipe, clarification, shots)

    def scores(self, candidate: Candidate, items: Sequence[RatedItem], base: dict, path: str) -> list:
        if candidate.recipe == "current":
            return [base[it.id] for it in items]
        key = f"{path}/score/{candidate.key()}"
        return self._memo(key, lambda: self.judge.score(candidate, items))

    def choose(self, train: Sequence[RatedItem], base: dict, path: str) -> tuple[str, dict]:
        """The recipe whose inner cross-validated predictions on `train` agree best with people (the current
        prompt wins ties)."""
        predicted = {recipe: {} for recipe in RECIPES}
        for f, held in enumerate(folds_by_question(train, INNER_FOLDS, path)):
            held_ids = {train[i].id for i in held}
            fit_on = [it for it in train if it.id not in held_ids]
            shown = [train[i] for i in held]
            for recipe in RECIPES:
                candidate = self.fit(recipe, fit_on, base, f"{path}/inner{f}")
                scored = self.scores(candidate, shown, base, f"{path}/inner{f}")
                predicted[recipe].update(zip([it.id for it in shown], scored, strict=True))
        humans = [it.human for it in train]
        found = {r: kappa([predicted[r][it.id] for it in train], humans) for r in RECIPES}
        best = max(RECIPES, key=lambda r: (-np.inf if found[r] is None else found[r], r == "current"))
        return best, found

    def run(self, items: Sequence[RatedItem], seed: int = 0) -> Alignment:
        check_items(items)
        base = self.baseline(items)
        outer_scores: dict[str, float | None] = {}
        folds = []
        for o, held in enumerate(folds_by_question(items, OUTER_FOLDS, f"outer-{seed}")):
            held_ids = {items[i].id for i in held}
            train = [it for it in items if it.id not in held_ids]
            shown = [items[i] for i in held]
            path = f"outer{o}"
            recipe, inner = self.choose(train, base, path)
            candidate = self.fit(recipe, train, base, path)
            outer_scores.update(zip([it.id for it in shown], self.scores(candidate, shown, base, path), strict=True))
            folds.append(
                OuterFold(
                    o,
                    [it.id for it in train],
                    [it.id for it in train],
                    [it.id for it in shown],
                    recipe,
                    inner,
                    candidate,
                    list(candidate.shots),
                    [it.id for it, _ in disagreements(train, base)] if candidate.clarification else [],
                )
            )
        final_recipe, final_inner = self.choose(items, base, "all")
        final = self.fit(final_recipe, items, base, "all")
        return summarise(items, base, outer_scores, final, final_inner, folds, seed)


def check_items(items: Sequence[RatedItem]) -> None:
    from pipeline.errors import InputError

    questions = len({it.group for it in items})
    if questions < OUTER_FOLDS * 2:
        raise InputError(
            f"alignment needs ratings of at least {OUTER_FOLDS * 2} questions, not {questions}",
            fix="rate more answers on Annotate (40 rated answers is a good start)",
        )


def disagreements(items: Sequence[RatedItem], base: dict) -> list[tuple[RatedItem, float]]:
    """(item, judge score) of the items where the current judge and people differ by DISAGREE_AT or more."""
    return [
        (it, base[it.id])
        for it in items
        if base[it.id] is not None and abs(rounded([base[it.id]])[0] - it.human) >= DISAGREE_AT
    ]


def few_shot(items: Sequence[RatedItem], base: dict, path: str) -> tuple[str, ...]:
    """SHOTS rated answers of distinct questions, the largest disagreements first (ties in an order fixed by the
    path), so the examples show the judge where people scored otherwise."""

    def order(it):
        judged = base[it.id]
        gap = 0.0 if judged is None else abs(float(judged) - it.human)
        return (-gap, hashlib.sha256(f"{path}/{it.id}".encode()).hexdigest())

    chosen, seen = [], set()
    for it in sorted(items, key=order):
        if it.group not in seen:
            chosen.append(it.id)
            seen.add(it.group)
        if len(chosen) == SHOTS:
            break
    return tuple(chosen)


def summarise(items, base, outer_scores, final, final_inner, folds, seed) -> Alignment:
    human = np.array([it.human for it in items])
    new = rounded([outer_scores[it.id] for it in items])
    old = rounded([base[it.id] for it in items])
    valid = ~np.isnan(new) & ~np.isnan(old)
    kept = [it for it, ok in zip(items, valid, strict=True) if ok]
    groups = sorted({it.group for it in kept})
    interval = paired_intervals(kept, new[valid], old[valid], human[valid], seed)
    k_new, k_old = kappa(new[valid], human[valid]), kappa(old[valid], human[valid])
    gain = None if k_new is None or k_old is None else k_new - k_old
    accepted, reason = decide(final, gain, interval["gain"])
    return Alignment(
        len(kept),
        len(groups),
        k_old,
        k_new,
        *interval["kappa"],
        gain,
        *interval["gain"],
        accepted,
        reason,
        final,
        final_inner,
        folds,
        invalid=int((~valid).sum()),
    )


def decide(final: Candidate, gain, interval) -> tuple[bool, str]:
    low, high = interval
    if gain is None or low is None:
        return False, "the held-out gain has no interval (too few valid pairs, or no variation)"
    if low <= 0:
        return False, (
            f"the held-out gain over the current prompt is {gain:+.3f}, and its {LEVEL:.0%} interval"
            f" [{low:+.3f}, {high:+.3f}] does not lie above zero: the gain may be chance"
        )
    if final.recipe == "current":
        return False, "on all the ratings, the current prompt agreed with people at least as well as any candidate"
    return True, f"the held-out gain's {LEVEL:.0%} interval [{low:+.3f}, {high:+.3f}] lies above zero"


def paired_intervals(items, new, old, human, seed) -> dict[str, tuple]:
    """Bootstrap intervals, resampling whole questions: of the new prompt's kappa, and of its paired gain over
    the current prompt (the same resampled items judged both ways)."""
    group_index = {g: i for i, g in enumerate(sorted({it.group for it in items}))}
    item_group = np.array([group_index[it.group] for it in items])
    cells_new = np.eye(25)[(new.astype(int) - 1) * 5 + human - 1]
    cells_old = np.eye(25)[(old.astype(int) - 1) * 5 + human - 1]

    def weights(resampled):  # resampled: ... x G group indices -> ... x n item weights
        resampled = np.asarray(resampled)
        flat = resampled.reshape(-1, resampled.shape[-1])
        counts = np.stack([np.bincount(row, minlength=len(group_index)) for row in flat])
        return counts[:, item_group].reshape(*resampled.shape[:-1], len(items))

    def kappas(resampled):
        w = weights(resampled)
        k_new = table_kappa_se((w @ cells_new).reshape(*w.shape[:-1], 5, 5))[0]
        k_old = table_kappa_se((w @ cells_old).reshape(*w.shape[:-1], 5, 5))[0]
        return k_new, k_old

    def new_kappa(resampled, axis=-1):
        return kappas(resampled)[0]

    def gain(resampled, axis=-1):
        k_new, k_old = kappas(resampled)
        return k_new - k_old

    out = {}
    for name, statistic in (("kappa", new_kappa), ("gain", gain)):
        if len(group_index) < 2:
            out[name] = (None, None)
            continue
        low, high = _interval(statistic, len(group_index), seed)
        out[name] = (None, None) if np.isnan(low) or np.isnan(high) else (float(low), float(high))
    return out


def _interval(statistic, groups: int, seed: int) -> tuple[float, float]:
    for method in dict.fromkeys((METHOD, "percentile")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's "degenerate distribution": the percentile interval follows
            result = bootstrap(
                (np.arange(groups),),
                statistic,
                n_resamples=RESAMPLES,
                confidence_level=LEVEL,
                method=method,
                vectorized=True,
                random_state=np.random.default_rng(seed),
            )
        low, high = result.confidence_interval
        if not (np.isnan(low) or np.isnan(high)):
            break
    return low, high
