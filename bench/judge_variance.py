"""Coverage of the judge's self-agreement interval (pipeline.evaluation.judge_variance): the jackknife over items
of the pooled quadratic-weighted kappa between an item's repeats.

`python -m bench judge_variance` (or `python -m bench.judge_variance [--datasets N]`): data sets of n items, each
judged K times (K = 3 and 5). An item's true score comes from a judge-like distribution (2%, 4%, 9%, 35%, 50% on
1..5); each repeat keeps it with probability `keep`, else moves it one step (up or down, inward at 1 and 5). The
"coin" judge picks 3 or 4 at random whatever the item. The true self-agreement is the population kappa of two
independent repeats of one item (exact, from the model). A data set's interval counts as covering when it contains
the true kappa; cells where it is withheld (every pair agreeing, or fewer than MIN_INTERVAL_ITEMS items) are shown
with the interval computed anyway, to say where the rule draws the line. Target: at least 85% where it is shown
(a nominal 95% interval; the figures say how far short of 95% it falls).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import Figure, print_table
from pipeline.detector.bench import wilson
from pipeline.evaluation.judge_variance import MIN_INTERVAL_ITEMS, jackknife_interval, pair_table
from pipeline.evaluation.kappa import WEIGHTS

JUDGE_LIKE = np.array([0.02, 0.04, 0.09, 0.35, 0.50])
JUDGES = {"keep 0.9": 0.9, "keep 0.8": 0.8, "keep 0.7": 0.7, "keep 0.5": 0.5, "coin 3/4": None}
SIZES = (10, 15, 20, 30, 40)
REPEATS = (3, 5)
DATASETS = 400


def repeat_probabilities(keep: float | None) -> np.ndarray:
    """P(repeat score | true score): 5 x 5, rows the true score."""
    if keep is None:
        return np.tile([0, 0, 0.5, 0.5, 0], (5, 1))
    move = np.zeros((5, 5))
    for t in range(5):
        move[t, t] = keep
        if t == 0:
            move[t, 1] += 1 - keep
        elif t == 4:
            move[t, 3] += 1 - keep
        else:
            move[t, t - 1] += (1 - keep) / 2
            move[t, t + 1] += (1 - keep) / 2
    return move


def true_kappa(keep: float | None) -> float:
    p = repeat_probabilities(keep)
    joint = (JUDGE_LIKE[:, None, None] * p[:, :, None] * p[:, None, :]).sum(0)
    margin = joint.sum(1)
    return float(1 - (WEIGHTS * joint).sum() / (WEIGHTS * np.outer(margin, margin)).sum())


def draw(rng, keep: float | None, n: int, k: int) -> np.ndarray:
    """n items x k repeat scores (1-5)."""
    p = repeat_probabilities(keep)
    truth = rng.choice(5, size=n, p=JUDGE_LIKE)
    cumulative = p[truth].cumsum(1)
    return (rng.random((n, k, 1)) > cumulative[:, None, :]).sum(2) + 1


def coverage(keep: float | None, n: int, k: int, datasets: int = DATASETS) -> dict:
    true = true_kappa(keep)
    rng = np.random.default_rng(1000 * n + k + int(100 * (keep or 0)))
    covered = shown = 0
    for _ in range(datasets):
        tables = np.stack([pair_table(item) for item in draw(rng, keep, n, k)])
        if np.all(np.trace(tables, axis1=1, axis2=2) >= 1 - 1e-9):
            continue  # withheld: every pair agrees
        low, high = jackknife_interval(tables)
        shown += 1
        covered += low <= true <= high
    return {"kappa": true, "shown": shown, "covered": covered}


def run(datasets: int = DATASETS) -> list[Figure]:
    figures = []
    for name, keep in JUDGES.items():
        for k in REPEATS:
            for n in SIZES:
                start = time.perf_counter()
                result = coverage(keep, n, k, datasets)
                low, high = wilson(result["covered"], result["shown"]) if result["shown"] else (0, 0)
                shown_here = n >= MIN_INTERVAL_ITEMS
                figures.append(
                    Figure(
                        f"self-agreement interval, {name}, K = {k}, n = {n}: coverage",
                        100 * result["covered"] / max(result["shown"], 1),
                        "%",
                        85 if shown_here else None,
                        False,
                        f"true κ {result['kappa']:.2f}; [{100 * low:.1f}, {100 * high:.1f}] of {result['shown']}"
                        + ("" if shown_here else f" (withheld on the page: n < {MIN_INTERVAL_ITEMS})")
                        + f"; {time.perf_counter() - start:.0f} s",
                    )
                )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.judge_variance", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=DATASETS, help=f"data sets per cell (default {DATASETS})")
    print_table(run(parser.parse_args(argv).datasets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
