"""Statistics and risk metrics on hand-computed cases (the checks on scipy's computations)."""

import numpy as np
import pytest

from crosssim.stats import bootstrap_ci, kendall, mmrv, pearson, relative_drop, spearman


def test_rank_correlations():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)  # 1 - 6*2/(3*8)
    # ties share their mean rank: ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)  # deviations (-1,0,1)·(-1,1,0) = 1, norms sqrt 2
    # 6 pairs, one discordant (2,3 vs 3,2): (5 - 1) / 6
    assert kendall([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)


def test_undefined_correlations_are_nan_without_warnings(recwarn):
    assert np.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert np.isnan(kendall([1], [2]))
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


def test_mmrv_hand_computed():
    truth = [0.1, 0.5, 0.9]
    assert mmrv([1, 2, 3], truth) == 0.0  # same order: no violation
    # score swaps the last two: i=1 violates with j=2 (|0.5-0.9| = 0.4), i=2 with j=1 (0.4), i=0 none
    assert mmrv([1, 3, 2], truth) == pytest.approx((0 + 0.4 + 0.4) / 3)


def test_bootstrap_and_drop():
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0], seed=1)
    assert 1.0 <= lo <= 2.5 <= hi <= 4.0
    assert bootstrap_ci([1.0, 2.0, 3.0], seed=1) == bootstrap_ci([1.0, 2.0, 3.0], seed=1)
    assert bootstrap_ci([]) != bootstrap_ci([])  # (nan, nan)
    assert bootstrap_ci([7.0, float("nan")]) == (7.0, 7.0) == bootstrap_ci([7.0, 7.0, 7.0])
    assert relative_drop(100.0, 80.0) == pytest.approx(0.2)
    assert relative_drop(-50.0, -75.0) == pytest.approx(0.5)
    assert np.isnan(relative_drop(0.0, 1.0))


def test_bootstrap_agrees_with_a_hand_written_percentile_bootstrap():
    """scipy's interval against the textbook recipe (resample with replacement, take the 2.5 and
    97.5 percentiles of the means): equal up to resampling noise, and both near the normal interval."""
    x = np.random.default_rng(3).normal(10.0, 2.0, size=40)
    lo, hi = bootstrap_ci(x, resamples=4000, seed=0)
    means = x[np.random.default_rng(1).integers(0, x.size, size=(4000, x.size))].mean(axis=1)
    hand = np.quantile(means, [0.025, 0.975])
    assert lo == pytest.approx(hand[0], abs=0.1) and hi == pytest.approx(hand[1], abs=0.1)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert lo == pytest.approx(x.mean() - half, abs=0.15) and hi == pytest.approx(x.mean() + half, abs=0.15)
    med = bootstrap_ci(x, statistic=np.median, seed=0)
    assert med[0] < np.median(x) < med[1]


def test_share_interval_is_wilsons():
    from crosssim.stats import share_interval

    lo, hi = share_interval(10, 20)  # Wilson: 0.5 +- 1.96 sqrt(0.25/20 + 1.96^2/1600) / (1 + 1.96^2/20)
    assert (lo, hi) == pytest.approx((0.2993, 0.7007), abs=1e-4)
    assert share_interval(20, 20)[1] == pytest.approx(1.0) and share_interval(20, 20)[0] == pytest.approx(0.8389, abs=1e-4)
    assert all(np.isnan(share_interval(0, 0)))
