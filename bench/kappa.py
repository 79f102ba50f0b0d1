"""Coverage of the weighted-kappa interval the Calibration page shows (pipeline.calibration.agreement).

1,000 simulated data sets of n = 40 judge-human pairs for each true kappa (0.4, 0.7, 0.9), each setting on
its own. Judge-like scores: a latent quality z ~ N(0, 1); the person and the judge each see z plus their
own N(0, sigma) noise and cut it into 1-5 with thresholds that make the scores skewed like a judge's —
2%, 4%, 9%, 35%, 50% on 1..5, mostly 4-5. sigma is solved so that the population's quadratic-weighted
kappa (from 2,000,000 draws) is the target. A data set counts when the 95% interval contains that kappa.
Target: 93-97% in every setting.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from bench.common import Figure
from pipeline.calibration.agreement import WEIGHTS, qwk_interval

MARGINAL = np.array([0.02, 0.04, 0.09, 0.35, 0.50])
CUTS = norm.ppf(np.cumsum(MARGINAL)[:-1])
TARGETS = (0.4, 0.7, 0.9)


def draw(rng, sigma: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(judge, human) scores of n items."""
    z = rng.normal(0, 1, n)
    scale = np.sqrt(1 + sigma**2)
    judge = np.searchsorted(CUTS, (z + rng.normal(0, sigma, n)) / scale) + 1
    human = np.searchsorted(CUTS, (z + rng.normal(0, sigma, n)) / scale) + 1
    return judge, human


def population_kappa(sigma: float, draws: int = 2_000_000) -> float:
    judge, human = draw(np.random.default_rng(123), sigma, draws)
    joint = np.zeros((5, 5))
    np.add.at(joint, (judge - 1, human - 1), 1)
    joint /= joint.sum()
    return float(1 - (WEIGHTS * joint).sum() / (WEIGHTS * np.outer(joint.sum(1), joint.sum(0))).sum())


def sigma_for(kappa: float, draws: int = 2_000_000) -> float:
    low, high = 1e-3, 5.0
    for _ in range(25):
        mid = (low + high) / 2
        low, high = (mid, high) if population_kappa(mid, draws) > kappa else (low, mid)
    return (low + high) / 2


def coverage(target: float, datasets: int = 1000, n: int = 40, draws: int = 2_000_000) -> dict:
    sigma = sigma_for(target, draws)
    true = population_kappa(sigma, draws)
    rng = np.random.default_rng(int(target * 100))
    covered = undefined = 0
    for k in range(datasets):
        low, high = qwk_interval(*draw(rng, sigma, n), seed=k)
        if low is None:
            undefined += 1
        else:
            covered += low <= true <= high
    return {"kappa": true, "sigma": sigma, "coverage": covered / datasets, "undefined": undefined}


def run(datasets: int = 1000) -> list[Figure]:
    figures = []
    for target in TARGETS:
        result = coverage(target, datasets)
        figures.append(
            Figure(
                f"kappa interval coverage, true κ {target} (n = 40)",
                100 * result["coverage"],
                "%",
                93,
                False,
                f"{datasets} data sets, judge-like skewed scores, calibrated bootstrap-t; target 93-97%"
                + (f"; {result['undefined']} with no interval" if result["undefined"] else ""),
            )
        )
    return figures
