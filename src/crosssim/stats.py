"""Small statistics crosssim reports: bootstrap confidence intervals, drops, rank agreement (validation).

The computations are scipy's (``scipy.stats.bootstrap``, ``pearsonr``, ``spearmanr``,
``kendalltau``); this module fixes the conventions crosssim relies on: NaNs dropped, a seed for the
same numbers on every run, and NaN (never an exception or a warning) where a correlation is undefined.
"""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values, *, level: float = 0.95, resamples: int = 2000, seed: int = 0,
                 statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic``; (nan, nan) for no data. Deterministic in ``seed``.

    ``statistic`` is called as ``statistic(sample, axis=-1)`` on a batch of resamples (numpy's
    reductions take that form)."""
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    if x.size == 1 or np.all(x == x[0]):  # one value: no spread to resample (scipy refuses one value)
        v = float(statistic(x[None, :], axis=-1)[0])
        return v, v
    res = bootstrap((x,), statistic, n_resamples=resamples, confidence_level=level, method="percentile",
                    vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def share_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a share of ``k`` successes in ``n`` trials (scipy's binomtest); (nan,
    nan) for no trials. Used where a count of episodes meets a rule (the harness check's task success)."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def relative_drop(reference: float, value: float) -> float:
    """(reference - value) / |reference|: 0 = as good as the reference, 1 = lost everything."""
    if not np.isfinite(reference) or not np.isfinite(value) or reference == 0:
        return float("nan")
    return float((reference - value) / abs(reference))


def _pair(a, b) -> tuple[np.ndarray, np.ndarray] | None:
    """The two samples as float arrays, or None where no correlation is defined (fewer than two
    pairs, or a constant sample: scipy would warn and return NaN)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size < 2 or a.size != b.size or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return a, b


def pearson(a, b) -> float:
    """Pearson correlation; NaN when undefined."""
    from scipy.stats import pearsonr

    pair = _pair(a, b)
    return float("nan") if pair is None else float(pearsonr(*pair).statistic)


def spearman(a, b) -> float:
    """Spearman rank correlation (Pearson of average ranks, ties sharing their mean rank); NaN when undefined."""
    from scipy.stats import spearmanr

    pair = _pair(a, b)
    return float("nan") if pair is None else float(spearmanr(*pair).statistic)


def kendall(a, b) -> float:
    """Kendall's tau-b (ties counted in both samples); NaN when undefined."""
    from scipy.stats import kendalltau

    pair = _pair(a, b)
    return float("nan") if pair is None else float(kendalltau(*pair).statistic)


def mmrv(score, truth) -> float:
    """SIMPLER's mean maximum rank violation: mean over i of max over j of
    |truth_i - truth_j| * [(score_i > score_j) != (truth_i > truth_j)]. 0 is perfect."""
    s, r = np.asarray(score, float), np.asarray(truth, float)
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return float(np.mean(np.max(np.abs(r[:, None] - r[None, :]) * violated, axis=1))) if s.size else float("nan")
