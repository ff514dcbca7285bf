"""Small statistics crosssim reports: bootstrap confidence intervals, drops."""

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
