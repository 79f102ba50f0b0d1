"""The quadratic-weighted kappa of 5 x 5 tables of counts and its standard error: the judge's agreement with people
(pipeline/calibration/agreement.py) and with itself (judge_variance.py) are both read from it."""

from __future__ import annotations

import numpy as np

WEIGHTS = np.array([[(i - j) ** 2 for j in range(5)] for i in range(5)], dtype=float)
AGREE = 1 - WEIGHTS / 16  # agreement weights of the quadratic kappa on 1-5
ROW_OF_CELL = np.repeat(np.eye(5), 5, axis=0)  # 25 x 5: cell (i, j) -> i, the judge's score
COL_OF_CELL = np.tile(np.eye(5), (5, 1))  # 25 x 5: cell (i, j) -> j, the people's score


def table_kappa_se(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic-weighted kappa and its large-sample standard error (Fleiss, Cohen & Everitt 1969) of each 5 x 5
    table of counts (shape ... x 5 x 5); NaN where kappa is undefined. Written as products with the 25 cells
    flattened, as a bootstrap calls it on tens of thousands of tables."""
    counts = np.asarray(counts, dtype=float)
    p = counts.reshape(*counts.shape[:-2], 25)
    n = p @ np.ones(25)
    p = p / n[..., None]
    p_row, p_col = p @ ROW_OF_CELL, p @ COL_OF_CELL
    mean_row = p_col @ AGREE.T  # w̄_i. = Σ_j p_.j w_ij
    mean_col = p_row @ AGREE  # w̄_.j = Σ_i p_i. w_ij
    observed = p @ AGREE.ravel()
    expected = (mean_col * p_col) @ np.ones(5)  # Σ_ij p_i. p_.j w_ij
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)
        cell_mean = mean_row @ ROW_OF_CELL.T + mean_col @ COL_OF_CELL.T  # w̄_i. + w̄_.j of each cell
        deviation = AGREE.ravel() - cell_mean * (1 - kappa)[..., None]
        spread = (p * deviation * deviation) @ np.ones(25)
        variance = (spread - (kappa - expected * (1 - kappa)) ** 2) / (n * (1 - expected) ** 2)
    return kappa, np.sqrt(np.maximum(variance, 0))
