"""Judge calibration against people: agreement statistics, disagreements, claim-level agreement, and
re-judging with few-shot corrections measured without leakage (leave-one-out).

Statistics come from scikit-learn and SciPy; with fewer than MIN_RELIABLE pairs the numbers are still
shown, flagged as unreliable; with none, or with no variation, a statistic is None, never a division
by zero.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_recall_fscore_support

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.judge import CRITERIA, JudgePin, judge, judge_pin
from pipeline.evaluation.judge_prompts import JUDGE_PROMPT_VERSION
from pipeline.history.runs import load_result
from pipeline.models.llm import LLM
from pipeline.text import content_words, question_key
from pipeline.verification.faithfulness import context_block
from store import annotations
from store.annotations import Correction
from store.db import Database
from store.evals import reference_of
from store.llm_log import save_calls

MIN_RELIABLE = 10
SCALE = [1, 2, 3, 4, 5]


@dataclass
class Agreement:
    n: int
    exact: float | None = None
    within_one: float | None = None
    mean_abs_diff: float | None = None
    kappa: float | None = None
    kappa_low: float | None = None
    kappa_high: float | None = None
    spearman: float | None = None
    matrix: list[list[int]] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # statistic -> why it is n/a

    def why_not(self, statistic: str) -> str | None:
        """The reason a statistic (exact, kappa, kappa_interval, spearman, ...) is n/a; None when it has a value."""
        return self.reasons.get(statistic) if getattr(self, statistic, None) is None else None

    @property
    def reliable(self) -> bool:
        return self.n >= MIN_RELIABLE


def qwk(a, b) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(a, b, weights="quadratic", labels=SCALE)
    return None if np.isnan(value) else float(value)


WEIGHTS = np.array([[(i - j) ** 2 for j in range(5)] for i in range(5)], dtype=float)


def qwk_batch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Quadratic-weighted kappa of each row pair of a and b (shape resamples x n), all at once;
    NaN where it is undefined. Checked against scikit-learn in the tests."""
    rows, n = a.shape
    observed = np.zeros((rows, 5, 5))
    np.add.at(observed, (np.arange(rows)[:, None], a - 1, b - 1), 1)
    expected = observed.sum(2)[:, :, None] * observed.sum(1)[:, None, :] / n
    disagreement = (WEIGHTS * expected).sum((1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(disagreement > 0, 1 - (WEIGHTS * observed).sum((1, 2)) / disagreement, np.nan)


AGREE = 1 - WEIGHTS / 16  # agreement weights of the quadratic kappa on 1-5


def qwk_with_se(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic-weighted kappa and its large-sample standard error (Fleiss, Cohen & Everitt 1969) of each row
    pair of a and b (shape resamples x n), all at once; NaN where kappa is undefined."""
    rows, n = a.shape
    p = np.zeros((rows, 5, 5))
    np.add.at(p, (np.arange(rows)[:, None], a - 1, b - 1), 1)
    p /= n
    p_row, p_col = p.sum(2), p.sum(1)
    observed = (AGREE * p).sum((1, 2))
    expected = (AGREE * p_row[:, :, None] * p_col[:, None, :]).sum((1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)
        mean_row = (AGREE[None] * p_col[:, None, :]).sum(2)  # w̄_i. = Σ_j p_.j w_ij
        mean_col = (AGREE[None] * p_row[:, :, None]).sum(1)  # w̄_.j = Σ_i p_i. w_ij
        spread = (
            p * (AGREE[None] - (mean_row[:, :, None] + mean_col[:, None, :]) * (1 - kappa)[:, None, None]) ** 2
        ).sum((1, 2))
        variance = (spread - (kappa - expected * (1 - kappa)) ** 2) / (n * (1 - expected) ** 2)
    return kappa, np.sqrt(np.maximum(variance, 0))


# Candidate nominal levels for the calibrated interval; 0.95 is never narrowed.
CALIBRATION_LEVELS = np.array([0.95, 0.96, 0.97, 0.98, 0.985, 0.99, 0.995])


def qwk_interval(
    a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0, outer: int = 200, inner: int = 200
) -> tuple:
    """95% calibrated (double) bootstrap-t interval of the weighted kappa. The pairs are resampled and each
    resample's kappa studentised by its own standard error (bootstrap-t); then a second level of resampling
    finds the nominal level at which such intervals, built on resamples, cover this sample's kappa 95% of the
    time, and that level is used. On simulated judge-like data sets of 40 pairs (skewed, mostly 4-5) the plain
    bootstrap-t covered the true kappa in 91.6-94.1% of them, because a sample of 40 rarely holds the rare
    scores; the calibrated one covers it in the 93-97% the Calibration page promises (`python -m bench kappa`)."""
    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    kappa, se = (x[0] for x in qwk_with_se(a[None], b[None]))
    if np.isnan(kappa):
        return None, None
    if se == 0:  # every pair agrees: every resample does too
        return float(kappa), float(kappa)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(a), size=(resamples, len(a)))
    kappas, ses = qwk_with_se(a[index], b[index])
    usable = ~np.isnan(kappas) & (ses > 0)
    if not usable.any():
        return None, None
    level = _calibrated_level(a, b, float(kappa), rng, outer, inner)
    low_t, high_t = np.percentile((kappas[usable] - kappa) / ses[usable], [50 * (1 - level), 50 * (1 + level)])
    return float(max(-1.0, kappa - high_t * se)), float(min(1.0, kappa - low_t * se))


def _calibrated_level(a: np.ndarray, b: np.ndarray, kappa: float, rng, outer: int, inner: int) -> float:
    """The smallest candidate level whose bootstrap-t intervals on `outer` resamples (each from `inner`
    resamples of its own) cover `kappa` at least 95% of the time; a resample with too few usable inner
    resamples counts as not covering."""
    n = len(a)
    first = rng.integers(0, n, size=(outer, n))
    a1, b1 = a[first], b[first]
    k1, se1 = qwk_with_se(a1, b1)
    second = rng.integers(0, n, size=(outer, inner, n))
    rows = np.arange(outer)[:, None, None]
    k2, se2 = qwk_with_se(a1[rows, second].reshape(-1, n), b1[rows, second].reshape(-1, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        t2 = (k2.reshape(outer, inner) - k1[:, None]) / se2.reshape(outer, inner)
    t2[~np.isfinite(t2) | (se2.reshape(outer, inner) <= 0)] = np.nan
    enough = (np.isfinite(t2).sum(1) >= 20) & np.isfinite(k1) & (se1 > 0)
    for level in CALIBRATION_LEVELS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            low_t, high_t = np.nanpercentile(t2, [50 * (1 - level), 50 * (1 + level)], axis=1)
        covers = enough & (k1 - high_t * se1 <= kappa) & (kappa <= k1 - low_t * se1)
        if covers.mean() >= 0.95:
            return float(level)
    return float(CALIBRATION_LEVELS[-1])


def agreement(judge_scores: list[int], human_scores: list[int], seed: int = 0) -> Agreement:
    """Agreement of two raters on 1-5. A statistic that is undefined is None with its reason in `reasons`:
    no pairs; one pair (kappa, its interval and Spearman need two); a rater who gave every item the same score
    (kappa is then 0 by construction, whatever the other rater did, and Spearman is undefined) — a figure
    that would read as "no agreement" when it says nothing."""
    a, b = np.asarray(judge_scores, dtype=int), np.asarray(human_scores, dtype=int)
    n = len(a)
    if n == 0:
        reason = "no pairs to compare"
        return Agreement(
            0,
            matrix=[[0] * 5 for _ in range(5)],
            reasons={k: reason for k in ("exact", "within_one", "mean_abs_diff", "kappa", "kappa_low", "spearman")},
        )
    diff = np.abs(a - b)
    result = Agreement(
        n,
        float(np.mean(diff == 0)),
        float(np.mean(diff <= 1)),
        float(np.mean(diff)),
        matrix=confusion_matrix(a, b, labels=SCALE).tolist(),
    )
    constant = [
        f"the {who} gave every item {int(x[0])}" for who, x in (("judge", a), ("people", b)) if len(set(x)) == 1
    ]
    if n < 2:
        reason = "one pair: kappa and Spearman need at least two"
    elif constant:
        reason = (
            " and ".join(constant) + ": kappa is 0 by construction and Spearman undefined, so neither says anything"
        )
    else:
        reason = None
    if reason:
        result.reasons = {"kappa": reason, "kappa_low": reason, "kappa_high": reason, "spearman": reason}
        return result
    result.kappa = qwk(a, b)
    result.kappa_low, result.kappa_high = qwk_interval(a, b, seed=seed)
    if result.kappa_low is None:
        result.reasons["kappa_low"] = result.reasons["kappa_high"] = "no bootstrap resample had a defined kappa"
    result.spearman = float(spearmanr(a, b).statistic)
    return result


def disagreements(pairs: list[dict], at_least: int = 2) -> list[dict]:
    return [p for p in pairs if abs(p["judge"] - p["human"]) >= at_least]


def inter_annotator(db: Database, run_ids: list[int], criterion: str) -> Agreement:
    """Agreement between annotators on the runs two of them rated (first two names per run)."""
    by_run: dict[int, list[int]] = {}
    for row in annotations.ratings_for(db, run_ids):
        if row[criterion] is not None:  # a rating saved before the criterion existed has none
            by_run.setdefault(row["run_id"], []).append(row[criterion])
    pairs = [scores[:2] for scores in by_run.values() if len(scores) >= 2]
    return agreement([p[0] for p in pairs], [p[1] for p in pairs])


def claim_agreement(db: Database, run_ids: list[int]) -> dict:
    """Human verdicts against the verifier's: precision, recall and F1 per verdict, and a confusion matrix."""
    pairs = annotations.claim_pairs(db, run_ids)
    labels = list(annotations.VERDICTS)
    if not pairs:
        return {"n": 0, "per_verdict": [], "matrix": [[0] * 3 for _ in range(3)], "labels": labels}
    human, verifier = [p["human"] for p in pairs], [p["verifier"] for p in pairs]
    precision, recall, f1, support = precision_recall_fscore_support(human, verifier, labels=labels, zero_division=0)
    rows = [
        {"verdict": v, "precision": float(p), "recall": float(r), "f1": float(f), "human_count": int(s)}
        for v, p, r, f, s in zip(labels, precision, recall, f1, support, strict=False)
    ]
    return {
        "n": len(pairs),
        "per_verdict": rows,
        "labels": labels,
        "matrix": confusion_matrix(human, verifier, labels=labels).tolist(),
    }


def same_question_key(question: str) -> str:
    """A question's text normalised for leave-one-out (pipeline.text.question_key)."""
    return question_key(question)


def relevant_corrections(
    corrections: list[Correction],
    criterion: str,
    question: str,
    k: int,
    exclude_run: int | None = None,
    item_id: str | None = None,
) -> list[Correction]:
    """The k corrections of this criterion whose questions share the most words with this one. Leave-one-out
    by question: a correction of this run, of the same golden item (item_id) or of the same question (its
    normalised text) in any other run is never among them, so a score is never steered by a person's verdict
    on the very question it scores."""
    words, key = content_words(question), same_question_key(question)
    pool = [
        c
        for c in corrections
        if c.criterion == criterion
        and c.run_id != exclude_run
        and not (item_id is not None and c.item_id == item_id)
        and same_question_key(c.question) != key
    ]
    return sorted(pool, key=lambda c: (-len(words & content_words(c.question)), c.id))[:k]


def corrections_pin(base: JudgePin, version: int | None) -> JudgePin:
    if version is None:
        return base
    return JudgePin(base.model, base.digest, f"{JUDGE_PROMPT_VERSION}+corrections-v{version}")


def rejudge(settings: Settings, db: Database, run_ids: list[int], on_progress=None) -> int:
    """Re-score every rated run with the current corrections, each without any correction of its own question
    (leave-one-out by golden item and question text, not just by run); return the correction set's version
    the scores are stored under."""
    version, corrections = annotations.current_corrections(db)
    if version is None:
        raise InputError("there are no corrections yet", fix="turn some disagreements into corrections first")
    llm = LLM(settings, db, origin="rejudge")
    pin = corrections_pin(judge_pin(llm, settings), version)
    rated = sorted({r["run_id"] for r in annotations.ratings_for(db, run_ids)})
    items = annotations.golden_ids(db, rated)
    rows = []
    for done, run_id in enumerate(rated, start=1):
        result = load_result(db, run_id)
        reference = reference_of(db, run_id)
        for criterion in CRITERIA:
            chosen = relevant_corrections(
                corrections,
                criterion,
                result.question,
                settings.judge_corrections_k,
                exclude_run=run_id,
                item_id=items.get(run_id),
            )
            score = judge(
                llm,
                settings,
                result.question,
                result.answer or "",
                context_block(result.passages),
                reference,
                pin,
                criteria=(criterion,),
                corrections=chosen,
            )[0]
            rows.append(
                {
                    "run_id": run_id,
                    "metric": score.metric,
                    "value": score.value,
                    "status": score.status,
                    "explanation": score.explanation,
                    "corrections_used": [c.id for c in chosen],
                }
            )
        if on_progress:
            on_progress(done, len(rated))
    annotations.save_rejudged(db, version, rows)
    save_calls(db, llm.take_calls(), llm.take_cache_entries())
    return version
