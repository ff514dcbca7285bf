"""engine_weights: how much each engine's sensitivity counts, for metrics of either sign."""

import numpy as np
import pytest

from crosssim.risk import engine_weights


def test_positive_metric_is_the_share_of_the_reference():
    assert engine_weights(np.array([100.0, 50.0, 120.0]), 0).tolist() == [1.0, 0.5, 1.0]


def test_negative_metric_keeps_engines_where_the_policy_does_as_well():
    # Reacher's returns are negative: an engine as good as the reference must count, one twice as
    # bad must not (it used to be: every engine but the reference silently weighed 0).
    w = engine_weights(np.array([-4.0, -4.0, -5.0, -8.0, -3.0]), 0)
    assert w.tolist() == pytest.approx([1.0, 1.0, 0.75, 0.0, 1.0])


def test_no_reference_performance_counts_only_the_reference():
    assert engine_weights(np.array([0.0, 5.0]), 0).tolist() == [1.0, 0.0]
    assert engine_weights(np.array([np.nan, 5.0]), 0).tolist() == [1.0, 0.0]
    assert engine_weights(np.array([10.0, np.nan]), 0).tolist() == [1.0, 0.0]
