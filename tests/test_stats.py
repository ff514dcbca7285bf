"""Statistics and risk metrics on hand-computed cases."""

import numpy as np
import pytest

from crosssim.stats import bootstrap_ci, mmrv, pearson, relative_drop, spearman


def test_rank_correlations():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)  # 1 - 6*2/(3*8)
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert np.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_mmrv_hand_computed():
    truth = [0.1, 0.5, 0.9]
    assert mmrv([1, 2, 3], truth) == 0.0  # same order: no violation
    # score swaps the last two: i=1 violates with j=2 (|0.5-0.9| = 0.4), i=2 with j=1 (0.4), i=0 none
    assert mmrv([1, 3, 2], truth) == pytest.approx((0 + 0.4 + 0.4) / 3)


def test_bootstrap_and_drop():
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0], seed=1)
    assert 1.0 <= lo <= 2.5 <= hi <= 4.0
    assert bootstrap_ci([1.0, 2.0, 3.0], seed=1) == bootstrap_ci([1.0, 2.0, 3.0], seed=1)
    assert relative_drop(100.0, 80.0) == pytest.approx(0.2)
    assert relative_drop(-50.0, -75.0) == pytest.approx(0.5)
    assert np.isnan(relative_drop(0.0, 1.0))
