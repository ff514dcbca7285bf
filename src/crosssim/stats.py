"""Small statistics crosssim reports: bootstrap confidence intervals, drops, rank agreement (validation)."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values, *, level: float = 0.95, resamples: int = 2000, seed: int = 0,
                 statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic``; (nan, nan) for no data. Deterministic in ``seed``."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size == 1:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    stats = statistic(x[idx], axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


def relative_drop(reference: float, value: float) -> float:
    """(reference - value) / |reference|: 0 = as good as the reference, 1 = lost everything."""
    if not np.isfinite(reference) or not np.isfinite(value) or reference == 0:
        return float("nan")
    return float((reference - value) / abs(reference))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), 0-based."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size)
    for value in np.unique(x):
        tied = x == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def pearson(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def spearman(a, b) -> float:
    """Spearman rank correlation (Pearson of average ranks)."""
    return pearson(_ranks(a), _ranks(b))


def mmrv(score, truth) -> float:
    """SIMPLER's mean maximum rank violation: mean over i of max over j of
    |truth_i - truth_j| * [(score_i > score_j) != (truth_i > truth_j)]. 0 is perfect."""
    s, r = np.asarray(score, float), np.asarray(truth, float)
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return float(np.mean(np.max(np.abs(r[:, None] - r[None, :]) * violated, axis=1))) if s.size else float("nan")

