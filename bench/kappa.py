"""Coverage of the weighted-kappa interval the Calibration page shows (pipeline.calibration.agreement), and how
often it is withheld.

`python -m bench kappa` (or `python -m bench.kappa [--datasets N] [--show-all]`): data sets of n judge-human pairs,
n = 5, 10, 20, 50 and 100, true kappa 0.7, for two score distributions: balanced (20% on each of 1..5) and 80% fives
(2%, 3%, 5%, 10%, 80% on 1..5). Scores come from a latent quality z ~ N(0, 1): the person and the judge each see z
plus their own N(0, sigma) noise and cut it into 1-5 with the thresholds that give that distribution; sigma is
solved so that the population's quadratic-weighted kappa (exact, from the bivariate normal) is the target.

Each data set goes through agreement(), as on the page: kappa is n/a when a rater gave every item one score; the
interval is withheld where `interval_withheld` says it is unreliable; the others are shown, and a shown interval
counts as covered when it contains the true kappa. Coverage is of the intervals shown, with its 95% Wilson
interval. Target: 93-97% in every cell. --show-all computes the interval where it would be withheld too (the
interval as it was before it could be withheld).
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy.stats import multivariate_normal, norm

from bench.common import Figure, print_table
from pipeline.calibration.agreement import agreement, qwk_interval
from pipeline.detector.bench import wilson
from pipeline.evaluation.kappa import WEIGHTS

JUDGE_LIKE = np.array([0.02, 0.04, 0.09, 0.35, 0.50])  # mostly 4-5, as an LLM judge scores
DISTRIBUTIONS = {"balanced": np.full(5, 0.2), "80% fives": np.array([0.02, 0.03, 0.05, 0.10, 0.80])}
SIZES = (5, 10, 20, 50, 100)
TARGET = 0.7
DATASETS = 2000  # per cell (issue 26): about 10 CPU-minutes in all; cells below 15 pairs withhold every interval
MEASURABLE = 100  # fewer intervals shown in a cell: its coverage is reported, not held to the target


def cuts_for(marginal: np.ndarray) -> np.ndarray:
    return norm.ppf(np.cumsum(marginal)[:-1])


def draw(rng, sigma: float, n: int, marginal: np.ndarray = JUDGE_LIKE) -> tuple[np.ndarray, np.ndarray]:
    """(judge, human) scores of n items."""
    cuts = cuts_for(marginal)
    z = rng.normal(0, 1, n)
    scale = np.sqrt(1 + sigma**2)
    judge = np.searchsorted(cuts, (z + rng.normal(0, sigma, n)) / scale) + 1
    human = np.searchsorted(cuts, (z + rng.normal(0, sigma, n)) / scale) + 1
    return judge, human


def population_kappa(sigma: float, draws: int | None = None, marginal: np.ndarray = JUDGE_LIKE) -> float:
    """The population's quadratic-weighted kappa: exact (the two latent scores are standard bivariate normal with
    correlation 1 / (1 + sigma^2)), or from `draws` simulated pairs."""
    if draws:
        judge, human = draw(np.random.default_rng(123), sigma, draws, marginal)
        joint = np.zeros((5, 5))
        np.add.at(joint, (judge - 1, human - 1), 1)
        joint /= joint.sum()
    else:
        edges = np.concatenate([[-12.0], cuts_for(marginal), [12.0]])
        rho = 1 / (1 + sigma**2)
        grid = np.array(np.meshgrid(edges, edges, indexing="ij")).reshape(2, -1).T
        cdf = multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf(grid).reshape(6, 6)
        joint = np.diff(np.diff(cdf, axis=0), axis=1)
    return float(1 - (WEIGHTS * joint).sum() / (WEIGHTS * np.outer(joint.sum(1), joint.sum(0))).sum())


def sigma_for(kappa: float, draws: int | None = None, marginal: np.ndarray = JUDGE_LIKE) -> float:
    low, high = 1e-3, 5.0
    for _ in range(25):
        mid = (low + high) / 2
        low, high = (mid, high) if population_kappa(mid, draws, marginal) > kappa else (low, mid)
    return (low + high) / 2


def coverage(
    target: float,
    datasets: int = 1000,
    n: int = 40,
    draws: int | None = None,
    marginal: np.ndarray = JUDGE_LIKE,
    show_all: bool = False,
) -> dict:
    """Of `datasets` simulated data sets of n pairs: how many had kappa n/a (a rater gave one score to all), how
    many had the interval withheld, how many were shown and how many of those contain the true kappa
    (`coverage`, None when none was shown). show_all: compute the interval even where it is withheld (the
    interval before it could be withheld)."""
    sigma = sigma_for(target, draws, marginal)
    true = population_kappa(sigma, draws, marginal)
    rng = np.random.default_rng(int(target * 100) + 1000 * n + int(1000 * marginal[-1]))
    na = withheld = shown = covered = 0
    for k in range(datasets):
        judge, human = draw(rng, sigma, n, marginal)
        if show_all:  # kappa is n/a where a rater gave one score; qwk_interval gives no zero-width interval
            kappa_defined = len(set(judge)) > 1 and len(set(human)) > 1
            low, high = qwk_interval(judge, human, seed=k) if kappa_defined else (None, None)
        else:
            result = agreement(judge, human, seed=k)
            low, high, kappa_defined = result.kappa_low, result.kappa_high, result.kappa is not None
        if not kappa_defined:
            na += 1
        elif low is None:
            withheld += 1
        else:
            shown += 1
            covered += low <= true <= high
    return {
        "kappa": true,
        "sigma": sigma,
        "datasets": datasets,
        "na": na,
        "withheld": withheld,
        "shown": shown,
        "covered": covered,
        "coverage": covered / shown if shown else None,
    }


def _cell(args: tuple) -> tuple:
    name, n, datasets, show_all = args
    start = time.perf_counter()
    result = coverage(TARGET, datasets, n, marginal=DISTRIBUTIONS[name], show_all=show_all)
    return name, n, result, time.perf_counter() - start


def figure(name: str, n: int, result: dict, seconds: float) -> Figure:
    datasets, shown = result["datasets"], result["shown"]
    label = f"κ interval, {name}, n = {n}"
    counts = f"{100 * result['withheld'] / datasets:.1f}% withheld, {100 * result['na'] / datasets:.1f}% n/a"
    if not shown:
        return Figure(f"{label}: shown", 0, "%", None, False, f"of {datasets} data sets: {counts}; {seconds:.0f} s")
    low, high = wilson(result["covered"], shown)
    few = shown < MEASURABLE
    return Figure(
        f"{label}: coverage",
        100 * result["coverage"],
        "%",
        None if few else 93,
        False,
        f"[{100 * low:.1f}, {100 * high:.1f}] of {shown} shown of {datasets}"
        + (" (too few to hold to the target)" if few else "")
        + f"; {counts}; {seconds:.0f} s",
    )


def run(datasets: int = DATASETS, show_all: bool = False) -> list[Figure]:
    cells = [(name, n, datasets, show_all) for name in DISTRIBUTIONS for n in SIZES]
    with ProcessPoolExecutor(max_workers=min(len(cells), os.cpu_count() or 1)) as pool:
        results = list(pool.map(_cell, cells))
    return [figure(name, n, result, seconds) for name, n, result, seconds in results]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kappa", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", type=int, default=DATASETS, help=f"data sets per cell (default {DATASETS})")
    parser.add_argument(
        "--show-all", action="store_true", help="measure the interval where it would be withheld too (before)"
    )
    args = parser.parse_args(argv)
    print_table(run(args.datasets, args.show_all))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
