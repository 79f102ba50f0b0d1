"""Judge calibration against people: agreement statistics, disagreements, claim-level agreement, and
re-judging with few-shot corrections measured without leakage (leave-one-out).

Statistics come from scikit-learn and SciPy; with fewer than MIN_RELIABLE pairs the numbers are still
shown, flagged as unreliable; with none, or with no variation, a statistic is None, never a division
by zero.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_recall_fscore_support

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.evaluation.corrections import corrections_pin, relevant_corrections
from pipeline.evaluation.judge import CRITERIA, judge, judge_pin
from pipeline.evaluation.kappa import WEIGHTS, table_kappa_se
from pipeline.history.runs import load_result
from pipeline.models.llm import LLM
from pipeline.verification.faithfulness import context_block
from store import annotations
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


def pair_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The 5 x 5 table of counts of each row pair of a and b (shape ... x n): shape ... x 5 x 5."""
    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    lead = a.shape[:-1]
    rows = int(np.prod(lead))
    codes = (a.reshape(rows, -1) - 1) * 5 + (b.reshape(rows, -1) - 1) + 25 * np.arange(rows)[:, None]
    return np.bincount(codes.ravel(), minlength=25 * rows).reshape(*lead, 5, 5)


def qwk_with_se(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic-weighted kappa and its large-sample standard error (Fleiss, Cohen & Everitt 1969) of each row
    pair of a and b (shape resamples x n), all at once; NaN where kappa is undefined."""
    return table_kappa_se(pair_counts(a, b))


# Where the calibrated interval is withheld (`interval_withheld`), measured on simulated judge-human data sets
# (`python -m bench kappa`, docs/benchmarks.md): with fewer than MIN_OFF_MODE items a rater did not give its most
# common score, or fewer than MIN_DISAGREEING pairs that disagree, a 95% interval covered the true kappa far less
# than 95% of the time, and no other interval tried (BCa, percentile, jackknife, Fisher-z) did much better.
MIN_OFF_MODE = 5
MIN_DISAGREEING = 3
# Fewer pairs than this get no interval at all: where the two rules above let it be shown, with 10, 12 and 13
# pairs of balanced scores at kappa 0.7 it covered 91.5%, 92.6% and 92.0%, with 14 and 15 pairs 95.3% and 95.0%
# (a side simulation, 300 data sets a cell, seeds apart from bench kappa's; at kappa 0.4 and 0.9, and with
# judge-like scores at n = 15, 95.5-99.0%; docs/benchmarks.md). Before any rule, 80% fives at n = 10 covered 72%.
MIN_INTERVAL_PAIRS = 15


def interval_withheld(a, b) -> str | None:
    """Why the kappa interval of these pairs is not reliable enough to show, or None when it is.

    - Fewer than MIN_INTERVAL_PAIRS (15) pairs: at n = 10-13 the interval covered 91.5-92.6% with balanced
      scores (kappa 0.7), 72% with 80% fives, at n = 5 54-85%; at n = 14 and 15, 95.3% and 95.0%.
    - Fewer than MIN_OFF_MODE items a rater scored other than its most common score (any n < 6; n = 20 with
      80% fives): the sample says next to nothing about the rare scores that, under quadratic weights, move
      kappa most; such intervals covered the true kappa about 80% of the time (56% with one such item).
    - Fewer than MIN_DISAGREEING pairs that disagree: resampling cannot show how variable the disagreement is;
      the interval is too narrow (zero-width when every pair agrees) and covered about 70% of the time.
    """
    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    n = len(a)
    off = []
    for who, scores in (("judge", a), ("people", b)):
        counts = np.bincount(scores, minlength=6)[1:]
        off.append((n - int(counts.max()), who, int(counts.argmax()) + 1, counts.max() / n))
    fewest, who, mode, share = min(off)
    if n < MIN_INTERVAL_PAIRS:
        return (
            f"only {n} pair{'s' if n > 1 else ''} (fewer than {MIN_INTERVAL_PAIRS}): intervals from so few covered"
            " the true kappa 54-93% of the time in simulation, not 95% (python -m bench kappa); rate more items"
        )
    if fewest < MIN_OFF_MODE:
        return (
            f"n = {n} with {share:.0%} of the {who}'s scores at {mode}, only {fewest} otherwise (fewer than"
            f" {MIN_OFF_MODE}): on such samples a 95% interval covered the true kappa only about 80% of the time"
            f" (python -m bench kappa); rate more items, especially ones not scored {mode}"
        )
    disagreeing = int((a != b).sum())
    if disagreeing < MIN_DISAGREEING:
        return (
            f"{'none' if not disagreeing else f'only {disagreeing}'} of the {n} pairs"
            f" {'disagrees' if disagreeing == 1 else 'disagree'} (fewer than {MIN_DISAGREEING}): resampling cannot"
            f" show how variable the disagreement is, so an interval would be"
            f" {'zero-width' if not disagreeing else 'too narrow'} (such intervals covered the true kappa about 70%"
            " of the time, python -m bench kappa); rate more items"
        )
    return None


# Candidate nominal levels for the calibrated interval; 0.95 is never narrowed.
CALIBRATION_LEVELS = np.array([0.95, 0.96, 0.97, 0.98, 0.985, 0.99, 0.995])


def qwk_interval(
    a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0, outer: int = 200, inner: int = 200
) -> tuple:
    """95% calibrated (double) bootstrap-t interval of the weighted kappa; (None, None) where there is none (kappa
    undefined, or every resample gives the same kappa: never a zero-width interval). The pairs are resampled and
    each resample's kappa studentised by its own standard error (bootstrap-t); then a second level of resampling
    finds the nominal level at which such intervals, built on resamples, cover this sample's kappa 95% of the
    time, and that level is used. It covers the true kappa 93-97% of the time where `interval_withheld` lets it
    be shown, and far less where it does not (small n, a rater's scores nearly all at one value, almost no
    disagreements): agreement() withholds it there (`python -m bench kappa`, docs/benchmarks.md).

    It is a pure function of the pairs' 5 x 5 table and the settings, and takes ~1 s: each result is kept,
    keyed by those (`_INTERVALS`), so a page that renders the same pairs again reuses it; a saved rating
    changes the table, and with it the key."""
    counts = pair_counts(a, b)
    key = (counts.tobytes(), resamples, seed, outer, inner, CALIBRATION_LEVELS.tobytes(), RESAMPLE_PAIRS_UP_TO)
    with _INTERVALS_LOCK:
        kept = _INTERVALS.get(key)
    if kept is not None:
        return kept
    interval = table_interval(counts, resamples, seed, outer, inner)
    with _INTERVALS_LOCK:
        if len(_INTERVALS) >= INTERVALS_KEPT:
            del _INTERVALS[next(iter(_INTERVALS))]  # the oldest
        _INTERVALS[key] = interval
    return interval


# Intervals already computed, by (table, settings); at most INTERVALS_KEPT, the oldest dropped first.
INTERVALS_KEPT = 1024
_INTERVALS: dict[tuple, tuple] = {}
_INTERVALS_LOCK = threading.Lock()


def table_interval(counts: np.ndarray, resamples: int, seed: int, outer: int, inner: int) -> tuple:
    """qwk_interval of a 5 x 5 table of counts, computed (never from `_INTERVALS`)."""
    kappa, se = (float(x) for x in table_kappa_se(counts))
    if np.isnan(kappa) or se == 0:  # se 0: every pair agrees (or all disagree alike), so every resample does too
        return None, None
    rng = np.random.default_rng(seed)
    kappas, ses = table_kappa_se(resample(counts[None], resamples, rng)[:, 0])
    usable = ~np.isnan(kappas) & (ses > 0)
    if not usable.any():
        return None, None
    level = _calibrated_level(counts, kappa, rng, outer, inner)
    low_t, high_t = np.percentile((kappas[usable] - kappa) / ses[usable], [50 * (1 - level), 50 * (1 + level)])
    return float(max(-1.0, kappa - high_t * se)), float(min(1.0, kappa - low_t * se))


RESAMPLE_PAIRS_UP_TO = 100  # n up to which resampling draws the pairs themselves; above, a multinomial table


def resample(tables: np.ndarray, times: int, rng) -> np.ndarray:
    """Bootstrap resamples of each table of counts (shape m x 5 x 5, all of the same n): shape times x m x 5 x 5.
    Resampling n pairs with replacement gives a table with the multinomial distribution on the table's cell
    proportions; small samples draw the pairs (cost grows with n), larger ones the multinomial (it does not)."""
    m, n = len(tables), int(tables[0].sum())
    flat = tables.reshape(m, 25).astype(np.int64)
    if n > RESAMPLE_PAIRS_UP_TO:
        cells = np.flatnonzero(flat.any(0))  # a cell no table holds cannot appear
        out = np.zeros((times, m, 25))
        out[..., cells] = rng.multinomial(n, flat[:, cells] / n, size=(times, m))
        return out.reshape(times, m, 5, 5)
    pairs = np.repeat(np.tile(np.arange(25), m), flat.ravel()).reshape(m, n)  # each table's pairs as cell codes
    drawn = pairs[np.arange(m)[None, :, None], rng.integers(0, n, size=(times, m, n))]
    drawn += 25 * np.arange(times * m).reshape(times, m, 1)
    return np.bincount(drawn.ravel(), minlength=25 * times * m).reshape(times, m, 5, 5)


def _row_percentiles(t: np.ndarray, qs: list[float]) -> list[np.ndarray]:
    """Per-row percentiles (linear, as np.nanpercentile) of t (rows x k), ignoring NaN; NaN for an empty row."""
    ordered = np.sort(t, axis=1)  # NaN last
    m = np.isfinite(t).sum(1)
    out = []
    for q in qs:
        position = np.maximum(m - 1, 0) * q / 100
        below = np.floor(position).astype(int)
        above = np.minimum(below + 1, np.maximum(m - 1, 0))
        low = np.take_along_axis(ordered, below[:, None], 1)[:, 0]
        high = np.take_along_axis(ordered, above[:, None], 1)[:, 0]
        out.append(np.where(m > 0, low + (position - below) * (high - low), np.nan))
    return out


def _calibrated_level(counts: np.ndarray, kappa: float, rng, outer: int, inner: int) -> float:
    """The smallest candidate level whose bootstrap-t intervals on `outer` resamples (each from `inner`
    resamples of its own) cover `kappa` at least 95% of the time; a resample with too few usable inner
    resamples counts as not covering."""
    first = resample(counts[None], outer, rng)[:, 0]
    k1, se1 = table_kappa_se(first)
    k2, se2 = table_kappa_se(resample(first, inner, rng))
    with np.errstate(divide="ignore", invalid="ignore"):
        t2 = ((k2 - k1) / se2).T  # outer x inner
    t2[~np.isfinite(t2) | (se2.T <= 0)] = np.nan
    enough = (np.isfinite(t2).sum(1) >= 20) & np.isfinite(k1) & (se1 > 0)
    bounds = _row_percentiles(t2, [q for level in CALIBRATION_LEVELS for q in (50 * (1 - level), 50 * (1 + level))])
    for i, level in enumerate(CALIBRATION_LEVELS):
        low_t, high_t = bounds[2 * i], bounds[2 * i + 1]
        with np.errstate(invalid="ignore"):
            covers = enough & (k1 - high_t * se1 <= kappa) & (kappa <= k1 - low_t * se1)
        if covers.mean() >= 0.95:
            return float(level)
    return float(CALIBRATION_LEVELS[-1])


def agreement(judge_scores: list[int], human_scores: list[int], seed: int = 0) -> Agreement:
    """Agreement of two raters on 1-5. A statistic that is undefined is None with its reason in `reasons`:
    no pairs; one pair (kappa, its interval and Spearman need two); a rater who gave every item the same score
    (kappa is then 0 by construction, whatever the other rater did, and Spearman is undefined) — a figure
    that would read as "no agreement" when it says nothing. Kappa's interval alone is also withheld, with its
    reason, where it would not cover the true kappa about 95% of the time (`interval_withheld`)."""
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
    withheld = interval_withheld(a, b)
    if withheld is None:
        result.kappa_low, result.kappa_high = qwk_interval(a, b, seed=seed)
        if result.kappa_low is None:
            withheld = "no interval: the resamples of these pairs give no defined kappa, or all the same one"
    if withheld:
        result.reasons["kappa_low"] = result.reasons["kappa_high"] = withheld
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
